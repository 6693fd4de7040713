package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Programs the sandbox alone must stop inside their bound: 100 ms, a
// run's start taking a few of them, or 300 ms for a program that first
// sets its storm up in a loop (setsUp), so that the storm itself meets the
// bound. Each computes until it is stopped: its bound is the CPU time it
// costs.
func TestHostileProgramsEndInsideTheirBound(t *testing.T) {
	setsUp := map[string]bool{"storm of native interval callbacks": true}
	cases := []struct{ name, code string }{
		{"busy loop", `async () => { while (true) {} }`},
		{"loop in finally", `async () => { try { while (true) {} } finally { while (true) {} } }`},
		{"loop after await", `async () => { await null; while (true) {} }`},
		{"never-yielding promise chain", `async () => { const f = () => Promise.resolve().then(f); f(); await new Promise(() => {}) }`},
		{"microtask storm", `async () => { const f = () => queueMicrotask(f); f(); await new Promise(() => {}) }`},
		{"timer storm", `async () => { const f = () => setTimeout(f, 0); for (let i = 0; i < 100; i++) f(); await new Promise(() => {}) }`},
		{"storm of native interval callbacks", `async () => { for (let i = 0; i < 20000; i++) setInterval(Date.now, 1); await new Promise(() => {}) }`},
		{"loop in a timer", `async () => { setTimeout(() => { while (true) {} }, 1); await new Promise(() => {}) }`},
		{"loop while settling", `async () => { Promise.resolve().then(() => { while (true) {} }); await new Promise(() => {}) }`},
		// toJSON recursion grows the Go stack, not the JavaScript one, and
		// so slowly (JSON.stringify is quadratic in depth) that the clock's
		// interrupt, landing in toJSON, ends it first.
		{"toJSON recursion", `async () => { const o = { toJSON() { return [o] } }; return JSON.stringify(o) }`},
		// One call of a built-in that loops in Go: the guards stop it
		// (guards_test.go holds them all).
		{"a built-in's loop over holes", `async () => new Array(2**32-1).indexOf(1)`},
		{"JSON.stringify of holes", `async () => JSON.stringify(new Array(2**26), null, 10)`},
		{"spread of a long iterator", `async () => [...new Array(2e7).keys()].length`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := job(c.code)
			j.TimeoutMs = 100
			if setsUp[c.name] {
				j.TimeoutMs = 300
			}
			start := time.Now()
			r := runJob(t, j, nil)
			wantError(t, r, protocol.NewExecutionTimeoutError(j.TimeoutMs).Error())
			if el := time.Since(start); el > 3*time.Second {
				t.Fatalf("took %v", el)
			}
		})
	}
}

// Deep recursion ends with a clear error instead of killing the process,
// also when it passes through native builtins, and the unwind stays quick.
func TestDeepRecursion(t *testing.T) {
	cases := []string{
		`async () => { const f = () => f() + 1; return f() }`,
		`async () => { function f() { [1].map(f) } f() }`,
		`async () => { const o = { get x() { return String(this) }, toString() { return this.x } }; return String(o) }`,
		`async () => { const p = new Proxy({}, { get: (t, k) => p[k] }); return p.x }`,
		`async () => { try { const f = () => f(); f() } catch (e) { return 'caught' } }`,
	}
	for _, code := range cases {
		start := time.Now()
		r := runJob(t, job(code), nil)
		el := time.Since(start)
		t.Logf("%v: %s", el, code)
		if !r.HasError || r.Error != StackOverflowText {
			t.Errorf("%s: error %q, want %q", code, r.Error, StackOverflowText)
		}
		if el > 3*time.Second {
			t.Errorf("%s: took %v", code, el)
		}
	}
}

