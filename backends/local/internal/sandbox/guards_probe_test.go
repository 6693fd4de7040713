package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A probe is one statement that makes a goja built-in do work or allocation
// proportional to an argument, a length or a receiver's size in one Go
// call. code is the bomb the guards must stop; before, when set, is a
// smaller one of the same call for measuring the unguarded runtime, whose
// code would run for minutes or take more memory than the machine should
// give a probe. setup runs before the bomb on the run clock, so probes with
// one get a longer bound (setupMs).
type probe struct {
	name, code, before string
	setupMs            int64
}

// guardProbes lists the candidates, built-in by built-in, from goja's
// builtin_*.go, string*.go, typedarrays.go, array*.go, builtin_json.go and
// builtin_regexp.go. Each is a statement in an async arrow.
var guardProbes = []probe{
	// String.prototype and String.
	{name: "String.prototype.repeat", code: `'x'.repeat(2**29)`},
	{name: "String.prototype.repeat (UTF-16)", code: `'é'.repeat(2**28)`, before: `'é'.repeat(2**27)`},
	{name: "String.prototype.padStart", code: `'x'.padStart(2**29)`},
	{name: "String.prototype.padEnd", code: `''.padEnd(2**29, 'ab')`},
	{name: "String.prototype.concat", code: `const s = 'x'.repeat(2**25); s.concat(s, s, s, s, s, s, s, s, s, s, s, s, s, s, s)`, setupMs: 1000},
	{name: "String.prototype.split('')", code: `'x'.repeat(2**25).split('')`, before: `'x'.repeat(2**23).split('')`},
	{name: "String.prototype.split(sep)", code: `'x,'.repeat(2**24).split(',')`, before: `'x,'.repeat(2**22).split(',')`},
	{name: "String.prototype.replaceAll(string)", code: `'x'.repeat(2**20).replaceAll('x', 'y'.repeat(512))`},
	{name: "String.prototype.replace(/g)", code: `'x'.repeat(2**20).replace(/x/g, 'y'.repeat(512))`},
	{name: "String.prototype.replace(/g, fn native)", code: `'x'.repeat(2**24).replace(/x/g, String)`, before: `'x'.repeat(2**22).replace(/x/g, String)`},
	{name: "String.prototype.match(/g)", code: `'x'.repeat(2**24).match(/x/g)`, before: `'x'.repeat(2**22).match(/x/g)`},
	{name: "String.prototype.normalize", code: `'\u00e9'.repeat(2**25).normalize('NFD')`, before: `'\u00e9'.repeat(2**23).normalize('NFD')`},
	{name: "String.prototype.toUpperCase", code: `'x'.repeat(2**26).toUpperCase()`},
	{name: "String.prototype.toLowerCase (UTF-16)", code: `'\u0130'.repeat(2**25).toLowerCase()`},
	{name: "String.prototype.indexOf", code: `'a'.repeat(2**25).indexOf('a'.repeat(2**12) + 'b')`},
	{name: "String.prototype.localeCompare", code: `'x'.repeat(2**25).localeCompare('x'.repeat(2**25) + 'y')`},
	{name: "String.fromCharCode.apply", code: `String.fromCharCode.apply(null, {length: 2**26})`, before: `String.fromCharCode.apply(null, {length: 2**23})`},
	{name: "String.fromCodePoint.apply", code: `String.fromCodePoint.apply(null, new Uint8Array(2**26))`, before: `String.fromCodePoint.apply(null, new Uint8Array(2**23))`},
	{name: "String.raw", code: `String.raw({ raw: { length: 2**40 } })`, before: `String.raw({ raw: { length: 2**23 } })`},
	{name: "encodeURIComponent", code: `encodeURIComponent('\u00e9'.repeat(2**25))`, before: `encodeURIComponent('\u00e9'.repeat(2**23))`},
	{name: "escape", code: `escape('\u00e9'.repeat(2**25))`, before: `escape('\u00e9'.repeat(2**23))`},
	{name: "decodeURIComponent", code: `decodeURIComponent('%41'.repeat(2**25))`, before: `decodeURIComponent('%41'.repeat(2**23))`},

	// Array.prototype over holes and array-likes.
	{name: "Array.prototype.join (holes)", code: `new Array(2**32-1).join()`, before: `new Array(2**24).join()`},
	{name: "Array.prototype.join (dense)", code: `Array(1e7).fill('a').join('')`, before: `Array(2e6).fill('a').join('')`},
	{name: "Array.prototype.join (separator)", code: `new Array(2**20).join('x'.repeat(2**10))`},
	{name: "Array.prototype.toString", code: `String(new Array(2**32-1))`, before: `String(new Array(2**24))`},
	{name: "Array.prototype.toLocaleString", code: `new Array(2**32-1).toLocaleString()`, before: `new Array(2**24).toLocaleString()`},
	{name: "Array.prototype.fill (holes)", code: `new Array(5e7).fill(1.5)`, before: `new Array(5e6).fill(1.5)`},
	{name: "Array.prototype.fill (array-like)", code: `Array.prototype.fill.call({length: 2**40}, 0)`, before: `Array.prototype.fill.call({length: 2**22}, 0)`},
	{name: "Array.prototype.slice (array-like)", code: `Array.prototype.slice.call({length: 5e7})`, before: `Array.prototype.slice.call({length: 2e7})`},
	{name: "Array.prototype.slice (holes)", code: `new Array(2**32-1).slice()`, before: `new Array(2e7).slice()`},
	{name: "Array.prototype.splice (holes)", code: `new Array(2**32-1).splice(0)`, before: `new Array(2e7).splice(0)`},
	{name: "Array.prototype.splice (insert)", code: `new Array(2**32-2).splice(0, 0, 1)`, before: `new Array(2e7).splice(0, 0, 1)`},
	{name: "Array.prototype.concat", code: `[].concat(new Array(1e8))`, before: `[].concat(new Array(2e7))`},
	{name: "Array.prototype.indexOf (array-like)", code: `Array.prototype.indexOf.call({length: 2**40}, 1)`, before: `Array.prototype.indexOf.call({length: 2**24}, 1)`},
	{name: "Array.prototype.lastIndexOf (holes)", code: `new Array(2**32-1).lastIndexOf(1)`, before: `new Array(2**24).lastIndexOf(1)`},
	{name: "Array.prototype.includes (holes)", code: `new Array(2**32-1).includes(1)`, before: `new Array(2**24).includes(1)`},
	{name: "Array.prototype.every (holes)", code: `new Array(2**32-1).every(x => x)`, before: `new Array(2**24).every(x => x)`},
	{name: "Array.prototype.some (holes)", code: `new Array(2**32-1).some(x => x)`, before: `new Array(2**24).some(x => x)`},
	{name: "Array.prototype.forEach (holes)", code: `new Array(2**32-1).forEach(x => x)`, before: `new Array(2**24).forEach(x => x)`},
	{name: "Array.prototype.map (holes)", code: `new Array(2**32-1).map(x => x)`, before: `new Array(2**25).map(x => x)`},
	{name: "Array.prototype.filter (holes)", code: `new Array(2**32-1).filter(x => x)`, before: `new Array(2**24).filter(x => x)`},
	{name: "Array.prototype.reduce (holes)", code: `new Array(2**32-1).reduce((a, b) => a, 0)`, before: `new Array(2**24).reduce((a, b) => a, 0)`},
	{name: "Array.prototype.reduceRight (holes)", code: `new Array(2**32-1).reduceRight((a, b) => a, 0)`, before: `new Array(2**24).reduceRight((a, b) => a, 0)`},
	{name: "Array.prototype.find (native callback)", code: `new Array(2**32-1).find(Boolean)`, before: `new Array(2**23).find(Boolean)`},
	{name: "Array.prototype.findIndex (native callback)", code: `new Array(2**32-1).findIndex(Boolean)`, before: `new Array(2**23).findIndex(Boolean)`},
	{name: "Array.prototype.findLast (native callback)", code: `new Array(2**32-1).findLast(Boolean)`, before: `new Array(2**23).findLast(Boolean)`},
	{name: "Array.prototype.findLastIndex (native callback)", code: `new Array(2**32-1).findLastIndex(Boolean)`, before: `new Array(2**23).findLastIndex(Boolean)`},
	{name: "Array.prototype.forEach (native callback)", code: `const a = 'x'.repeat(2**24).split(''); a.forEach(Object.freeze)`, before: `const a = 'x'.repeat(2**22).split(''); a.forEach(Object.freeze)`, setupMs: 3000},
	{name: "Array.prototype.flat", code: `Array(1e7).fill([1, 2]).flat()`, before: `Array(1e6).fill([1, 2]).flat()`},
	{name: "Array.prototype.flat (holes)", code: `new Array(2**32-1).flat()`, before: `new Array(2**23).flat()`},
	{name: "Array.prototype.flatMap (native callback)", code: `new Array(2**32-1).flatMap(Boolean)`, before: `new Array(2**23).flatMap(Boolean)`},
	{name: "Array.prototype.sort (dense)", code: `const a = 'x'.repeat(2**23).split(''); a.sort()`, before: `const a = 'x'.repeat(2**21).split(''); a.sort()`, setupMs: 3000},
	{name: "Array.prototype.sort (array-like)", code: `Array.prototype.sort.call({length: 2**32-1})`, before: `Array.prototype.sort.call({length: 2**23})`},
	{name: "Array.prototype.reverse (holes)", code: `new Array(2**32-1).reverse()`, before: `new Array(2**23).reverse()`},
	{name: "Array.prototype.copyWithin (holes)", code: `new Array(2**32-1).copyWithin(0, 1)`, before: `new Array(2**23).copyWithin(0, 1)`},
	{name: "Array.prototype.shift (array-like)", code: `Array.prototype.shift.call({length: 2**40})`, before: `Array.prototype.shift.call({length: 2**22})`},
	{name: "Array.prototype.unshift (holes)", code: `new Array(2**32-2).unshift(1)`, before: `new Array(2**22).unshift(1)`},
	{name: "Array.prototype.toReversed (holes)", code: `new Array(2**32-1).toReversed()`, before: `new Array(2**23).toReversed()`},
	{name: "Array.prototype.toSorted (holes)", code: `new Array(2**32-2).toSorted()`, before: `new Array(2**23).toSorted()`},
	{name: "Array.prototype.toSpliced (holes)", code: `new Array(2**32-2).toSpliced(0, 0)`, before: `new Array(2**23).toSpliced(0, 0)`},
	{name: "Array.prototype.with (holes)", code: `new Array(2**32-1).with(0, 1)`, before: `new Array(2**23).with(0, 1)`},
	{name: "Array.from(array-like)", code: `Array.from({length: 5e7})`, before: `Array.from({length: 2**23})`},
	{name: "Array.from(iterator)", code: `Array.from(new Array(2e7).keys())`, before: `Array.from(new Array(2**22).keys())`},
	{name: "spread of keys()", code: `[...new Array(2e7).keys()]`, before: `[...new Array(2**22).keys()]`},
	{name: "Array.prototype.push.apply", code: `[].push.apply([], {length: 1e8})`, before: `[].push.apply([], {length: 2**23})`},

	// Object.
	{name: "Object.keys (dense)", code: `const a = 'x'.repeat(2**24).split(''); Object.keys(a)`, before: `const a = 'x'.repeat(2**22).split(''); Object.keys(a)`, setupMs: 3000},
	{name: "Object.keys (string)", code: `Object.keys('x'.repeat(2**25))`, before: `Object.keys('x'.repeat(2**22))`},
	{name: "Object.values (string)", code: `Object.values('x'.repeat(2**25))`, before: `Object.values('x'.repeat(2**22))`},
	{name: "Object.entries (string)", code: `Object.entries('x'.repeat(2**24))`, before: `Object.entries('x'.repeat(2**21))`},
	{name: "Object.getOwnPropertyNames (typed array)", code: `Object.getOwnPropertyNames(new Uint8Array(2**26))`, before: `Object.getOwnPropertyNames(new Uint8Array(2**22))`},
	{name: "Object.assign (string)", code: `Object.assign({}, 'x'.repeat(2**24))`, before: `Object.assign({}, 'x'.repeat(2**21))`},
	{name: "Object.getOwnPropertyDescriptors (string)", code: `Object.getOwnPropertyDescriptors('x'.repeat(2**24))`, before: `Object.getOwnPropertyDescriptors('x'.repeat(2**21))`},
	{name: "Object.freeze (dense)", code: `const a = 'x'.repeat(2**24).split(''); Object.freeze(a)`, before: `const a = 'x'.repeat(2**22).split(''); Object.freeze(a)`, setupMs: 3000},
	{name: "Reflect.ownKeys (typed array)", code: `Reflect.ownKeys(new Uint8Array(2**26))`, before: `Reflect.ownKeys(new Uint8Array(2**22))`},

	// ArrayBuffer and typed arrays.
	{name: "new ArrayBuffer", code: `new ArrayBuffer(2**30)`},
	{name: "new Float64Array(n)", code: `new Float64Array(2**27)`},
	{name: "new Uint8Array(array-like)", code: `new Uint8Array({length: 2**30})`, before: `new Uint8Array({length: 2**23})`},
	{name: "new Uint8Array(iterable)", code: `new Uint8Array(new Array(2**26).keys())`, before: `new Uint8Array(new Array(2**22).keys())`},
	{name: "new Float64Array(typed array)", code: `new Float64Array(new Uint8Array(2**27))`, before: `new Float64Array(new Uint8Array(2**24))`},
	{name: "Uint8Array.from(array-like)", code: `Uint8Array.from({length: 2**30})`, before: `Uint8Array.from({length: 2**23})`},
	{name: "Uint8Array.of.apply", code: `Uint8Array.of.apply(Uint8Array, new Uint8Array(2**26))`, before: `Uint8Array.of.apply(Uint8Array, new Uint8Array(2**22))`},
	{name: "ArrayBuffer.prototype.slice", code: `new ArrayBuffer(2**26).slice()`},
	{name: "%TypedArray%.prototype.join", code: `new Uint8Array(2**26).join()`, before: `new Uint8Array(2**24).join()`},
	{name: "%TypedArray%.prototype.toLocaleString", code: `new Uint8Array(2**26).toLocaleString()`, before: `new Uint8Array(2**22).toLocaleString()`},
	{name: "%TypedArray%.prototype.fill", code: `new Uint8Array(2**26).fill(1)`},
	{name: "%TypedArray%.prototype.set (array-like)", code: `new Uint8Array(2**26).set({length: 2**26})`, before: `new Uint8Array(2**23).set({length: 2**23})`},
	{name: "%TypedArray%.prototype.slice", code: `new Float64Array(2**23).slice()`},
	{name: "%TypedArray%.prototype.map (native callback)", code: `new Float64Array(2**23).map(Math.abs)`, before: `new Float64Array(2**21).map(Math.abs)`},
	{name: "%TypedArray%.prototype.filter (native callback)", code: `new Float64Array(2**23).filter(Boolean)`, before: `new Float64Array(2**21).filter(Boolean)`},
	{name: "%TypedArray%.prototype.indexOf", code: `new Uint8Array(2**26).indexOf(1)`},
	{name: "%TypedArray%.prototype.includes", code: `new Uint8Array(2**26).includes(1)`},
	{name: "%TypedArray%.prototype.lastIndexOf", code: `new Uint8Array(2**26).lastIndexOf(1)`},
	{name: "%TypedArray%.prototype.sort", code: `new Float64Array(2**23).sort()`},
	{name: "%TypedArray%.prototype.reverse", code: `new Uint8Array(2**26).reverse()`},
	{name: "%TypedArray%.prototype.toSorted", code: `new Float64Array(2**23).toSorted()`},
	{name: "%TypedArray%.prototype.toReversed", code: `new Float64Array(2**23).toReversed()`},
	{name: "%TypedArray%.prototype.with", code: `new Float64Array(2**23).with(0, 1)`},
	{name: "%TypedArray%.prototype.forEach (native callback)", code: `new Uint8Array(2**24).forEach(Math.abs)`, before: `new Uint8Array(2**22).forEach(Math.abs)`},
	{name: "%TypedArray%.prototype.find (native callback)", code: `new Uint8Array(2**24).find(Boolean)`, before: `new Uint8Array(2**22).find(Boolean)`},

	// JSON.
	{name: "JSON.stringify (array)", code: `JSON.stringify(new Array(5e6).fill('x'.repeat(20)))`, before: `JSON.stringify(new Array(1e6).fill('x'.repeat(20)))`},
	{name: "JSON.stringify (holes, indent)", code: `JSON.stringify(new Array(2**26), null, 10)`, before: `JSON.stringify(new Array(2**22), null, 10)`},
	{name: "JSON.stringify (string)", code: `JSON.stringify('"'.repeat(2**26))`},
	{name: "JSON.parse (nested arrays)", code: `JSON.parse('[' + '[],'.repeat(2**22) + '[]]')`, before: `JSON.parse('[' + '[],'.repeat(2**20) + '[]]')`},

	// Function application.
	{name: "Function.prototype.apply", code: `Math.max.apply(null, {length: 1e8})`, before: `Math.max.apply(null, {length: 2**23})`},
	{name: "Reflect.apply", code: `Reflect.apply(Math.max, null, {length: 1e8})`, before: `Reflect.apply(Math.max, null, {length: 2**23})`},
	{name: "Reflect.construct", code: `Reflect.construct(Array, {length: 1e8})`, before: `Reflect.construct(Array, {length: 2**23})`},
	{name: "Function.prototype.bind", code: `Math.max.bind.apply(Math.max, {length: 1e8})`, before: `Math.max.bind.apply(Math.max, {length: 2**23})`},

	// Collections and promises from large iterables.
	{name: "new Set(string)", code: `new Set('x'.repeat(2**26))`, before: `new Set('x'.repeat(2**23))`},
	{name: "new Map(keys entries)", code: `new Map(new Array(2**25).entries())`, before: `new Map(new Array(2**21).entries())`},
	{name: "Promise.all", code: `Promise.all(new Array(2**25).keys())`, before: `Promise.all(new Array(2**20).keys())`},

	// RegExp.
	{name: "RegExp.prototype[Symbol.replace] (large replacement)", code: `'x'.repeat(2**20).replace(/x/g, 'y'.repeat(512))`, before: `'x'.repeat(2**18).replace(/x/g, 'y'.repeat(512))`},
	{name: "RegExp.prototype[Symbol.replace] (many matches)", code: `'x'.repeat(2**24).replace(/x/g, 'y')`, before: `'x'.repeat(2**22).replace(/x/g, 'y')`},
	{name: "RegExp.prototype[Symbol.match] (many matches)", code: `'x'.repeat(2**24).match(/x/g)`, before: `'x'.repeat(2**22).match(/x/g)`},
	{name: "RegExp.prototype[Symbol.split] (many matches)", code: `'x'.repeat(2**24).split(/x/)`, before: `'x'.repeat(2**22).split(/x/)`},

	// Syntax and engine work no wrapper reaches.
	{name: "spread of a string (syntax)", code: `[...'x'.repeat(2**25)]`, before: `[...'x'.repeat(2**22)]`},
	{name: "object spread of a string (syntax)", code: `({ ...'x'.repeat(2**22) })`, before: `({ ...'x'.repeat(2**18) })`},
	{name: "string + (syntax)", code: `const s = 'x'.repeat(2**26); const t = s + s + s + s`, setupMs: 2000},
	{name: "BigInt to string (ToString)", code: `String(2n ** (2n ** 26n))`, before: `String(2n ** (2n ** 22n))`},
	{name: "RegExp backtracking", code: `/(a*)*\1b/.test('a'.repeat(30))`, before: `/(a*)*\1b/.test('a'.repeat(20))`},
}

