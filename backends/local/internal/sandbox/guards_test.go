package sandbox

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// describeJS defines d(v): a description of any value that tells apart
// what a program could (strings unit by unit, -0, holes, property order,
// prototypes), summarized for large values.
const describeJS = `
const digests = []
const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('')
const d = (v, depth = 0) => {
  const t = typeof v
  if (t === 'string') {
    // escape keeps every unit, lone surrogates too.
    if (v.length > 80) return 's#' + v.length + ':' + (digests.push(crypto.subtle.digest('SHA-256', new TextEncoder().encode(escape(v))).then(hex)) - 1)
    let out = 's:'
    for (let i = 0; i < v.length; i++) out += v.charCodeAt(i).toString(16) + ','
    return out
  }
  if (t === 'number') return Object.is(v, -0) ? 'n:-0' : 'n:' + v
  if (t === 'bigint') return 'b:' + v
  if (t === 'symbol') return 'y:' + String(v)
  if (t !== 'object' && t !== 'function') return t + ':' + v
  if (v === null) return 'null'
  if (depth > 3) return 'deep'
  if (t === 'function') return 'f:' + v.name + '/' + v.length
  const proto = Object.getPrototypeOf(v)
  const tag = Object.prototype.toString.call(v) + (proto && proto.constructor ? '<' + proto.constructor.name + '>' : '<null>')
  if (Array.isArray(v) || ArrayBuffer.isView(v)) {
    const n = v.length
    const idx = []
    for (let i = 0; i < Math.min(n, 40); i++) idx.push(i)
    for (let i = Math.max(40, n - 20); i < n; i++) idx.push(i)
    let out = tag + n + '['
    for (const i of idx) out += (i in v ? d(v[i], depth + 1) : '_') + ','
    const keys = Object.keys(v)
    return out + ']k' + keys.length + ':' + keys.filter((k) => !/^\d+$/.test(k)).join(',')
  }
  if (v instanceof ArrayBuffer) return tag + v.byteLength + ':' + d(new Uint8Array(v), depth + 1)
  let out = tag + '{'
  let keys = Reflect.ownKeys(v)
  if (keys.length > 60) {
    out += keys.length + ':'
    keys = keys.slice(0, 40).concat(keys.slice(-20))
  }
  for (const k of keys) {
    const desc = Object.getOwnPropertyDescriptor(v, k)
    out += String(k) + (desc.get || desc.set ? ':accessor' : '=' + d(desc.value, depth + 1)) +
      (desc.enumerable ? '' : '!e') + (desc.writable === false ? '!w' : '') + (desc.configurable ? '' : '!c') + ','
  }
  return out + '}'
}
`

// thresholdsJS defines, for a test expression, the lengths that cross
// the guards' thresholds as prepared now (guardsShift): B past guardLoop,
// SL past guardSlowLoop, S past stringNative, ST stringStride.
func thresholdsJS() string {
	return fmt.Sprintf("const B = %d, SL = %d, S = %d, ST = %d\n",
		guardLoop>>guardsShift+3, guardSlowLoop>>guardsShift, stringNative>>guardsShift+3, stringStride>>guardsShift)
}

// evalIn runs expr in the prepared session s and describes its value, or
// what it threw, beside the log it filled.
func evalIn(t *testing.T, s *session, expr string) string {
	t.Helper()
	code := "async () => {\n  const log = []\n" + thresholdsJS() + describeJS + "\n  try {\n    const r = (" + expr + ")\n" +
		"    return ['ok', d(r), log.join('|'), await Promise.all(digests)]\n  } catch (e) {\n" +
		"    return ['threw', e instanceof Error ? e.constructor.name + ': ' + e.message : d(e), log.join('|'), await Promise.all(digests)]\n  }\n}"
	res, err := (&Prepared{s: s}).Run(context.Background(), Job{Code: code, TimeoutMs: 60000, MemoryLimitMB: 4096}, nil)
	if err != nil {
		return "fault: " + err.Error()
	}
	if res.HasError {
		return "run failed: " + res.Error
	}
	return res.ResultJSON
}

// sameAsGoja runs each expression with the guards and without, and
// requires the same description. The guards' thresholds are shifted down
// by seven (guardLoop 1024, stringNative 8192), so that their own paths
// run over small inputs; TestGuardsAtFullThresholds runs some at the
// thresholds the sandbox ships.
func sameAsGoja(t *testing.T, exprs []string) {
	t.Helper()
	sameAsGojaShifted(t, 7, exprs)
}

func sameAsGojaShifted(t *testing.T, shift uint, exprs []string) {
	t.Helper()
	guardsShift = shift
	defer func() { guardsShift = 0 }()
	for _, expr := range exprs {
		t0 := time.Now()
		want := evalIn(t, prepareSession(true), expr)
		t1 := time.Now()
		got := evalIn(t, prepareSession(false), expr)
		shown := strings.ReplaceAll(strings.ReplaceAll(expr, typedFixtures, "…"), arrayFixtures, "…")
		if el := time.Since(t0); el > 300*time.Millisecond {
			t.Logf("slow: goja %v, guarded %v: %s", t1.Sub(t0), time.Since(t1), shown)
		}
		if got != want {
			if len(got) > 2000 {
				got = got[:2000] + "…"
			}
			if len(want) > 2000 {
				want = want[:2000] + "…"
			}
			t.Errorf("%s\n guarded: %s\n    goja: %s", shown, got, want)
		}
	}
}

func TestStringGuardsKeepGojasResults(t *testing.T) {
	big := "S"
	sameAsGoja(t, []string{
		// repeat
		`'ab'.repeat(3)`, `'ab'.repeat(0)`, `''.repeat(2**40)`, `'a'.repeat(-1)`, `'a'.repeat(Infinity)`, `'a'.repeat(-Infinity)`,
		`'a'.repeat(NaN)`, `'a'.repeat('3')`, `'a'.repeat(2.9)`, `'a'.repeat({ valueOf() { log.push('v'); return 4 } })`,
		`'xy'.repeat(` + big + `)`, `'é'.repeat(` + big + `)`, `'a\ud800'.repeat(` + big + `)`, `'abc'.repeat((S >> 1) + 1)`,
		`String.prototype.repeat.call(null, 3)`, `String.prototype.repeat.call(undefined)`, `String.prototype.repeat.call(Symbol(), 3)`,
		`String.prototype.repeat.call({ toString() { log.push('t'); return 'q' } }, { valueOf() { log.push('n'); return S } })`,
		`String.prototype.repeat.call(12, S)`, `'a'.repeat(Symbol())`,
		// padStart, padEnd
		`'ab'.padStart(5)`, `'ab'.padEnd(5, 'xyz')`, `'abc'.padStart(2)`, `'a'.padEnd(10, '')`, `'a'.padStart(4, undefined)`,
		`'a'.padEnd(` + big + `)`, `'a'.padStart(` + big + `, 'xyz')`, `'é'.padEnd(` + big + `, 'ab')`, `'a'.padStart(` + big + `, 'éx')`,
		`'a'.padEnd(` + big + `, 'a'.repeat(S * 2) + 'é')`, `'a'.padEnd(` + big + `, 'é' + 'a'.repeat(S * 2))`,
		`'a'.padStart(` + big + `, '\ud800\udc00x')`, `'a'.padEnd(-5, 'x')`, `'a'.padEnd(S, { toString() { log.push('f'); return 'yz' } })`,
		`String.prototype.padEnd.call({ toString() { log.push('s'); return 'q' } }, { valueOf() { log.push('l'); return S } }, { toString() { log.push('f'); return '12' } })`,
		`String.prototype.padEnd.call(null, 3)`, `'a'.padEnd(5, Symbol())`, `'x'.padStart(S + 1, 'abc'.repeat(S >> 2))`,
		// concat
		`'a'.concat(1, null, undefined, {}, [2, 3])`, `'a'.concat()`, `'é'.concat('b')`, `String.prototype.concat.call(null, 1)`,
		`'a'.concat({ toString() { log.push(1); return 'b' } }, { toString() { log.push(2); return 'c' } })`,
		`'a'.repeat(S).concat('b'.repeat(S), 'é')`, `'a'.concat(Symbol())`,
		// normalize
		`'\u00e9'.normalize('NFD')`, `'e\u0301'.normalize()`, `'a'.normalize('bad')`, `'\u00e9'.repeat(S).normalize('NFD')`,
		`('e\u0301\u0323'.repeat(S >> 1) + '\ufb01').normalize('NFKC')`, `'\u00e9'.repeat(S).normalize('bad')`,
		`'\u00e9'.repeat(S).normalize({ toString() { log.push('f'); return 'NFKD' } })`, `'a\ud800'.repeat(S).normalize()`,
		// case mapping
		`'aBc'.toUpperCase()`, `'ß'.toUpperCase()`, `'İ'.toLowerCase()`, `'ΑΣ'.toLowerCase()`, `'a'.repeat(S + 5).toUpperCase()`,
		`('aß'.repeat(S >> 1) + 'ﬁ').toUpperCase()`, `('AΣ '.repeat(S >> 1) + 'Σ').toLowerCase()`, `('\u0345\u03c2'.repeat(S >> 1)).toLowerCase()`,
		`('İ\ud800x'.repeat(S >> 1)).toLocaleLowerCase()`, `'Ab'.repeat(S).toLocaleUpperCase()`, `String.prototype.toUpperCase.call(null)`,
		// split
		`'a,b,,c'.split(',')`, `'abc'.split('')`, `'abc'.split()`, `'abc'.split(undefined, 0)`, `'a,b,c'.split(',', 2)`,
		`'a,b'.split(',', -1)`, `'a,b'.split(',', 2**32 + 1)`, `'a,b'.split(',', 1.9)`, `'aéb'.split('')`,
		`'x,'.repeat(B + 2).split(',')`, `'x'.repeat(B + 2).split('')`, `'xé'.repeat(B).split('')`, `'x,'.repeat(B * 2).split(',', B)`,
		`'x,'.repeat(B * 2).split({ toString() { log.push('sep'); return ',' } }, { valueOf() { log.push('lim'); return B + 1 } })`,
		`'a1b2c'.split(/\d/)`, `'ab'.split({ [Symbol.split]: (s, l) => 'custom ' + s + l })`, `String.prototype.split.call(null, ',')`,
		`'ab'.split({ [Symbol.split]: 5 })`, `'\ud800a\ud800'.split('a')`, `('a'.repeat(40) + ',').repeat(B).split(',')`,
		// replace, replaceAll
		`'abcabc'.replace('b', 'X')`, `'abcabc'.replaceAll('b', 'X')`, `'abc'.replace('b', '[$&|$$|$\x60|$\x27|$1|$0|$<x>|$]')`,
		`'abc'.replaceAll('', '-')`, `'abc'.replace('', '-')`, `'abc'.replaceAll('b', (m, p, s) => m + p + s)`,
		`'aaa'.replaceAll('aa', 'b')`, `'x'.repeat(B).replaceAll('x', 'ab')`, `'xé'.repeat(B).replaceAll('é', '$&$&')`,
		`'x'.repeat(B).replaceAll('x', (m, p) => p % 7 ? '' : 'q')`, `'x'.repeat(B).replaceAll('x', String)`,
		`'ab'.repeat(B).replaceAll('b', '$\x60')`, `'ab'.replace({ toString() { log.push('s'); return 'b' } }, { toString() { log.push('r'); return 'c' } })`,
		`'ab'.replaceAll({ toString() { log.push('s'); return 'b' } }, { toString() { log.push('r'); return 'c' } })`,
		`'aXbX'.replace(/X/g, '-')`, `'aXbX'.replaceAll(/X/g, '-')`, `'aXbX'.replaceAll(/X/, '-')`, `String.prototype.replace.call(null)`,
		`'a\ud800b'.replaceAll('\ud800', '$\x27')`, `('é' + 'a'.repeat(B * 8)).replaceAll('a'.repeat(100), 'x')`,
		`'ab'.replace('b', Symbol())`, `'ab'.replace({ [Symbol.replace]: (s, r) => s + r }, 1)`,
		// indexOf, lastIndexOf, includes
		`'abcabc'.indexOf('c', 3)`, `'abc'.indexOf('c', -5)`, `'abc'.lastIndexOf('c', NaN)`, `'abcabc'.lastIndexOf('abc', 2)`,
		`('é' + 'a'.repeat(S)).indexOf('a'.repeat(100) + 'b')`, `('é' + 'a'.repeat(S)).indexOf('a'.repeat(100), 50)`,
		`('é' + 'ab'.repeat(S) + 'x').indexOf('ab'.repeat(100) + 'x')`, `('é' + 'ab'.repeat(S) + 'x').lastIndexOf('ab'.repeat(100))`,
		`('é' + 'ab'.repeat(S)).lastIndexOf('ab'.repeat(100), 1000)`, `('é' + 'ab'.repeat(S)).lastIndexOf('b' + 'ab'.repeat(99), 0)`,
		`('é' + 'ab'.repeat(S) + 'x').includes('ab'.repeat(100) + 'x')`, `('é' + 'ab'.repeat(S)).includes('ab'.repeat(100) + 'x', 7)`,
		`'abc'.includes(/b/)`, `'abc'.includes({ toString() { return 'b' } })`, `String.prototype.includes.call(null, 'a')`,
		// String.raw
		"String.raw`a${1}b${2}c`", `String.raw({ raw: ['x', 'y', 'z'] }, 1)`, `String.raw({ raw: { length: 3, 0: 'a', 2: 'c' } })`,
		`String.raw({ raw: { length: 0 } })`, `String.raw({ raw: 'abc' }, '-', '+')`, `String.raw()`, `String.raw({ raw: { length: B + 5 } }).length`,
		`String.raw({ raw: { get length() { log.push('len'); return 2 }, get 0() { log.push(0); return 'a' }, get 1() { log.push(1); return 'b' } } }, { toString() { log.push('sub'); return '-' } })`,
	})
}