// Function('return this')() reaches the global object and nothing beyond
// it: every global is an ECMAScript builtin or one the sandbox installs on
// purpose, and none of the installed functions leaks a Go name.
func TestGlobalScopeHoldsNoGoObjects(t *testing.T) {
	got := result(t, runJob(t, job(`async () => {
    const g = Function('return this')()
    const names = Object.getOwnPropertyNames(g)
    const installed = ['console', 'setTimeout', 'setInterval', 'clearTimeout', 'clearInterval', 'queueMicrotask']
    const natives = installed.filter((n) => typeof g[n] === 'function').map((n) => g[n].name)
    const logNames = ['log', 'warn', 'error', 'info'].map((n) => console[n].name)
    return [names.filter((n) => installed.includes(n)).sort(), natives, logNames,
      names.filter((n) => /go|Go|host|__/.test(n)), typeof g.GoError, Object.keys(g)]
  }`), nil)).([]any)
	wantInstalled := []any{"clearInterval", "clearTimeout", "console", "queueMicrotask", "setInterval", "setTimeout"}
	if !reflect.DeepEqual(got[0], wantInstalled) {
		t.Errorf("installed globals %#v", got[0])
	}
	if !reflect.DeepEqual(got[1], []any{"setTimeout", "setInterval", "clearTimeout", "clearInterval", "queueMicrotask"}) {
		t.Errorf("native names %#v", got[1])
	}
	if !reflect.DeepEqual(got[2], []any{"log", "warn", "error", "info"}) {
		t.Errorf("console names %#v", got[2])
	}
	if !reflect.DeepEqual(got[3], []any{}) || got[4] != "undefined" {
		t.Errorf("host-looking globals %#v, GoError %#v", got[3], got[4])
	}
	keys := got[5].([]any)
	var enumerable []string
	for _, k := range keys {
		enumerable = append(enumerable, k.(string))
	}
	sort.Strings(enumerable)
	// Web IDL makes operations and attributes of the global enumerable;
	// interfaces (Request, URL, …) stay non-enumerable.
	want := []string{"atob", "btoa", "caches", "clearInterval", "clearTimeout", "crypto", "fetch",
		"queueMicrotask", "setInterval", "setTimeout", "structuredClone"}
	if !reflect.DeepEqual(enumerable, want) {
		t.Errorf("enumerable globals %v", enumerable)
	}
}

// The whole global graph, walked from Function('return this')(), holds
// nothing but ordinary JavaScript objects and functions: goja exposes a
// wrapped Go value as an object whose class is not one of these.
func TestGlobalGraphIsPlainJavaScript(t *testing.T) {
	got := result(t, runJob(t, job(`async () => {
    const seen = new Set(), odd = []
    const ok = new Set(['[object Object]', '[object Function]', '[object Array]', '[object Error]', '[object Math]',
      '[object JSON]', '[object Reflect]', '[object Symbol]', '[object Promise]', '[object console]', '[object AsyncFunction]',
      '[object GeneratorFunction]', '[object AsyncGeneratorFunction]', '[object Generator]', '[object Map]', '[object Set]',
      '[object WeakMap]', '[object WeakSet]', '[object ArrayBuffer]', '[object DataView]', '[object RegExp]', '[object Date]',
      '[object String]', '[object Number]', '[object Boolean]', '[object BigInt]', '[object Array Iterator]',
      '[object Map Iterator]', '[object Set Iterator]', '[object String Iterator]', '[object RegExp String Iterator]',
      '[object Uint8Array]', '[object Arguments]', '[object global]'])
    const walk = (v, path, depth) => {
      if (v === null || (typeof v !== 'object' && typeof v !== 'function') || seen.has(v) || depth > 6) return
      seen.add(v)
      let tag
      try { tag = Object.prototype.toString.call(v) } catch (e) { tag = 'throws' }
      if (!ok.has(tag) && !/^\[object (\w+Array|Atomics|Iterator)\]$/.test(tag)) odd.push(path + ' ' + tag)
      for (const k of Reflect.ownKeys(v)) {
        const d = Object.getOwnPropertyDescriptor(v, k)
        if (d && 'value' in d) walk(d.value, path + '.' + String(k), depth + 1)
      }
      walk(Object.getPrototypeOf(v), path + '.__proto__', depth + 1)
    }
    walk(Function('return this')(), 'global', 0)
    return odd
  }`), nil))
	if !reflect.DeepEqual(got, []any{}) {
		t.Fatalf("unexpected objects: %#v", got)
	}
}