// probeResult is what one probe measured in its own process.
type probeResult struct {
	Elapsed time.Duration // from Run's call to its return
	Late    time.Duration // from the first interrupt to Run's return; -1 when none came
	Allocs  uint64        // bytes allocated during the run
	Peak    uint64        // the largest heap in use during the run, less the one before it
	Error   string        // the envelope's error, shortened
	Died    string        // how the process ended when it did not report
}

// TestGuardProbe measures every probe in a process of its own (bounded by
// RLIMIT_AS and a 25 s kill) and prints the table. It runs only when
// GUARD_PROBE is "before" (guards off, the smaller bombs) or "after"
// (guards on, the full bombs); run it without -race, under ulimit -v:
//
//	ulimit -v 16000000; GUARD_PROBE=after go test -run TestGuardProbe -v ./backends/local/internal/sandbox/
func TestGuardProbe(t *testing.T) {
	mode := os.Getenv("GUARD_PROBE")
	if mode == "" {
		t.Skip("set GUARD_PROBE=before or GUARD_PROBE=after to measure the guards' probes")
	}
	if i := os.Getenv("GUARD_PROBE_CHILD"); i != "" {
		n, _ := strconv.Atoi(i)
		runProbeChild(t, mode, guardProbes[n])
		return
	}
	only := os.Getenv("GUARD_PROBE_ONLY")
	var rows []string
	for i, p := range guardProbes {
		if only != "" && !strings.Contains(p.name, only) {
			continue
		}
		res := runProbeProcess(t, mode, i)
		row := fmt.Sprintf("| %s | `%s` | %s |", p.name, probeCode(mode, p), res.describe())
		t.Log(row)
		rows = append(rows, row)
	}
	fmt.Println(strings.Join(rows, "\n"))
}