// A bomb, and how its run must end: with the memory text, the timeout
// text, or (a guard made the work cheap) by finishing.
type bomb struct {
	name, code string
	ends       ending
}

type ending int

const (
	endsTimeout  ending = iota
	endsMemory          // the memory text
	endsFinished        // the guard made the work cheap
	endsOverflow        // the stack overflow text
)

// growingBombs reach the memory limit a piece at a time (allocating a
// few times the limit on the way) rather than being refused at once: on a
// slow machine, or under the race detector, that takes seconds. They run
// under a 16 MB limit (growingLimitMB), each sized past it: the guard
// stops a result growing at whatever limit the job has, and every byte
// built on the way costs (under the race detector, tens of seconds at 64
// MB).
var growingBombs = map[string]bool{
	"join of one large string":    true,
	"JSON.parse of nested arrays": true,
	"encodeURIComponent":          true,
	"escape":                      true,
}

// growingLimitMB is the memory limit the growing bombs run under.
const growingLimitMB = 16

// stringBombs are the String built-ins' bombs.
var stringBombs = []bomb{
	{"repeat", `'x'.repeat(2**29)`, endsMemory},
	{"repeat UTF-16", `'é'.repeat(2**28)`, endsMemory},
	{"repeat huge count", `'xy'.repeat(2**62)`, endsMemory},
	{"padStart", `'x'.padStart(2**29)`, endsMemory},
	{"padEnd", `''.padEnd(2**29, 'ab')`, endsMemory},
	{"concat", `const s = 'x'.repeat(2**24); s.concat(s, s, s, s, s, s, s, s)`, endsMemory},
	{"split", `'x'.repeat(2**25).split('')`, endsMemory},
	{"replaceAll with a large replacement", `'x'.repeat(2**20).replaceAll('x', 'y'.repeat(512))`, endsMemory},
	{"replaceAll with $\x60", `'x'.repeat(2**17).replaceAll('x', '$\x60')`, endsMemory},
	{"replaceAll with a native callback", `'x'.repeat(2**23).replaceAll('x', String)`, endsTimeout},
	{"normalize", `'\u00e9'.repeat(2**24).normalize('NFD')`, endsTimeout},
	{"toLowerCase UTF-16", `'\u0130'.repeat(2**25).toLowerCase()`, endsTimeout},
	{"indexOf UTF-16", `('é' + 'a'.repeat(2**20)).indexOf('a'.repeat(2**19) + 'b')`, endsFinished},
	{"String.raw", `String.raw({ raw: { length: 2**40 } })`, endsTimeout},
}

func TestStringBombsEndTheirRun(t *testing.T) { runBombs(t, stringBombs) }

// timeoutBombMs is the bound a timeout bomb runs under: 100 ms, a run's
// start taking a few of them, for a bomb whose call gets its input at
// once (holes, an array-like, a small literal); 300 ms for one that first
// builds a large input (a repeat, a fill, a 32 MB typed array), which
// takes up to half of that under the race detector before the bomb's own
// call starts. A bomb computes until it is stopped: its bound is the CPU
// time it costs.
func timeoutBombMs(code string) int64 {
	for _, builds := range []string{".repeat(", ".fill(", "Uint8Array(2**25)"} {
		if strings.Contains(code, builds) {
			return 300
		}
	}
	return 100
}

// runBombs runs each bomb under a 64 MB limit (growingLimitMB for the
// growing ones) and requires its declared
// text within a wall bound that leaves a busy machine room, with the
// process's allocations held far below the bomb's (runtime/metrics before
// and after). A timeout bomb runs under timeoutBombMs; the others under a
// bound they must not reach.
func runBombs(t *testing.T, bombs []bomb) {
	// The plain build's pass runs beside the race-built packages under
	// make test's -j6 on as few as 2 CPUs: a memory bomb that builds 64 MB
	// took 3.4 s of wall there.
	slow := time.Duration(2)
	if raceBuild {
		slow = 5
	}
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			j := job("async () => { " + b.code + "; return 'finished' }")
			timeoutMs := timeoutBombMs(b.code)
			j.TimeoutMs, j.MemoryLimitMB = timeoutMs, 64
			wall := time.Duration(timeoutMs)*time.Millisecond + 3*time.Second*slow
			if b.ends != endsTimeout {
				j.TimeoutMs, wall = 120000, 3*time.Second*slow
			}
			if growingBombs[b.name] {
				j.MemoryLimitMB, wall = growingLimitMB, 20*time.Second*slow
			}
			// The bombs before left garbage: collecting it here keeps its
			// collection out of this bomb's time.
			runtime.GC()
			before := heapAllocs()
			start := time.Now()
			r := runJob(t, j, nil)
			took := time.Since(start)
			allocated := heapAllocs() - before
			switch b.ends {
			case endsFinished:
				if r.HasError || r.ResultJSON != `"finished"` {
					t.Errorf("got %+v, want it finished", r)
				}
			case endsOverflow:
				wantError(t, r, StackOverflowText)
			case endsMemory:
				wantError(t, r, protocol.NewMemoryLimitError(j.MemoryLimitMB).Error())
				if r.Failure != protocol.FailureMemory {
					t.Errorf("failure kind %q, want %q", r.Failure, protocol.FailureMemory)
				}
			default:
				wantError(t, r, protocol.NewExecutionTimeoutError(timeoutMs).Error())
			}
			if took > wall {
				t.Errorf("took %v, past %v", took, wall)
			}
			// A refused allocation never happens: what a memory bomb's
			// run allocates is its setup. A loop stopped at its bound
			// allocated what it did in 300 ms at most; the bombs would
			// take GBs.
			bound := uint64(1 << 30)
			if b.ends == endsMemory && !growingBombs[b.name] {
				bound = 256 << 20
			}
			if allocated > bound {
				t.Errorf("allocated %d MB, past %d MB", allocated>>20, bound>>20)
			}
		})
	}
}

