package sandbox

import (
	"context"
	"runtime/metrics"
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
  for (const k of Reflect.ownKeys(v)) {
    const desc = Object.getOwnPropertyDescriptor(v, k)
    out += String(k) + (desc.get || desc.set ? ':accessor' : '=' + d(desc.value, depth + 1)) +
      (desc.enumerable ? '' : '!e') + (desc.writable === false ? '!w' : '') + (desc.configurable ? '' : '!c') + ','
  }
  return out + '}'
}
`

// evalIn runs expr in the prepared session s and describes its value, or
// what it threw, beside the log it filled.
func evalIn(t *testing.T, s *session, expr string) string {
	t.Helper()
	code := "async () => {\n  const log = []\n" + describeJS + "\n  try {\n    const r = (" + expr + ")\n" +
		"    return ['ok', d(r), log.join('|'), await Promise.all(digests)]\n  } catch (e) {\n" +
		"    return ['threw', e instanceof Error ? e.constructor.name + ': ' + e.message : d(e), log.join('|'), await Promise.all(digests)]\n  }\n}"
	res, err := (&Prepared{s: s}).Run(context.Background(), Job{Code: code, TimeoutMs: 60000, MemoryLimitMB: 4096}, nil)
	if err != nil {
		t.Fatalf("%s: fault %v", expr, err)
	}
	if res.HasError {
		return "run failed: " + res.Error
	}
	return res.ResultJSON
}

// sameAsGoja runs each expression with the guards and without, and
// requires the same description.
func sameAsGoja(t *testing.T, exprs []string) {
	t.Helper()
	for _, expr := range exprs {
		t0 := time.Now()
		want := evalIn(t, prepareSession(true), expr)
		t1 := time.Now()
		got := evalIn(t, prepareSession(false), expr)
		if el := time.Since(t0); el > 300*time.Millisecond {
			t.Logf("slow: goja %v, guarded %v: %s", t1.Sub(t0), time.Since(t1), expr)
		}
		if got != want {
			if len(got) > 2000 {
				got = got[:2000] + "…"
			}
			if len(want) > 2000 {
				want = want[:2000] + "…"
			}
			t.Errorf("%s\n guarded: %s\n    goja: %s", expr, got, want)
		}
	}
}

func TestStringGuardsKeepGojasResults(t *testing.T) {
	big := "2**20 + 3"
	sameAsGoja(t, []string{
		// repeat
		`'ab'.repeat(3)`, `'ab'.repeat(0)`, `''.repeat(2**40)`, `'a'.repeat(-1)`, `'a'.repeat(Infinity)`, `'a'.repeat(-Infinity)`,
		`'a'.repeat(NaN)`, `'a'.repeat('3')`, `'a'.repeat(2.9)`, `'a'.repeat({ valueOf() { log.push('v'); return 4 } })`,
		`'xy'.repeat(` + big + `)`, `'é'.repeat(` + big + `)`, `'a\ud800'.repeat(` + big + `)`, `'abc'.repeat(2**19 + 1)`,
		`String.prototype.repeat.call(null, 3)`, `String.prototype.repeat.call(undefined)`, `String.prototype.repeat.call(Symbol(), 3)`,
		`String.prototype.repeat.call({ toString() { log.push('t'); return 'q' } }, { valueOf() { log.push('n'); return 2**20 } })`,
		`String.prototype.repeat.call(12, 2**20)`, `'a'.repeat(Symbol())`,
		// padStart, padEnd
		`'ab'.padStart(5)`, `'ab'.padEnd(5, 'xyz')`, `'abc'.padStart(2)`, `'a'.padEnd(10, '')`, `'a'.padStart(4, undefined)`,
		`'a'.padEnd(` + big + `)`, `'a'.padStart(` + big + `, 'xyz')`, `'é'.padEnd(` + big + `, 'ab')`, `'a'.padStart(` + big + `, 'éx')`,
		`'a'.padEnd(` + big + `, 'a'.repeat(2**21) + 'é')`, `'a'.padEnd(` + big + `, 'é' + 'a'.repeat(2**21))`,
		`'a'.padStart(` + big + `, '\ud800\udc00x')`, `'a'.padEnd(-5, 'x')`, `'a'.padEnd(2**20, { toString() { log.push('f'); return 'yz' } })`,
		`String.prototype.padEnd.call({ toString() { log.push('s'); return 'q' } }, { valueOf() { log.push('l'); return 2**20 } }, { toString() { log.push('f'); return '12' } })`,
		`String.prototype.padEnd.call(null, 3)`, `'a'.padEnd(5, Symbol())`, `'x'.padStart(2**20 + 1, 'abc'.repeat(2**18))`,
		// concat
		`'a'.concat(1, null, undefined, {}, [2, 3])`, `'a'.concat()`, `'é'.concat('b')`, `String.prototype.concat.call(null, 1)`,
		`'a'.concat({ toString() { log.push(1); return 'b' } }, { toString() { log.push(2); return 'c' } })`,
		`'a'.repeat(2**20).concat('b'.repeat(2**20), 'é')`, `'a'.concat(Symbol())`,
		// normalize
		`'\u00e9'.normalize('NFD')`, `'e\u0301'.normalize()`, `'a'.normalize('bad')`, `'\u00e9'.repeat(2**20).normalize('NFD')`,
		`('e\u0301\u0323'.repeat(2**19) + '\ufb01').normalize('NFKC')`, `'\u00e9'.repeat(2**20).normalize('bad')`,
		`'\u00e9'.repeat(2**20).normalize({ toString() { log.push('f'); return 'NFKD' } })`, `'a\ud800'.repeat(2**20).normalize()`,
		// case mapping
		`'aBc'.toUpperCase()`, `'ß'.toUpperCase()`, `'İ'.toLowerCase()`, `'ΑΣ'.toLowerCase()`, `'a'.repeat(2**20 + 5).toUpperCase()`,
		`('aß'.repeat(2**19) + 'ﬁ').toUpperCase()`, `('AΣ '.repeat(2**19) + 'Σ').toLowerCase()`, `('\u0345\u03c2'.repeat(2**19)).toLowerCase()`,
		`('İ\ud800x'.repeat(2**19)).toLocaleLowerCase()`, `'Ab'.repeat(2**20).toLocaleUpperCase()`, `String.prototype.toUpperCase.call(null)`,
		// split
		`'a,b,,c'.split(',')`, `'abc'.split('')`, `'abc'.split()`, `'abc'.split(undefined, 0)`, `'a,b,c'.split(',', 2)`,
		`'a,b'.split(',', -1)`, `'a,b'.split(',', 2**32 + 1)`, `'a,b'.split(',', 1.9)`, `'aéb'.split('')`,
		`'x,'.repeat(2**17 + 5).split(',')`, `'x'.repeat(2**17 + 5).split('')`, `'xé'.repeat(2**17).split('')`, `'x,'.repeat(2**18).split(',', 2**17 + 3)`,
		`'x,'.repeat(2**18).split({ toString() { log.push('sep'); return ',' } }, { valueOf() { log.push('lim'); return 2**17 + 1 } })`,
		`'a1b2c'.split(/\d/)`, `'ab'.split({ [Symbol.split]: (s, l) => 'custom ' + s + l })`, `String.prototype.split.call(null, ',')`,
		`'ab'.split({ [Symbol.split]: 5 })`, `'\ud800a\ud800'.split('a')`, `('a'.repeat(40) + ',').repeat(2**12).split(',')`,
		// replace, replaceAll
		`'abcabc'.replace('b', 'X')`, `'abcabc'.replaceAll('b', 'X')`, `'abc'.replace('b', '[$&|$$|$\x60|$\x27|$1|$0|$<x>|$]')`,
		`'abc'.replaceAll('', '-')`, `'abc'.replace('', '-')`, `'abc'.replaceAll('b', (m, p, s) => m + p + s)`,
		`'aaa'.replaceAll('aa', 'b')`, `'x'.repeat(2**17 + 3).replaceAll('x', 'ab')`, `'xé'.repeat(2**17).replaceAll('é', '$&$&')`,
		`'x'.repeat(2**17 + 3).replaceAll('x', (m, p) => p % 7 ? '' : 'q')`, `'x'.repeat(2**17 + 3).replaceAll('x', String)`,
		`'ab'.repeat(2**10).replaceAll('b', '$\x60')`, `'ab'.replace({ toString() { log.push('s'); return 'b' } }, { toString() { log.push('r'); return 'c' } })`,
		`'ab'.replaceAll({ toString() { log.push('s'); return 'b' } }, { toString() { log.push('r'); return 'c' } })`,
		`'aXbX'.replace(/X/g, '-')`, `'aXbX'.replaceAll(/X/g, '-')`, `'aXbX'.replaceAll(/X/, '-')`, `String.prototype.replace.call(null)`,
		`'a\ud800b'.replaceAll('\ud800', '$\x27')`, `('é' + 'a'.repeat(2**19)).replaceAll('a'.repeat(100), 'x')`,
		`'ab'.replace('b', Symbol())`, `'ab'.replace({ [Symbol.replace]: (s, r) => s + r }, 1)`,
		// indexOf, lastIndexOf, includes
		`'abcabc'.indexOf('c', 3)`, `'abc'.indexOf('c', -5)`, `'abc'.lastIndexOf('c', NaN)`, `'abcabc'.lastIndexOf('abc', 2)`,
		`('é' + 'a'.repeat(2**18)).indexOf('a'.repeat(100) + 'b')`, `('é' + 'a'.repeat(2**18)).indexOf('a'.repeat(100), 50)`,
		`('é' + 'ab'.repeat(2**17) + 'x').indexOf('ab'.repeat(100) + 'x')`, `('é' + 'ab'.repeat(2**17) + 'x').lastIndexOf('ab'.repeat(100))`,
		`('é' + 'ab'.repeat(2**17)).lastIndexOf('ab'.repeat(100), 1000)`, `('é' + 'ab'.repeat(2**17)).lastIndexOf('b' + 'ab'.repeat(99), 0)`,
		`('é' + 'ab'.repeat(2**17) + 'x').includes('ab'.repeat(100) + 'x')`, `('é' + 'ab'.repeat(2**17)).includes('ab'.repeat(100) + 'x', 7)`,
		`'abc'.includes(/b/)`, `'abc'.includes({ toString() { return 'b' } })`, `String.prototype.includes.call(null, 'a')`,
		// String.raw
		"String.raw`a${1}b${2}c`", `String.raw({ raw: ['x', 'y', 'z'] }, 1)`, `String.raw({ raw: { length: 3, 0: 'a', 2: 'c' } })`,
		`String.raw({ raw: { length: 0 } })`, `String.raw({ raw: 'abc' }, '-', '+')`, `String.raw()`, `String.raw({ raw: { length: 2**17 + 5 } }).length`,
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
	endsTimeout ending = iota
	endsMemory
	endsFinished
)

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

// runBombs runs each bomb under a 300 ms bound and a 64 MB limit, and
// requires its declared text within a wall bound that leaves a busy
// machine room, with the process's allocations held far below the bomb's
// (runtime/metrics before and after).
func runBombs(t *testing.T, bombs []bomb) {
	for _, b := range bombs {
		t.Run(b.name, func(t *testing.T) {
			j := job("async () => { " + b.code + "; return 'finished' }")
			j.TimeoutMs, j.MemoryLimitMB = 300, 64
			want := protocol.NewExecutionTimeoutError(300).Error()
			if b.ends == endsMemory {
				want = protocol.NewMemoryLimitError(64).Error()
			}
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
			case endsMemory:
				wantError(t, r, want)
				if r.Failure != protocol.FailureMemory {
					t.Errorf("failure kind %q, want %q", r.Failure, protocol.FailureMemory)
				}
			default:
				wantError(t, r, want)
			}
			if took > 3*time.Second {
				t.Errorf("took %v", took)
			}
			// A refused allocation never happens: what a memory bomb's
			// run allocates is its setup. A loop stopped at its bound
			// allocated what it did in 300 ms; the bombs would take GBs.
			bound := uint64(1 << 30)
			if b.ends == endsMemory {
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