func probeCode(mode string, p probe) string {
	if mode == "before" && p.before != "" {
		return p.before
	}
	return p.code
}

func (r probeResult) describe() string {
	if r.Died != "" {
		return "process died: " + r.Died
	}
	late := "no interrupt"
	if r.Late >= 0 {
		late = r.Late.Round(time.Millisecond).String() + " late"
	}
	return fmt.Sprintf("%s | %v | +%d MB alloc, +%d MB peak | %s", late, r.Elapsed.Round(time.Millisecond),
		r.Allocs>>20, r.Peak>>20, r.Error)
}

// runProbeProcess runs probe i in a child process and reads its result.
func runProbeProcess(t *testing.T, mode string, i int) probeResult {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGuardProbe$", "-test.v")
	cmd.Env = append(os.Environ(), "GUARD_PROBE_CHILD="+strconv.Itoa(i))
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "PROBE-RESULT "); ok {
			var r probeResult
			if json.Unmarshal([]byte(rest), &r) == nil {
				return r
			}
		}
	}
	switch {
	case ctx.Err() != nil:
		return probeResult{Died: "killed after 25 s"}
	case strings.Contains(string(out), "out of memory"):
		return probeResult{Died: "fatal error: out of memory"}
	}
	tail := string(out)
	if len(tail) > 200 {
		tail = tail[len(tail)-200:]
	}
	return probeResult{Died: fmt.Sprintf("%v: %q", err, tail)}
}