// heapAllocs is the bytes the process has allocated on the Go heap so far.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// arrayFixtures defines, in a test expression, values that take the
// guards' own paths (B is a length past guardLoop): holey(n) an array of
// length n with three elements; like(n) a logging array-like; prox(a) a
// logging proxy of a.
const arrayFixtures = `
const holey = (n = B) => { const a = new Array(n); a[1] = 'b'; a[5] = 'f'; a[n - 2] = 'z'; return a }
const like = (n = B) => {
  const o = { 1: 'b', 5: 'f' }
  Object.defineProperty(o, 'length', { get() { log.push('len'); return n } })
  Object.defineProperty(o, 3, { get() { log.push('get3'); return 'd' }, set(v) { log.push('set3=' + v) }, configurable: true })
  return o
}
const prox = (a) => new Proxy(a, {
  get(t, k, r) { if (typeof k === 'string' && !/^\d+$/.test(k) || (k | 0) < 8 || (k | 0) > B - 8) log.push('get ' + String(k)); return Reflect.get(t, k, r) },
  has(t, k) { if ((k | 0) < 8 || (k | 0) > B - 8) log.push('has ' + String(k)); return Reflect.has(t, k) },
  set(t, k, v, r) { if ((k | 0) < 8 || (k | 0) > B - 8) log.push('set ' + String(k)); return Reflect.set(t, k, v, r) },
  deleteProperty(t, k) { if ((k | 0) < 8 || (k | 0) > B - 8) log.push('del ' + String(k)); return Reflect.deleteProperty(t, k) },
  defineProperty(t, k, d) { if ((k | 0) < 8 || (k | 0) > B - 8) log.push('def ' + String(k)); return Reflect.defineProperty(t, k, d) },
})
const dense = (n = B) => Array.from({ length: n }, (_, i) => i % 7)
`

// fx wraps a statement list using the fixtures into an expression.
func fx(body string) string { return "(() => {" + arrayFixtures + body + "})()" }

func TestArrayGuardsKeepGojasResults(t *testing.T) {
	sameAsGoja(t, []string{
		// join, toString, toLocaleString
		`[1, null, undefined, 'a', [2, 3]].join('-')`, `[].join()`, `[1, 2].join(undefined)`, `Array.prototype.join.call('abc', '+')`,
		`Array.prototype.join.call(null)`, `Array.prototype.join.call({ length: 3, 1: 'x' })`, `[1, 2].join({ toString() { log.push('sep'); return '/' } })`,
		`[Symbol()].join()`, `[1, 2].join(Symbol())`, fx(`const a = [1]; a.push(a, [a]); return a.join()`), fx(`const a = holey(); a[7] = a; return a.join('.')`),
		fx(`return holey().join('-')`), fx(`return Array.prototype.join.call(like(), ',')`), fx(`return prox(holey()).join()`),
		fx(`return String(holey())`), fx(`return dense().join('')`), fx(`return Array.prototype.join.call(new Uint8Array(B), '')`),
		fx(`return holey().toLocaleString()`), fx(`return [1, 'a', null, { toLocaleString() { log.push('tl'); return 'T' } }].toLocaleString()`),
		fx(`return [{ toLocaleString: 5 }].toLocaleString()`), fx(`const a = holey(); a[2] = 1.5; a[3] = { toLocaleString() { return 'x' + typeof this } }; return a.toLocaleString()`),
		fx(`Object.defineProperty(Number.prototype, 'toLocaleString', { get() { log.push(typeof this); return function () { return 'n' } }, configurable: true }); try { return [1, 2].toLocaleString() + holey(B).concat([3]).toLocaleString().slice(-5) } finally { delete Number.prototype.toLocaleString }`),
		// fill
		`[1, 2, 3, 4].fill(0, 1, -1)`, `[1, 2, 3].fill(9, NaN, 2.5)`, `Array.prototype.fill.call({ length: 3 }, 'x')`, `new Array(5).fill()`,
		fx(`return new Array(SL * 4).fill(1.5, 3)`), fx(`return Array.prototype.fill.call(like(40), 'v', 2, { valueOf() { log.push('end'); return 6 } })`),
		fx(`const o = { length: SL * 3 }; Object.defineProperty(o, SL + 1, { set(v) { log.push('shrink'); o.length = SL + 5 } }); Array.prototype.fill.call(o, 7); return [o.length, o[SL + 2], o[SL + 9], o[SL * 3 - 1]]`),
		fx(`return prox(new Array(50)).fill(3, 1, 4)`), fx(`return Array.prototype.fill.call(like(B), 0).length`),
		// slice, splice
		`[1, 2, 3, 4].slice(1, -1)`, `[1, 2, 3].slice(-2)`, `[1, 2, 3].slice(NaN, Infinity)`, `Array.prototype.slice.call('abc', 1)`,
		fx(`return holey().slice(2)`), fx(`return holey().slice(-10, -1)`), fx(`return Array.prototype.slice.call(like(), B - 5)`),
		fx(`return prox(holey()).slice(B - 4)`), fx(`return dense().slice(5)`), fx(`return Array.prototype.slice.call(like(12), { valueOf() { log.push('s'); return 1 } }, { valueOf() { log.push('e'); return 4 } })`),
		fx(`class A extends Array {}; const a = A.from(holey(40)); const r = a.slice(1); return [r instanceof A, r.length, r]`),
		fx(`const a = holey(); a.constructor = { get [Symbol.species]() { log.push('species'); return function (n) { log.push('new ' + n); return { length: 'x' } } } }; const r = a.slice(B - 3); return r`),
		fx(`const a = holey(); a.constructor = { [Symbol.species]: 5 }; return a.slice(1)`),
		`[1, 2, 3, 4, 5].splice(1, 2, 'a', 'b', 'c')`, `[1, 2, 3].splice()`, `[1, 2, 3].splice(1)`, `(() => { const a = [1, 2, 3]; const r = a.splice(-1, 5, 'x'); return [a, r] })()`,
		fx(`const a = holey(); const r = a.splice(2, 3, 'x'); return [a, r]`), fx(`const a = holey(); const r = a.splice(1, 0, 'x', 'y'); return [a, r]`),
		fx(`const a = holey(); const r = a.splice(B - 4); return [a, r]`), fx(`const o = like(); const r = Array.prototype.splice.call(o, 2, 1); return [o, r]`),
		fx(`const a = dense(); const r = a.splice(3, 2, 'q'); return [a, r]`), fx(`const p = prox(holey()); const r = p.splice(B - 6, 2, 'n'); return [r, p.length]`),
		// concat
		`[1].concat(2, [3, [4]], 'x')`, `[].concat.call('ab', 1)`, `[1].concat({ length: 1, 0: 'q', [Symbol.isConcatSpreadable]: true })`,
		fx(`return [1].concat(holey(), 2)`), fx(`return holey().concat(holey(20))`), fx(`const a = [9]; a[Symbol.isConcatSpreadable] = false; return holey(30).concat(a)`),
		fx(`return [0].concat(like(B))`), fx(`return [0].concat(prox(holey()))`), fx(`const x = { length: B, 4: 'e', get [Symbol.isConcatSpreadable]() { log.push('spread?'); return true } }; return [].concat(x)`),
		// indexOf, lastIndexOf, includes
		`[1, 2, 3, 2].indexOf(2, 2)`, `[1, 2, 3].indexOf(3, -1)`, `[NaN].indexOf(NaN)`, `[NaN].includes(NaN)`, `[-0].includes(0)`, `[0].includes(-0)`,
		`[1, 2, 1].lastIndexOf(1, -2)`, `[1, 2, 1].lastIndexOf(1, undefined)`, `Array.prototype.indexOf.call(null)`, `[, 1].includes(undefined)`, `[, 1].indexOf(undefined)`,
		fx(`return [holey().indexOf('z'), holey().indexOf('b', 3), holey().indexOf(undefined), holey().includes(undefined), holey().lastIndexOf('b'), holey().lastIndexOf('z', -3)]`),
		fx(`return [Array.prototype.indexOf.call(like(), 'd'), Array.prototype.includes.call(like(), 'f'), Array.prototype.lastIndexOf.call(like(), 'b', { valueOf() { log.push('from'); return 4 } })]`),
		fx(`return [prox(holey()).indexOf('z'), prox(holey()).includes('nope'), prox(holey()).lastIndexOf('f')]`), fx(`return [dense().indexOf(6), dense().includes(-0), dense().lastIndexOf(0)]`),
		fx(`Array.prototype[B - 1] = 'proto'; try { return [holey().indexOf('proto'), holey().includes('proto'), holey().lastIndexOf('proto')] } finally { delete Array.prototype[B - 1] }`),
		fx(`const a = holey(); Object.defineProperty(a, 2, { get() { log.push('g2'); return 'z' } }); return [a.indexOf('z'), a.lastIndexOf('z')]`),
		fx(`return Array.prototype.includes.call({ length: B, get 0() { throw new Error('boom') } }, 1)`),
		// every, some, forEach, map, filter, reduce, reduceRight, find*
		`[1, 2, 3].every((x) => x > 0)`, `[1, 2, 3].some((x) => x > 2)`, `[1, 2, 3].map((x, i, a) => x * i + a.length)`, `[1, 2, 3].filter((x) => x & 1)`,
		`[1, 2, 3].reduce((a, b) => a + b)`, `[1, 2, 3].reduceRight((a, b) => a + b, '')`, `[].reduce((a, b) => a)`, `[, , ].reduceRight((a, b) => a)`,
		`[1, 2, 3].find((x) => x > 1)`, `[1, 2, 3].findIndex((x) => x > 5)`, `[1, 2, 3].findLast((x) => x < 3)`, `[1, 2, 3].findLastIndex((x) => x < 3)`,
		`[1].forEach()`, `[1].map(5)`, `[1].filter()`, `[1].filter({})`, `[1].reduce(null)`, `[1].every('x')`, `[1].find(Symbol())`,
		fx(`return [holey().every((x) => x), holey().some((x) => x === 'z'), holey().map((x) => x + '!'), holey().filter((x) => x !== 'f')]`),
		fx(`const seen = []; holey().forEach(function (x, i, a) { seen.push(x, i, a.length, this.t) }, { t: 'T' }); return seen`),
		fx(`return [holey().reduce((a, b, i) => a + b + i), holey().reduceRight((a, b, i) => a + b + i), holey().reduce((a, b) => a + b, '>')]`),
		fx(`return [holey().find((x) => x === 'z'), holey().findIndex((x) => x === 'f'), holey().findLast((x, i) => i === 0), holey().findLastIndex((x) => x === undefined)]`),
		fx(`return [Array.prototype.map.call(like(), (x) => x), Array.prototype.filter.call(like(20), (x) => true), Array.prototype.some.call(like(20), (x) => x === 'd')]`),
		fx(`return [prox(holey()).map((x) => 1), prox(holey()).findLast((x) => x === 'b')]`), fx(`return Array.prototype.forEach.call(like(), 5)`),
		fx(`return Array.prototype.reduce.call(like(), undefined)`), fx(`return Array.prototype.reduce.call({ length: B }, (a) => a)`), fx(`return holey().map(Boolean).filter(Boolean)`),
		fx(`return holey().every((x) => { if (x === 'f') throw new Error('stop ' + x); return true })`),
		fx(`class A extends Array {}; const a = new A(B); a[4] = 1; const m = a.map((x) => x); const f = a.filter(() => true); return [m instanceof A, m.length, f instanceof A, f.length]`),
		fx(`return dense().map((x) => x * 2).reduce((a, b) => a + b)`),
		// flat, flatMap
		`[1, [2, [3, [4]]]].flat()`, `[1, [2, [3, [4]]]].flat(Infinity)`, `[1, [2]].flat(-1)`, `[[1], , [2, , 3]].flat()`, `[1, 2].flatMap((x) => [x, [x * 2]])`,
		`[1].flatMap()`, `[1, [2]].flat('1')`, fx(`return holey().flat()`), fx(`return [holey(), [1, [2]]].flat(2)`),
		fx(`return holey().flatMap((x, i) => i === 1 ? [x, x] : x)`), fx(`return Array.prototype.flat.call(like(40))`), fx(`return prox([1, [2, 3], prox([4])]).flat()`),
		fx(`return [dense(40), [1]].flat({ valueOf() { log.push('depth'); return 1 } })`), fx(`return Array.prototype.flatMap.call(like(), (x) => [x])`),
		// sort, toSorted
		`[3, 1, 2].sort()`, `[3, 1, 10, 2].sort()`, `[3, 1, 2].sort((a, b) => b - a)`, `[1, undefined, , 3, null].sort()`, `[3, 1].sort(5)`,
		`[2, 1, 3].sort(() => -0)`, `[2, 1, 3].sort(() => NaN)`, `[1, 2].sort(null)`, `[3, 1, 2].toSorted()`, `[3, , 1].toSorted((a, b) => a - b)`, `[1].toSorted('x')`,
		fx(`const a = holey(); a[9] = 'a'; return a.sort()`), fx(`const a = holey(); a[9] = 'a'; return a.sort((x, y) => x < y ? 1 : -1)`), fx(`return holey().toSorted()`),
		fx(`const o = like(); Array.prototype.sort.call(o); return o`), fx(`const a = dense(); a.sort(); return a`), fx(`return dense().toSorted((a, b) => b - a)`),
		fx(`const a = dense(); a.sort((x, y) => y - x); return a`), fx(`return prox(holey(40)).sort()`), fx(`return Array.prototype.sort.call({ length: B, 2: 'x', 0: 'y' })`),
		fx(`return holey().sort(Symbol())`), fx(`const a = holey(); a[8] = Symbol(); return a.sort()`),
		// reverse, copyWithin, shift, unshift
		`[1, 2, 3].reverse()`, `[1, , 3, , ].reverse()`, `[1, 2, 3, 4, 5].copyWithin(0, 3)`, `[1, 2, 3, 4, 5].copyWithin(1, 0, 3)`, `[1, 2, 3].copyWithin(-1, NaN)`,
		`(() => { const a = [1, 2, 3]; return [a.shift(), a] })()`, `(() => { const a = [1, 2]; return [a.unshift(0, 0.5), a] })()`, `Array.prototype.shift.call({})`,
		fx(`return holey().reverse()`), fx(`return Array.prototype.reverse.call(like(12))`), fx(`return prox(holey()).reverse()`), fx(`return dense().reverse()`),
		fx(`return holey().copyWithin(0, 1)`), fx(`return holey().copyWithin(3, 0)`), fx(`return Array.prototype.copyWithin.call(like(14), 2, 0, 6)`), fx(`return prox(holey()).copyWithin(1, 2)`),
		fx(`const a = holey(); return [a.shift(), a]`), fx(`const a = holey(); return [a.unshift('x', 'y'), a]`), fx(`const o = like(); return [Array.prototype.shift.call(o), o]`),
		fx(`const o = like(); return [Array.prototype.unshift.call(o, 'u'), o]`), fx(`const a = dense(); return [a.shift(), a.unshift(-1), a]`),
		fx(`Array.prototype[B + 5] = 'p'; try { const a = dense(); a.unshift(1); return a } finally { delete Array.prototype[B + 5] }`),
		// toReversed, toSpliced, with
		`[1, , 3].toReversed()`, `[1, 2, 3].toSpliced(1, 1, 'a', 'b')`, `[1, 2, 3].toSpliced()`, `[1, 2, 3].with(-1, 'x')`, `[1].with(3, 0)`, `[1].with({ toString() { return 'idx' } }, 0)`,
		fx(`return holey().toReversed()`), fx(`return holey().toSpliced(2, 3, 'x')`), fx(`return holey().with(-2, 'w')`), fx(`return holey().with(B, 'w')`),
		fx(`return Array.prototype.toReversed.call(like(B))`), fx(`return Array.prototype.with.call(like(), { valueOf() { log.push('idx'); return 1 } }, 'w')`),
		fx(`return prox(holey()).toSpliced(1, 1)`), fx(`return [dense().toReversed(), dense().with(0, 'x'), dense().toSpliced(1, 2)]`),
		// Array.from
		`Array.from('abc')`, `Array.from({ length: 3, 1: 'x' })`, `Array.from({ length: 3 }, (v, i) => typeof v + i)`, `Array.from([1, 2], function (x) { return x + this.n }, { n: 10 })`,
		`Array.from(null)`, `Array.from([1], 5)`, `Array.from(5)`, `Array.from(new Set([1, 2]))`, `Array.from({ length: -1 })`,
		fx(`return Array.from({ length: B, 3: 'd' })`), fx(`return Array.from(like(), (x, i) => i === 3 ? x : 0)`), fx(`return Array.from(prox(holey()))`),
		fx(`return Array.from({ length: 4, [Symbol.iterator]: function* () { log.push('iter ' + this.length); yield 1 } })`),
		fx(`return Array.from({ get [Symbol.iterator]() { log.push('it?'); return undefined }, length: 2, 0: 'a' })`),
		fx(`return Array.from({ [Symbol.iterator]: 5 })`), fx(`class A { constructor(n) { log.push('A ' + n) } }; return Array.from.call(A, { length: B, 1: 'x' }).length`),
		fx(`class A { constructor(n) { log.push('A ' + n) } }; return Array.from.call(A, { length: 3, 1: 'x' })`), fx(`return Array.from(holey())`), fx(`return Array.from(dense())`),
		// shape of the wrapped functions
		`['join', 'map', 'fill', 'flat', 'toSorted', 'with'].map((n) => [n, Array.prototype[n].name, Array.prototype[n].length, Object.getOwnPropertyNames(Array.prototype[n]), JSON.stringify(Object.getOwnPropertyDescriptor(Array.prototype, n)), String(Array.prototype[n])])`,
		`(() => { try { new Array.prototype.map(); return 'constructed' } catch (e) { return e.constructor.name } })()`, `Object.keys(Array.prototype).length`,
		`[Array.from.name, Array.from.length, String(Array.from), 'prototype' in Array.from]`,
	})
}

