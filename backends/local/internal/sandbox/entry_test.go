package sandbox

import (
	"reflect"
	"regexp"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

var greeter = protocol.ModuleMap{"greeter": {Source: "export const greet = (name) => 'hello ' + name"}}

// The three examples of the contract's Entry chapter.
func TestEntryContractExamples(t *testing.T) {
	j := job("import { greet } from 'greeter'\nasync () => greet('ada')")
	j.Modules = greeter
	r := runJob(t, j, nil)
	if got := result(t, r); got != "hello ada" {
		t.Fatalf("first example = %#v", got)
	}
	if r.Logs == nil || len(r.Logs) != 0 {
		t.Fatalf("logs = %#v, want []", r.Logs)
	}

	j = job("import { greet } from 'greeter'; const size = 3\nasync () => greet('ada').repeat(size).length")
	j.Modules = greeter
	if got := result(t, runJob(t, j, nil)); got != 27.0 {
		t.Fatalf("second example = %#v", got)
	}

	j = job("import { greet } from 'greeter'; async () => greet('ada')")
	j.Modules = greeter
	r = runJob(t, j, nil)
	if !r.HasError || r.ResultJSON != "" {
		t.Fatalf("third example = %+v, want a syntax error", r)
	}
	if !regexp.MustCompile(`^Unexpected token '\)' \[executor\.js:\d+:1\]$`).MatchString(r.Error) {
		t.Fatalf("third example error = %q, want Unexpected token ')' [executor.js:LINE:1]", r.Error)
	}
}

func TestEntrySyntaxErrorInsideEnvelope(t *testing.T) {
	for _, code := range []string{
		"async () => greet('ada'))",
		"async () => { await 1 ",
		"async () => {\n  const x = 1\n  return x +\n}",
		"",
	} {
		r := runJob(t, job(code), nil)
		if !r.HasError || !regexp.MustCompile(`\[executor\.js:\d+:\d+\]$`).MatchString(r.Error) {
			t.Errorf("%q: error = %q, want a syntax error located in executor.js", code, r.Error)
		}
	}
}

func TestEntryForms(t *testing.T) {
	cases := []struct {
		code string
		want any
	}{
		{"async () => 1", 1.0},
		{"() => 'sync'", "sync"},
		{"async () => { return { a: [1, 'x', null, true] } }", map[string]any{"a": []any{1.0, "x", nil, true}}},
		{"async () => undefined", nil},
		{"async () => () => 1", nil},
		// lowered by esbuild: for await and async generators
		{"async () => { async function* g() { yield 1; yield 2 } let s = 0; for await (const x of g()) s += x; return s }", 3.0},
		// comments and blank lines before the arrow
		{"// a program\n\nasync () => 'ok'", "ok"},
		{"async () => 'x' // trailing comment", "x"},
	}
	for _, c := range cases {
		r := runJob(t, job(c.code), nil)
		if got := result(t, r); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q = %#v, want %#v", c.code, got, c.want)
		}
	}
}

func TestResultNullAndUndefined(t *testing.T) {
	if r := runJob(t, job("async () => null"), nil); r.HasError || r.ResultJSON != "null" {
		t.Fatalf("null: %+v", r)
	}
	if r := runJob(t, job("async () => {}"), nil); r.HasError || r.ResultJSON != "" {
		t.Fatalf("undefined: %+v", r)
	}
}

func TestEntryThrows(t *testing.T) {
	cases := []struct{ code, want string }{
		{"async () => { throw new Error('boom') }", "boom"},
		{"async () => { throw 'plain' }", "plain"},
		{"() => { throw new TypeError('sync') }", "sync"},
		{"async () => null.name", "Cannot read property 'name' of undefined"}, // goja's wording
		{"42", "The program is 42, not a function. Write it as an arrow, for example async () => { … }."},
		{"async () => { const a = {}; a.self = a; return a }", ""},
		{"async () => 1n", ""},
	}
	for _, c := range cases {
		r := runJob(t, job(c.code), nil)
		if !r.HasError || r.ResultJSON != "" {
			t.Errorf("%q: %+v, want an error", c.code, r)
			continue
		}
		if c.want != "" && r.Error != c.want {
			t.Errorf("%q: error = %q, want %q", c.code, r.Error, c.want)
		}
	}
}

func TestLiftImports(t *testing.T) {
	cases := []struct{ code, imports, body string }{
		{"async () => 1", "", "async () => 1"},
		{"import a from 'a'\nasync () => a", "import a from 'a'\n", "async () => a"},
		{"import a from 'a'; const b = 2\n\nasync () => a", "import a from 'a'; const b = 2\n", "\nasync () => a"},
		{"import {\n  a,\n  b\n} from 'x'\nasync () => a", "import {\n  a,\n  b\n} from 'x'\n", "async () => a"},
		{"import('x')", "", "import('x')"},
		{"// c\nimport * as n from 'n'\nasync () => n", "// c\nimport * as n from 'n'\n", "async () => n"},
		{"importantThing\n", "", "importantThing\n"},
		{"import d, {\n  a\n} from 'x'\nasync () => a", "import d, {\n  a\n} from 'x'\n", "async () => a"},
		{"import x from 'x' // {\nasync () => x", "import x from 'x' // {\n", "async () => x"},
		{"import x from 'x'; const o = {\n a: 1 }\nasync () => o", "import x from 'x'; const o = {\n", " a: 1 }\nasync () => o"},
	}
	for _, c := range cases {
		imports, body := liftImports(c.code)
		if imports != c.imports || body != c.body {
			t.Errorf("liftImports(%q) = %q, %q; want %q, %q", c.code, imports, body, c.imports, c.body)
		}
	}
}

func TestIsExpression(t *testing.T) {
	for src, want := range map[string]bool{
		"{ a: 1 }":                       true,
		"new Proxy({}, {})":              true,
		"const x = 1":                    false,
		"a); evil(":                      false,
		"(() => 1)()":                    true,
		"x\n// trailing comment":         true,
		"function f() {}\nconst x = f()": false,
	} {
		if got := isExpression(src); got != want {
			t.Errorf("isExpression(%q) = %v, want %v", src, got, want)
		}
	}
}