// runProbeChild runs one probe in this process and prints its result.
func runProbeChild(t *testing.T, mode string, p probe) {
	// A probe must not take the machine: past 3 GiB of address space the
	// Go runtime dies here, not elsewhere.
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: 3 << 30, Max: 3 << 30})
	setGuardsForProbe(mode == "after")
	bound := int64(100)
	if p.setupMs > 0 {
		bound = p.setupMs
	}
	j := Job{Code: "async () => { " + probeCode(mode, p) + "; return 'finished' }", TimeoutMs: bound, MemoryLimitMB: 64}
	runtime.GC()
	debug.FreeOSMemory()
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(samples)
	allocs0, heap0 := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var peak uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			mu.Lock()
			peak = max(peak, s[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	prep := Prepare()
	start := time.Now()
	res, err := prep.Run(context.Background(), j, nil)
	end := time.Now()
	close(stop)
	<-done
	metrics.Read(samples)
	r := probeResult{Elapsed: end.Sub(start), Late: -1, Allocs: samples[0].Value.Uint64() - allocs0}
	mu.Lock()
	peak = max(peak, samples[1].Value.Uint64())
	if peak > heap0 {
		r.Peak = peak - heap0
	}
	mu.Unlock()
	if at := prep.s.interruptedAt.Load(); at != 0 {
		r.Late = end.Sub(time.Unix(0, at))
	}
	switch {
	case err != nil:
		r.Error = "fault: " + err.Error()
	case res.HasError:
		r.Error = res.Error
	default:
		r.Error = "result " + res.ResultJSON
	}
	if len(r.Error) > 60 {
		r.Error = r.Error[:60] + "…"
	}
	b, _ := json.Marshal(r)
	fmt.Println("PROBE-RESULT " + string(b))
}

// setGuardsForProbe installs the guards in the runtimes this process
// prepares from now on, or leaves them out.
func setGuardsForProbe(on bool) { guardsOff.Store(!on) }