// Where goja itself breaks, the guards' own paths answer: find and its
// kin pass a hole to a native callback as a nil goja cannot read (the
// sandbox breaks), and flat recurses in Go without end through an array
// that holds itself (the process dies of a Go stack overflow).
func TestGuardsMendGojasBreaks(t *testing.T) {
	got := evalIn(t, prepareSession(false), fx(`return [holey().find(Boolean), holey().findIndex(Number.isNaN), holey().findLast(Boolean)]`))
	if want := `["ok","[object Array]<Array>3[s:62,,n:-1,s:7a,,]k3:","",[]]`; got != want {
		t.Errorf("find over holes: %s, want %s", got, want)
	}
	r := runJob(t, job(`async () => { const a = [1]; a.push(a); return a.flat(Infinity) }`), nil)
	wantError(t, r, StackOverflowText)
}

// arrayBombs are the Array built-ins' bombs.
var arrayBombs = []bomb{
	{"join of holes", `new Array(2**32-1).join()`, endsMemory},
	{"join of holes without a separator", `new Array(2**32-1).join('')`, endsTimeout},
	// 8,000 references to one dense array of 8,000 numbers: 6.4e7 numbers
	// to write (about 10 s of goja's join unguarded), built in two calls.
	// This case was a dense array of 3e6 numbers, whose fill took goja
	// seconds: its bound ended it before the join began.
	{"join of a dense array of dense arrays", `Array(8000).fill(Array(8000).fill(1.5)).join('')`, endsTimeout},
	// Filling 5e7 holes makes 800 MB of elements: the budget refuses them.
	{"join with a long separator", `new Array(2**20).join('x'.repeat(2**10))`, endsMemory},
	{"join of one large string", `Array(2**12).fill('x'.repeat(2**20)).join('')`, endsMemory},
	{"toString", `String(new Array(2**32-1))`, endsMemory},
	{"toLocaleString", `new Array(2**32-1).toLocaleString()`, endsTimeout},
	{"fill of holes", `new Array(5e7).fill(1.5)`, endsMemory},
	{"fill of an array-like", `Array.prototype.fill.call({length: 2**40}, 0)`, endsMemory},
	{"fill of holes within the limit, again and again", `const a = new Array(2e6); for (;;) a.fill(1.5)`, endsTimeout},
	{"slice of an array-like", `Array.prototype.slice.call({length: 5e7})`, endsTimeout},
	{"slice of holes", `new Array(2**32-1).slice()`, endsTimeout},
	{"splice of holes", `new Array(2**32-1).splice(0)`, endsTimeout},
	{"splice inserting", `new Array(2**32-2).splice(0, 0, 1)`, endsTimeout},
	{"concat", `[].concat(new Array(1e8))`, endsTimeout},
	{"indexOf of an array-like", `Array.prototype.indexOf.call({length: 2**40}, 1)`, endsTimeout},
	{"lastIndexOf of holes", `new Array(2**32-1).lastIndexOf(1)`, endsTimeout},
	{"includes of holes", `new Array(2**32-1).includes(1)`, endsTimeout},
	{"every of holes", `new Array(2**32-1).every(x => x)`, endsTimeout},
	{"some of holes", `new Array(2**32-1).some(x => x)`, endsTimeout},
	{"forEach of holes", `new Array(2**32-1).forEach(x => x)`, endsTimeout},
	{"map of holes", `new Array(2**32-1).map(x => x)`, endsTimeout},
	{"filter of holes", `new Array(2**32-1).filter(x => x)`, endsTimeout},
	{"reduce of holes", `new Array(2**32-1).reduce((a, b) => a, 0)`, endsTimeout},
	{"reduceRight of holes", `new Array(2**32-1).reduceRight((a, b) => a, 0)`, endsTimeout},
	{"find with a native callback", `new Array(2**32-1).find(Boolean)`, endsTimeout},
	{"findIndex with a native callback", `new Array(2**32-1).findIndex(Boolean)`, endsTimeout},
	{"findLast with a native callback", `new Array(2**32-1).findLast(Boolean)`, endsTimeout},
	{"findLastIndex with a native callback", `new Array(2**32-1).findLastIndex(Boolean)`, endsTimeout},
	{"flat of holes", `new Array(2**32-1).flat()`, endsTimeout},
	{"flat of nested holes", `[1, [new Array(2**32-1)]].flat(2)`, endsTimeout},
	{"flat of an array holding itself", `const a = [1]; a.push(a); a.flat(Infinity)`, endsOverflow},
	{"flatMap with a native callback", `new Array(2**32-1).flatMap(Boolean)`, endsTimeout},
	{"sort of an array-like", `Array.prototype.sort.call({length: 2**32-1})`, endsTimeout},
	{"sort of holes", `new Array(2**32-1).sort()`, endsTimeout},
	{"reverse of holes", `new Array(2**32-1).reverse()`, endsTimeout},
	{"copyWithin of holes", `new Array(2**32-1).copyWithin(0, 1)`, endsTimeout},
	{"shift of an array-like", `Array.prototype.shift.call({length: 2**40})`, endsTimeout},
	{"unshift of holes", `new Array(2**32-2).unshift(1)`, endsTimeout},
	{"toReversed of holes", `new Array(2**32-1).toReversed()`, endsTimeout},
	{"toSorted of holes", `new Array(2**32-2).toSorted()`, endsMemory},
	{"toSpliced of holes", `new Array(2**32-2).toSpliced(0, 0)`, endsTimeout},
	{"with of holes", `new Array(2**32-1).with(0, 1)`, endsTimeout},
	{"Array.from an array-like", `Array.from({length: 5e7})`, endsTimeout},
	{"Array.from a huge array-like", `Array.from({length: 2**40}, (x) => x)`, endsTimeout},
}