// A sourceMappingURL comment never makes the parser read a file, not in
// guest eval, new Function, or the program itself.
func TestSourceMapsNeverRead(t *testing.T) {
	dir := t.TempDir()
	mapFile := filepath.Join(dir, "leak.map")
	if err := os.WriteFile(mapFile, []byte(`{"version":3,"sources":["CONTENT-READ-FROM-HOST-DISK.ts"],"mappings":"AAAA"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "file://" + mapFile
	code := "async () => {\n  const out = []\n" +
		"  try { eval('(() => { throw new Error(\"e\") })()\\n//# sourceMappingURL=" + url + "') } catch (e) { out.push(String(e.stack)) }\n" +
		"  try { new Function('throw new Error(\"f\")\\n//# sourceMappingURL=" + url + "')() } catch (e) { out.push(String(e.stack)) }\n" +
		"  try { throw new Error('g') } catch (e) { out.push(String(e.stack)) }\n" +
		"  return out.join('\\n')\n}\n//# sourceMappingURL=" + url
	got := result(t, runJob(t, job(code), nil)).(string)
	if strings.Contains(got, "CONTENT-READ-FROM-HOST-DISK") {
		t.Fatalf("a source map was read: %s", got)
	}
}

func TestSourceBounds(t *testing.T) {
	deep := "async () => " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)
	r := runJob(t, job(deep), nil)
	wantError(t, r, protocol.NewSourceNestingError("program", MaxNesting, 1).Error())
	big := "async () => '" + strings.Repeat("x", MaxSourceBytes) + "'"
	r = runJob(t, job(big), nil)
	wantError(t, r, protocol.NewSourceTooLargeError("program", len(big), MaxSourceBytes).Error())
	// A module nested too deep is refused the same way.
	j := job("import x from 'deep'\nasync () => x")
	j.Modules = protocol.ModuleMap{"deep": {Source: "export default " + strings.Repeat("[", 2000) + strings.Repeat("]", 2000)}}
	r = runJob(t, j, nil)
	wantError(t, r, protocol.NewSourceNestingError(`module "deep"`, MaxNesting, 1).Error())
}

func TestMaxNestingScanner(t *testing.T) {
	cases := []struct {
		src   string
		limit int
		line  int
	}{
		{"((()))", 3, 0},
		{"((()))", 2, 1},
		{"'((((((('", 2, 0},
		{"\"((((\" + `((( ${ '(' } (((` + /(((/.source", 2, 0},
		{"// ((((((\n/* (((((( */ (a)", 2, 0},
		{"a\n(b\n[c\n{d", 2, 4},
		{"`${`${`${1}`}`}`", 2, 1},
		{"x = a / (b) / (c)", 2, 0},
		{"if (a) /[)]/.test(b); ((((", 3, 1},
		{"(\")\"(\")\"(\")\"(", 3, 1},
	}
	for _, c := range cases {
		if got := maxNestingExceeded(c.src, c.limit); got != c.line {
			t.Errorf("maxNestingExceeded(%q, %d) = %d, want %d", c.src, c.limit, got, c.line)
		}
	}
}

func FuzzMaxNesting(f *testing.F) {
	for _, s := range []string{"((()))", "`${`${1}`}`", "/(/ + '(' + \"(\"", "if (a) /[)]/.test(b)", "a /* ( */ // (\n(", "{[(", "\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		line := maxNestingExceeded(src, 4)
		if line < 0 || line > strings.Count(src, "\n")+1 {
			t.Fatalf("line %d out of range", line)
		}
		// Whatever the scanner says, a source with fewer openers than the
		// bound can never exceed it.
		if strings.Count(src, "(")+strings.Count(src, "[")+strings.Count(src, "{") <= 4 && line != 0 {
			t.Fatalf("exceeded with at most 4 openers")
		}
	})
}

// Untrusted programs never panic Run, whatever they are.
func FuzzRun(f *testing.F) {
	for _, s := range []string{
		"async () => 1", "import a from 'a'\nasync () => a", "import { greet } from 'greeter'; async () => greet('ada')",
		"async () => store.x()", "(", "import", "async () => { throw null }", "async () => import('x')",
		"async () => __parseForDispatch('{\"__proto__\":1}')", "`${", "/*", "async () => console.log({}, [], new Map())",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, code string) {
		j := job(code)
		j.TimeoutMs = 100
		j.Modules = greeter
		j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
		r, err := Run(t.Context(), j, nil)
		if err != nil {
			t.Fatalf("the sandbox broke for %q: %v", code, err)
		}
		if r == nil || r.Logs == nil {
			t.Fatal("no envelope")
		}
	})
}

func TestCompileCacheStaysInsideItsBudget(t *testing.T) {
	c := newWeightedCache(10000)
	for i := range 100 {
		c.Add(cacheKey(strconv.Itoa(i)), &compiled{}, 1000)
		if c.used > c.budget {
			t.Fatalf("used %d past budget %d", c.used, c.budget)
		}
	}
	if _, ok := c.Get(cacheKey("99")); !ok {
		t.Fatal("the newest entry is gone")
	}
	if _, ok := c.Get(cacheKey("0")); ok {
		t.Fatal("the oldest entry survived")
	}
	c.Add(cacheKey("huge"), &compiled{}, 5000)
	if _, ok := c.Get(cacheKey("huge")); ok {
		t.Fatal("an entry heavier than a quarter of the budget was kept")
	}
}