func TestArrayBombsEndTheirRun(t *testing.T) { runBombs(t, arrayBombs) }

// typedFixtures: B past guardLoop; ramp(C, n) a typed array of kind C
// whose element i is i % 251 (a view at an offset when view is set).
const typedFixtures = arrayFixtures + `
const ramp = (C = Uint8Array, n = B, view = false) => {
  const a = new C(n + (view ? 7 : 0))
  for (let i = 0; i < a.length; i++) a[i] = C === BigInt64Array || C === BigUint64Array ? BigInt(i % 251) : (i % 251) - (C === Int8Array ? 100 : 0)
  return view ? a.subarray(7) : a
}
const sum = (a) => { let s = 0; for (let i = 0; i < a.length; i++) s = (s * 31 + Number(a[i])) % 1000003; return a.length + ':' + s }
`

func tfx(body string) string { return "(() => {" + typedFixtures + body + "})()" }

func TestTypedGuardsKeepGojasResults(t *testing.T) {
	sameAsGoja(t, []string{
		// constructors
		`new Uint8Array(4)`, `new Uint8Array(-1)`, `new Uint8Array(1.5)`, `new Uint8Array('3')`, `new Uint8Array(null)`, `new Uint8Array(undefined)`,
		`new Uint8Array({ valueOf() { log.push('n'); return 3 } })`, `Uint8Array(3)`, `new Float64Array([1, 2, 3])`, `new Uint8Array(new Set([1, 300]))`,
		`new Uint8Array({ length: 3, 0: 1 })`, `new Int16Array(new ArrayBuffer(3))`, `new Int16Array(new ArrayBuffer(8), 2, 2)`, `new Int16Array(new ArrayBuffer(8), 1)`,
		`new BigInt64Array([1n, 2n])`, `new BigInt64Array([1])`, `new Uint8Array(new Float64Array([1.5, 300, -1]))`, `new Float32Array(new BigInt64Array(1))`,
		`new Uint8Array(Symbol())`, `new Uint8Array(2**53)`, `new Uint8Array(NaN)`,
		tfx(`return new Uint8Array({ get length() { log.push('len'); return 3 }, get 1() { log.push(1); return 7 } })`),
		tfx(`return new Uint8Array({ length: 2, get [Symbol.iterator]() { log.push('it'); return undefined }, 0: 5 })`),
		tfx(`return new Uint8Array({ [Symbol.iterator]: function* () { log.push(typeof this.x); yield 1; yield 2 }, x: 1 })`),
		tfx(`return new Uint8Array(prox([1, 2, 3]))`), tfx(`return sum(new Uint8Array(like()))`), tfx(`return sum(new Float64Array(holey()))`),
		tfx(`return sum(new Uint16Array({ length: B, 9: 9, get 8() { log.push(8); return { valueOf() { log.push('v8'); return 8 } } } }))`),
		tfx(`class X extends Uint8Array { constructor(n) { super(n); this.tag = 'x' } }; const x = new X(3); return [x instanceof X, x instanceof Uint8Array, x.tag, x.length, Object.getPrototypeOf(x) === X.prototype, x.map((v) => v + 1) instanceof X]`),
		`(() => { const r = Reflect.construct(Uint8Array, [2], Array); return [Object.getPrototypeOf(r) === Array.prototype, r.length] })()`,
		`(() => { function F() {} F.prototype = null; const r = Reflect.construct(Float32Array, [2], F); return Object.getPrototypeOf(r) === Float32Array.prototype })()`,
		// shape
		`[Uint8Array.name, Uint8Array.length, Uint8Array.BYTES_PER_ELEMENT, Object.getOwnPropertyNames(Uint8Array), Reflect.ownKeys(Uint8Array).length, typeof Uint8Array, String(Uint8Array)]`,
		// the globals the typed arrays and Map and Set are guarded behind
		// (guards_lazy.go), first reached in every way
		`(() => { const d = Object.getOwnPropertyDescriptor(globalThis, 'Uint8Array'); return [d.writable, d.enumerable, d.configurable, d.value === Uint8Array, d.value.name] })()`,
		`(() => { const r = [typeof Int16Array, delete globalThis.Int32Array, typeof Int32Array, 'Int32Array' in globalThis]; Float32Array = 5; return [...r, Float32Array, new Float64Array(2).length] })()`,
		`(() => { const d = Object.getOwnPropertyDescriptor(globalThis, 'Map'); return [d.writable, d.enumerable, d.configurable, d.value === Map, [...new Map([[1, 2]])], [...new Set('ab')]] })()`,
		`(() => { Set = null; return [Set, Object.keys(globalThis).includes('Map'), Object.getOwnPropertyNames(globalThis).includes('Uint8Array')] })()`,
		`[Object.getPrototypeOf(Uint8Array) === Object.getPrototypeOf(Int8Array), Uint8Array.prototype.constructor === Uint8Array, new Uint8Array(2) instanceof Uint8Array, Float64Array.from === Uint8Array.from]`,
		`[ArrayBuffer.name, ArrayBuffer.length, Object.getOwnPropertyNames(ArrayBuffer), ArrayBuffer[Symbol.species] === ArrayBuffer, ArrayBuffer.prototype.constructor === ArrayBuffer, String(ArrayBuffer), ArrayBuffer.isView(new DataView(new ArrayBuffer(1)))]`,
		`[JSON.stringify(Object.getOwnPropertyDescriptor(globalThis, 'Uint8Array')), JSON.stringify(Object.getOwnPropertyDescriptor(Uint8Array, 'prototype')), JSON.stringify(Object.getOwnPropertyDescriptor(Uint8Array.prototype, 'constructor'))]`,
		`['join', 'fill', 'map', 'set'].map((n) => [Uint8Array.prototype[n].name, Uint8Array.prototype[n].length, String(Uint8Array.prototype[n])])`,
		// ArrayBuffer
		`new ArrayBuffer(8).byteLength`, `new ArrayBuffer(-1)`, `ArrayBuffer(1)`, `new ArrayBuffer({ valueOf() { log.push('n'); return 2 } }).byteLength`, `new ArrayBuffer().byteLength`,
		`new ArrayBuffer(8).slice(2, 5).byteLength`, `(() => { class B extends ArrayBuffer {}; const b = new B(4); return [b instanceof B, b.slice(1) instanceof B, b.byteLength] })()`,
		`(() => { const s = new SharedArrayBuffer(8); return [s.byteLength, Object.prototype.toString.call(s), new Uint8Array(s).length, s.slice(2).byteLength] })()`,
		// methods past guardLoop
		tfx(`return [ramp().join('-').length, ramp(Float64Array).join(), ramp(BigInt64Array).join('|').slice(-20), ramp(Uint8Array, B, true).join('')]`),
		tfx(`return ramp().join({ toString() { log.push('sep'); return '.' } }).slice(0, 30)`), tfx(`return ramp(Float32Array).toLocaleString().slice(-40)`),
		tfx(`Object.defineProperty(Number.prototype, 'toLocaleString', { value: function () { return 'L' }, configurable: true, writable: true }); try { return ramp(Int8Array).toLocaleString().length } finally { delete Number.prototype.toLocaleString }`),
		tfx(`return [sum(ramp().fill(9, 5, -5)), sum(ramp().fill(300)), sum(ramp(Float64Array).fill(1.5, NaN)), sum(ramp(BigInt64Array).fill(7n, -3)), sum(ramp(Uint8Array, B, true).fill(2, 1))]`),
		tfx(`return sum(ramp().fill({ valueOf() { log.push('v'); return 4 } }, { valueOf() { log.push('s'); return 1 } }, { valueOf() { log.push('e'); return 9 } }))`),
		tfx(`return ramp(BigInt64Array).fill(1)`), tfx(`return ramp().fill(Symbol())`),
		tfx(`const a = ramp(); a[B - 1] = 250; return [a.indexOf(250), a.indexOf(250, 300), a.indexOf(250, -2), a.includes(249, B - 3), a.lastIndexOf(0), a.lastIndexOf(250, -3), a.lastIndexOf(7, 2), a.indexOf(1000), a.includes('1')]`),
		tfx(`const a = ramp(Float64Array); a[B - 2] = NaN; a[B - 3] = -0; return [a.indexOf(NaN), a.includes(NaN), a.indexOf(0), a.lastIndexOf(-0), a.includes(-0), a.indexOf(0, { valueOf() { log.push('f'); return 2 } })]`),
		tfx(`const a = ramp(BigInt64Array); return [a.indexOf(250n), a.includes(3), a.lastIndexOf(0n), ramp(Uint8Array, B, true).indexOf(0)]`),
		tfx(`return [sum(ramp().reverse()), sum(ramp(Uint16Array, B + 1).reverse()), sum(ramp(Float64Array, B, true).reverse()), sum(ramp(BigUint64Array).reverse())]`),
		tfx(`const a = new Uint8Array(B + 5); a.set(like(), 2); return [sum(a), a[5]]`), tfx(`const a = new Uint8Array(B); a.set(holey(B - 2), 1); return sum(a)`),
		tfx(`return new Uint8Array(B).set(holey(B), 1)`), tfx(`return new Uint8Array(B).set(holey(), -1)`), tfx(`const a = new Uint8Array(B); a.set(prox(holey(B))); return sum(a)`),
		tfx(`const a = new Uint8Array(B); a.set({ length: B, get 4() { log.push(4); return 4 } }, { valueOf() { log.push('off'); return 0 } }); return sum(a)`),
		tfx(`const a = new Float64Array(B); a.set(ramp(Uint8Array, B - 9), 9); return sum(a)`),
		tfx(`return [sum(ramp().toReversed()), sum(ramp(Float32Array, B, false).toReversed()), sum(ramp(BigInt64Array).toReversed())]`),
		tfx(`return [sum(ramp().with(5, 300)), sum(ramp().with(-1, 1)), sum(ramp(BigInt64Array).with(0, 5n))]`), tfx(`return ramp().with(B, 1)`),
		tfx(`return ramp().with(0, { valueOf() { log.push('v'); return 3 } })[0]`), tfx(`return ramp(BigInt64Array).with(1, 2)`), tfx(`return ramp().with({ valueOf() { log.push('i'); return -B - 1 } }, { valueOf() { log.push('v'); return 1 } })`),
		tfx(`return [sum(ramp().toSorted()), sum(ramp(Float64Array).toSorted((a, b) => b - a))]`),
		tfx(`return [sum(ramp().filter((x) => x & 1)), sum(ramp(Float64Array).filter(Boolean))]`), tfx(`class X extends Uint8Array {}; const x = new X(B); x[3] = 1; const f = x.filter((v) => v); return [f instanceof X, f.length]`),
		tfx(`return [sum(ramp().map((x, i, a) => x + i + a.length)), sum(ramp(Float32Array).map(Math.sqrt)), sum(ramp(BigInt64Array).map((x) => x * 2n))]`),
		tfx(`const seen = []; ramp().forEach(function (x, i, a) { if (i < 3 || i > B - 3) seen.push(x, i, a.length, this.t) }, { t: 'T' }); return seen`),
		tfx(`return [ramp().every((x) => x < 251), ramp().some((x) => x === 250), ramp().find((x) => x > 249), ramp().findIndex((x) => x === 250), ramp().findLast((x) => x === 3), ramp().findLastIndex((x) => x === 3)]`),
		tfx(`return [ramp().reduce((a, b) => (a + b) % 1000), ramp().reduceRight((a, b, i) => (a + b + i) % 1000, 5), ramp(BigInt64Array).reduce((a, b) => a + b)]`),
		tfx(`return ramp().map(5)`), tfx(`return ramp().reduce()`), tfx(`return ramp().find(Boolean)`), tfx(`return ramp().every((x) => { if (x === 100) throw new Error('at 100'); return true })`),
		tfx(`const a = ramp(); a.constructor = { [Symbol.species]: function (n) { log.push('species ' + n); return new Uint8Array(n) } }; return sum(a.map((x) => x))`),
		// %TypedArray%.from
		`Uint8Array.from([1, 2])`, `Uint8Array.from({ length: 2, 1: 5 })`, `Uint8Array.from('12')`, `Uint8Array.from(null)`, `Uint8Array.from([1], 5)`, `Uint8Array.from.call(Array, [1])`,
		`Float64Array.from({ length: 3 }, (v, i) => i * 1.5)`, `Uint8Array.from(new Set([3, 4]), function (x) { return x + this.k }, { k: 1 })`,
		tfx(`return sum(Uint8Array.from(like()))`), tfx(`return sum(Uint8Array.from(holey(), (v, i) => i))`), tfx(`return sum(Float32Array.from(prox(holey())))`),
		tfx(`return sum(Uint8Array.from({ length: B }))`), tfx(`return Uint8Array.from({ get [Symbol.iterator]() { log.push('it'); return undefined }, length: 1, 0: 3 })`),
		tfx(`class X extends Uint8Array {}; const x = X.from({ length: B, 2: 2 }); return [x instanceof X, sum(x)]`),
	})
}

// bufferBombs are ArrayBuffer's and the typed arrays' bombs.
var bufferBombs = []bomb{
	{"new ArrayBuffer", `new ArrayBuffer(2**30)`, endsMemory},
	{"new Float64Array", `new Float64Array(2**27)`, endsMemory},
	{"new Uint8Array of an array-like", `new Uint8Array({length: 2**30})`, endsMemory},
	{"new Uint8Array of a long array-like", `new Uint8Array({length: 2**25})`, endsTimeout},
	{"new Float64Array of a typed array", `new Float64Array(new Uint8Array(2**24))`, endsMemory},
	{"Uint8Array.from an array-like", `Uint8Array.from({length: 2**30})`, endsMemory},
	{"Uint8Array.from a long array-like", `Uint8Array.from({length: 2**25})`, endsTimeout},
	{"SharedArrayBuffer", `new SharedArrayBuffer(2**30)`, endsMemory},
	{"join", `new Uint8Array(2**25).join()`, endsTimeout},
	{"toLocaleString", `new Uint8Array(2**25).toLocaleString()`, endsTimeout},
	{"fill", `const a = new Uint8Array(2**25); for (;;) a.fill(1)`, endsTimeout},
	{"set from an array-like", `new Uint8Array(2**25).set({length: 2**25})`, endsTimeout},
	{"map with a native callback", `new Float64Array(2**22).map(Math.abs)`, endsTimeout},
	{"forEach with a native callback", `new Uint8Array(2**25).forEach(Math.abs)`, endsTimeout},
	{"find with a native callback", `new Uint8Array(2**25).find(Boolean)`, endsTimeout},
	{"filter with a native callback", `new Uint8Array(2**25).filter(Boolean)`, endsTimeout},
	{"reduce with a native callback", `new Uint8Array(2**25).reduce(Math.max)`, endsTimeout},
}

func TestBufferBombsEndTheirRun(t *testing.T) { runBombs(t, bufferBombs) }

func TestOtherGuardsKeepGojasResults(t *testing.T) {
	sameAsGoja(t, []string{
		// JSON.stringify
		`JSON.stringify({ a: [1, 'x', null, undefined, () => 1, { b: true }], c: new Date(0), d: -0, e: NaN })`, `JSON.stringify(undefined)`, `JSON.stringify(() => 1)`,
		`JSON.stringify({ a: 1, b: [2] }, function (k, v) { log.push(typeof this + ':' + k); return typeof v === 'number' ? v * 2 : v })`,
		`JSON.stringify({ a: 1, b: 2, c: { a: 3, d: 4 } }, ['a', 'c', 'a', 1, new String('b'), new Number(2), {}, null])`, `JSON.stringify({ 1: 'one', 2: 'two' }, [1, '2'])`,
		`JSON.stringify([1, [2]], null, 2)`, `JSON.stringify({ a: 1 }, null, '--')`, `JSON.stringify({ a: 1 }, null, new Number(3))`, `JSON.stringify({ a: 1 }, null, new String('~'))`, `JSON.stringify({ a: 1 }, null, 20)`,
		`JSON.stringify({ toJSON(k) { log.push('toJSON ' + k); return [k] } })`, `(() => { const a = []; a.push(a); return JSON.stringify(a) })()`, `JSON.stringify(1n)`,
		`JSON.stringify({ a: 1 }, 5)`, `JSON.stringify({ a: 1 }, {})`, `JSON.stringify('\ud800"\n')`, `JSON.stringify(new Proxy([1, 2], {}))`,
		fx(`return JSON.stringify(holey(), null, 1)`), fx(`return JSON.stringify(prox(holey()))`), fx(`return JSON.stringify({ a: 1, b: 2 }, holey())`),
		fx(`const names = holey(); names[3] = 'a'; return JSON.stringify({ a: 1, b: 2, z: 3, f: 4 }, names)`), fx(`return JSON.stringify(like(20))`),
		fx(`return JSON.stringify(dense(), (k, v) => typeof v === 'number' ? v + 1 : v)`),
		// JSON.parse
		`JSON.parse('{"a":[1,2,{"b":null}],"c":"x"}')`, `JSON.parse('[1,2', undefined)`, `JSON.parse('{"a":1}', (k, v) => typeof v === 'number' ? v + 1 : v)`, `JSON.parse({ toString() { log.push('ts'); return '3' } })`,
		`JSON.parse('"\\ud800"')`, `JSON.parse('1 2')`, `JSON.parse('')`, `JSON.parse('[' + '{"a":[1,"x",true]},'.repeat(1000) + '0]').length`, `JSON.parse('[' + '1,'.repeat(3000) + ']')`,
		`JSON.parse('{"__proto__": 1, "a": 2, "a": 3}')`,
		// argument lists
		`Math.max.apply(null, [1, 5, 3])`, `Math.max.apply(null, { length: 2, 0: 4, 1: 7 })`, `Math.max.apply(null)`, `Math.max.apply(null, null)`, `Math.max.apply(null, 5)`,
		`Function.prototype.apply.call(5, null, [])`, `Array.prototype.concat.apply([], [[1], [2]])`, `String.fromCharCode.apply(null, 'abc')`,
		fx(`return Math.max.apply(null, like())`), fx(`return Array.prototype.push.apply([], holey()).valueOf()`), fx(`return Function.prototype.apply.call(5, null, like(B))`),
		fx(`return Reflect.apply(Array.of, null, holey())`), fx(`return Reflect.apply(5, null, like())`), fx(`return Reflect.apply(Math.max, null, prox(holey()))`),
		fx(`return Reflect.construct(Array, like(B)).length`), fx(`return Reflect.construct(Array, like(B), Object)`), fx(`return Reflect.construct(5, like())`),
		fx(`class A { constructor(...a) { this.n = a.length } }; class B extends A {}; return Reflect.construct(A, holey(), B)`), `Reflect.construct(Array, [3])`,
		// Object's lists of a string
		`[Object.keys('ab'), Object.values('ab'), Object.entries('ab'), Object.getOwnPropertyNames('ab'), Object.getOwnPropertyDescriptors('ab')]`,
		fx(`const s = 'xé\ud800'.repeat(B / 2); return [Object.keys(s), Object.values(s), Object.entries(s).length, Object.getOwnPropertyNames(s)]`),
		fx(`const d = Object.getOwnPropertyDescriptors('ab'.repeat(B)); return [Object.keys(d).length, d[5], d.length]`),
		fx(`const s = new String('abc'.repeat(B)); s.extra = 1; return [Object.keys(s).slice(-2), Object.getOwnPropertyNames(s).slice(-3)]`),
		fx(`return [Object.keys(dense()).length, Reflect.ownKeys(dense()).slice(-2), Object.isFrozen(Object.freeze(dense()))]`),
		fx(`return Object.assign({}, 'xy'.repeat(B), null, { a: 1 }, 'q')`), fx(`return Object.assign(Object.freeze({}), 'xy'.repeat(B))`),
		fx(`const t = {}; Object.defineProperty(t, 5, { set(v) { log.push('set5=' + v) } }); Object.assign(t, 'abcdefg'.repeat(B)); return Object.keys(t).length`),
		// URI encoders
		fx(`const s = 'aé b\ud83d\ude00/?'.repeat(B); return [encodeURIComponent(s), encodeURI(s), escape(s)]`), fx(`return encodeURIComponent('x'.repeat(S + 5))`),
		fx(`return encodeURI('x'.repeat(S) + '\ud800')`), fx(`return encodeURIComponent('é'.repeat(ST - 1) + '\ud83d\ude00'.repeat(S))`),
		fx(`return escape({ toString() { log.push('ts'); return 'a b'.repeat(S) } })`), `encodeURIComponent('a b\ud83d\ude00')`, `encodeURIComponent('\ud800')`, `escape('é\u1234')`,
		// iterators
		`[...'aé\ud83d\ude00', ...new Set([1, 2]), ...new Map([[1, 2]]), ...[3, , 4], ...'ab'.matchAll(/./g)].map(String)`, `Array.from(new Map([[1, 2]]).keys())`,
		fx(`return [...holey()].length`), fx(`const [a, b, ...c] = holey(); return [a, b, c.length]`), fx(`return new Set(holey()).size`), fx(`return Array.from('xé'.repeat(B)).length`),
		`[Array.prototype[Symbol.iterator]().next.name, Object.getPrototypeOf([][Symbol.iterator]()).next.length]`,
	})
}

// otherBombs are the bombs of JSON, argument lists, iteration, Object's
// lists and the URI encoders.
var otherBombs = []bomb{
	// Built as the join's arrays are (arrayBombs), so that the bound finds
	// the run inside stringify.
	{"JSON.stringify of a dense array of dense arrays", `JSON.stringify(Array(8000).fill(Array(8000).fill(1.5)))`, endsTimeout},
	{"JSON.stringify of holes", `JSON.stringify(new Array(2**26), null, 10)`, endsTimeout},
	{"JSON.stringify with a huge property list", `JSON.stringify(1, new Array(2**32-1))`, endsTimeout},
	{"JSON.parse of nested arrays", `JSON.parse('[' + '[],'.repeat(2**22) + '[]]')`, endsMemory},
	{"Function.prototype.apply", `Math.max.apply(null, {length: 1e8})`, endsMemory},
	{"Function.prototype.apply of a long array-like", `Math.max.apply(null, {length: 2**22})`, endsTimeout},
	{"Reflect.apply", `Reflect.apply(Math.max, null, {length: 1e8})`, endsMemory},
	{"Reflect.construct", `Reflect.construct(Array, {length: 1e8})`, endsMemory},
	{"spread of keys()", `[...new Array(2e7).keys()]`, endsTimeout},
	{"Array.from an iterator", `Array.from(new Array(2e7).keys())`, endsTimeout},
	{"new Set of a string", `new Set('x'.repeat(2**25))`, endsTimeout},
	{"new Map of entries()", `new Map(new Array(2**25).entries())`, endsTimeout},
	{"Promise.all of keys()", `Promise.all(new Array(2**25).keys())`, endsTimeout},
	{"Object.keys of a string", `Object.keys('x'.repeat(2**25))`, endsMemory},
	{"Object.entries of a string", `Object.entries('x'.repeat(2**21))`, endsMemory},
	{"Object.getOwnPropertyDescriptors of a string", `Object.getOwnPropertyDescriptors('x'.repeat(2**21))`, endsMemory},
	{"Object.assign of a string", `Object.assign({}, 'x'.repeat(2**24))`, endsTimeout},
	// Each encodes to 48 and 24 MB, past growingLimitMB.
	{"encodeURIComponent", `encodeURIComponent('\u00e9'.repeat(2**23))`, endsMemory},
	{"escape", `escape('\u1234'.repeat(2**22))`, endsMemory},
}

func TestOtherBombsEndTheirRun(t *testing.T) { runBombs(t, otherBombs) }

// The guards' own paths at the thresholds the sandbox ships, beside
// goja's: past guardLoop, guardSlowLoop, stringNative and the dense
// arrays goja takes. A race build runs goja several times slower; it
// skips them (the shifted tests run the same paths).
func TestGuardsAtFullThresholds(t *testing.T) {
	if raceBuild {
		t.Skip("the full thresholds take minutes under the race detector")
	}
	sameAsGojaShifted(t, 0, []string{
		fx(`return [holey().join('-'), holey().indexOf('z'), holey().map((x) => x + 1), holey().flat(), holey().toSorted().slice(0, 4)]`),
		fx(`const o = { length: SL * 3 }; Object.defineProperty(o, SL + 1, { set(v) { log.push('shrink'); o.length = SL + 5 } }); Array.prototype.fill.call(o, 7); return [o.length, o[SL + 2], o[SL + 9]]`),
		fx(`return [Array.prototype.slice.call(like(), B - 5), Array.from(like(), (x, i) => i % 3), prox(holey()).splice(B - 6, 2, 'n')]`),
		fx(`return [dense().indexOf(6), dense().slice(5).length, dense().sort((a, b) => b - a).slice(0, 3), Math.max.apply(null, like())]`),
		tfx(`return [ramp().join('-').length, sum(ramp(Float64Array, B, true).reverse()), ramp().lastIndexOf(7, 2), sum(ramp().fill(9, 5, -5)), sum(Uint8Array.from(like()))]`),
		`['xy'.repeat(S), 'é'.padStart(S, 'ab'), ('AΣ '.repeat(S >> 1) + 'Σ').toLowerCase(), '\u00e9'.repeat(S).normalize('NFD')]`,
		`['x,'.repeat(B).split(','), 'xé'.repeat(B).replaceAll('é', '$&$&'), encodeURIComponent('é'.repeat(ST - 1) + '\ud83d\ude00'.repeat(S))]`,
		fx(`return [JSON.stringify(holey(), null, 1).length, Object.keys('xé'.repeat(B)).length, [...holey()].length]`),
	})
}

// Every guarded function keeps goja's shape: name, length, the property's
// attributes, its own keys, what Function.prototype.toString says, and
// whether it constructs; the objects they live on keep their keys in
// order.
func TestGuardsKeepTheShapeOfGojasFunctions(t *testing.T) { sameAsGoja(t, []string{shapeExpr}) }

const shapeExpr = `(() => {
  const TA = Object.getPrototypeOf(Uint8Array)
  const iters = [[][Symbol.iterator](), ''[Symbol.iterator](), new Map()[Symbol.iterator](), new Set()[Symbol.iterator](), 'a'.matchAll(/a/g)].map(Object.getPrototypeOf)
  const owners = [['String.prototype', String.prototype], ['String', String], ['Array.prototype', Array.prototype], ['Array', Array],
    ['%TypedArray%', TA], ['%TypedArray%.prototype', TA.prototype], ['JSON', JSON], ['Object', Object], ['Reflect', Reflect],
    ['Function.prototype', Function.prototype], ['RegExp.prototype', RegExp.prototype], ['global', globalThis], ...iters.map((p, i) => ['iterator ' + i, p])]
  const isCtor = (f) => { try { Reflect.construct(function () {}, [], f); return true } catch (e) { return false } }
  const out = []
  // The global object's keys: the timers go in in a Go map's order.
  const mine = (name, k) => name !== 'global' || ['encodeURI', 'encodeURIComponent', 'escape', 'unescape', 'decodeURI'].includes(k)
  for (const [name, o] of owners) {
    if (name !== 'global') out.push(name + ' keys ' + Reflect.ownKeys(o).map(String).join())
    for (const k of Reflect.ownKeys(o).filter((k) => mine(name, k))) {
      const d = Object.getOwnPropertyDescriptor(o, k)
      if (typeof d.value !== 'function') continue
      const f = d.value
      out.push([name, String(k), f.name, f.length, d.writable, d.enumerable, d.configurable, Reflect.ownKeys(f).map(String).join(),
        Function.prototype.toString.call(f), isCtor(f), Object.getPrototypeOf(f) === Function.prototype].join(' | '))
    }
  }
  for (const C of ['ArrayBuffer', 'Uint8Array', 'Float64Array', 'BigInt64Array']) {
    const f = globalThis[C]
    out.push([C, f.name, f.length, Reflect.ownKeys(f).map(String).join(), String(f), isCtor(f), Object.getPrototypeOf(f) === TA,
      f.prototype.constructor === f, JSON.stringify(Object.getOwnPropertyDescriptor(f, 'prototype')), JSON.stringify(Object.getOwnPropertyDescriptor(f.prototype, 'constructor').writable)].join(' | '))
  }
  return out
})()`

// regexpBombs are RegExp.prototype[Symbol.replace]'s bombs.
var regexpBombs = []bomb{
	{"replace with a large replacement", `'x'.repeat(2**20).replace(/x/g, 'y'.repeat(512))`, endsMemory},
	{"replace with $\x60", `'x'.repeat(2**16).replace(/x/g, '$\x60')`, endsMemory},
	{"replace with a native callback", `'x'.repeat(2**23).replace(/x/g, String)`, endsTimeout},
	{"replace with a callback of many matches", `'x'.repeat(2**23).replace(/x/g, (m) => m)`, endsTimeout},
	{"replace of many matches", `'x'.repeat(2**23).replace(/x/g, 'y')`, endsTimeout},
	{"match of many matches", `'x'.repeat(2**23).match(/x/g)`, endsTimeout},
	{"split at many matches", `'x'.repeat(2**23).split(/x/)`, endsTimeout},
	// The RegExp string iterator is guarded when the first one is made.
	{"spread of matchAll", `[...'x'.repeat(2**23).matchAll(/x/g)]`, endsTimeout},
	{"Array.from matchAll of a subclass", `class R extends RegExp {}; Array.from('x'.repeat(2**23).matchAll(new R('x', 'g')))`, endsTimeout},
}

func TestRegExpBombsEndTheirRun(t *testing.T) { runBombs(t, regexpBombs) }

func TestRegExpGuardsKeepGojasResults(t *testing.T) {
	sameAsGoja(t, []string{
		`'aXbX'.replace(/X/g, '-')`, `'aXbX'.replace(/X/, '[$&|$\x60|$\x27|$$|$1|$0]')`, `'abc'.replace(/(b)(c)?/, '<$2|$1|$10|$01|$3>')`,
		`'abc'.replace(/b*/g, '-')`, `'aé\ud83d\ude00'.replace(/(?:)/gu, '-')`, `'aé\ud83d\ude00'.replace(/(?:)/g, '-')`, `'abab'.replace(/(?<x>a)/g, '$<x>!')`,
		`'xx'.replace(/x/g, (m, i, s) => m + i + s.length)`, `'x1x2'.replace(/x(\d)/g, String)`, `'x'.replace(/x/, Symbol())`,
		`(() => { const r = /a/y; r.lastIndex = 1; return ['aab'.replace(r, '-'), r.lastIndex] })()`, `(() => { const r = /a/g; r.lastIndex = 3; return ['aa'.replace(r, 'b'), r.lastIndex] })()`,
		`RegExp.prototype[Symbol.replace].call({ exec() { log.push('exec'); return null }, flags: '' }, 'ab', 'c')`,
		`RegExp.prototype[Symbol.replace].call(5, 'ab', 'c')`, `/x/g[Symbol.replace]({ toString() { log.push('s'); return 'xx' } }, { toString() { log.push('r'); return 'yy' } })`,
		`'x'.repeat(B).replace(/x/g, 'ab'.repeat(S >> 3))`, `'xé'.repeat(B).replace(/é/g, '$\x60')`, `'x-y'.repeat(B).replace(/(x)-(y)/g, '$2$1$&')`,
		`'ab'.repeat(B).replace(/(?:)/g, '$\x27')`, `'x'.repeat(B).replace(/x/g, String)`, `'x'.repeat(B).replace(/x/g, Number.isFinite)`,
		`(() => { const r = /x/g; r.exec = () => { log.push('own exec'); return null }; return 'xx'.replace(r, 'y'.repeat(S)) })()`,
		`['a1b22c'.match(/\d+/g), 'a1b22c'.match(/\d/), 'a1b22c'.split(/\d/), 'a1b22c'.split(/(\d)/, 3), 'abc'.split(/(?:)/u), 'x'.repeat(B).match(/x/g).length, 'x,'.repeat(B).split(/,/).length]`,
		`[('xé' + 'x'.repeat(B)).match(/x|é/g).length, 'ab'.repeat(B).split(/(?=b)/).slice(-3), /x/g[Symbol.match]({ toString() { log.push('s'); return 'xx' } })]`,
		`(() => { const r = /,/; r.constructor = { [Symbol.species]: function (src, flags) { log.push('species ' + flags); return new RegExp(src, flags) } }; return 'a,b'.repeat(B).split(r).length })()`,
		`(() => { const r = /x/g; Object.defineProperty(r, Symbol.match, { get() { log.push('match?'); return true } }); return 'x'.repeat(B).replace(r, 'y'.repeat(S)).length })()`,
	})
}

// budgetHost is a Host with a MemoryBudget: it grants up to limit bytes
// in all, and past it ends the run with the memory text as its context's
// cause, as the worker's meter does.
type budgetHost struct {
	fakeHost
	mu      sync.Mutex
	limit   int64
	granted int64
	asked   []int64
	cancel  context.CancelCauseFunc
}

func (h *budgetHost) Reserve(n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked = append(h.asked, n)
	if h.granted+n > h.limit {
		h.cancel(protocol.NewMemoryLimitError(48))
		return false
	}
	h.granted += n
	return true
}

// A host that keeps a budget is asked before a large allocation, and only
// then; a refusal ends the run with the host's memory text, before the
// allocation, and the program cannot catch it.
func TestMemoryBudgetIsAskedFirst(t *testing.T) {
	run := func(code string) (*protocol.ExecuteResult, *budgetHost) {
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		h := &budgetHost{limit: 48 << 20, cancel: cancel}
		j := job(code)
		j.MemoryLimitMB = 48
		// The growing join below takes 5-6 s under the race detector on a
		// busy machine; this test is about the budget, not the clock.
		j.TimeoutMs = 60000
		return envelope(t)(Run(ctx, j, h)), h
	}
	r, h := run(`async () => 'x'.repeat(1000).length + new Uint8Array(4096).length`)
	if result(t, r) != float64(5096) || len(h.asked) != 0 {
		t.Errorf("small allocations: %s, asked %v", r.ResultJSON, h.asked)
	}
	r, h = run(`async () => new ArrayBuffer(16 << 20).byteLength + 'x'.repeat(8 << 20).length`)
	if result(t, r) != float64(24<<20) || len(h.asked) != 2 || h.asked[0] != 16<<20 || h.asked[1] != 8<<20 {
		t.Errorf("granted allocations: %s, asked %v", r.ResultJSON, h.asked)
	}
	before := heapAllocs()
	r, h = run(`async () => { const keep = new ArrayBuffer(40 << 20); try { return new ArrayBuffer(16 << 20) } catch (e) { return 'caught' } }`)
	wantError(t, r, protocol.NewMemoryLimitError(48).Error())
	if r.Failure != protocol.FailureMemory || len(h.asked) != 2 || h.granted != 40<<20 {
		t.Errorf("refused: failure %q, asked %v, granted %d", r.Failure, h.asked, h.granted)
	}
	if allocated := heapAllocs() - before; allocated > 56<<20 {
		t.Errorf("the refused buffer was allocated: %d MB in all", allocated>>20)
	}
	// A join of primitives is sized first (a byte a character, all being
	// ASCII); one of objects asks as it grows.
	r, h = run(`async () => Array(2**12).fill('x'.repeat(2**12)).join('').length`)
	if result(t, r) != float64(1<<24) || len(h.asked) != 1 || h.asked[0] != 1<<24 {
		t.Errorf("a join of strings: %s, asked %v", r.ResultJSON, h.asked)
	}
	r, h = run(`async () => Array(2**12).fill({ toString() { return 'x'.repeat(2**12) } }).join('').length`)
	if result(t, r) != float64(1<<24) || len(h.asked) < 3 {
		t.Errorf("a growing join: %s, asked %v", r.ResultJSON, h.asked)
	}
}
