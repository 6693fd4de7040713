package sandbox

import (
	"testing"
)

// The source of a template's split, written out, is the expression the
// compile-time split builds: its parts joined by + in the same balanced
// tree, in parentheses; nested, escaped, tagged and small templates as the
// split leaves them.
func TestSplitTemplateSource(t *testing.T) {
	for src, want := range map[string]string{
		"`a${x}b${y}c${z}d`":             "(`a${x}b${y}c`+`${z}d`)",
		"`${a}${b}${c}${d}${e}${f}${g}`": "((`${a}${b}`+`${c}${d}`)+(`${e}${f}`+`${g}`))",
		"`${a}${b}${c}`.length":          "(`${a}${b}`+`${c}`).length",
		"`\\${a}${b}\\`${c}${d}`":        "(`\\${a}${b}\\`${c}`+`${d}`)",
		"`p${`${a}${b}${c}`}q${d}${e}`":  "(`p${(`${a}${b}`+`${c}`)}q${d}`+`${e}`)",
		"tag`${a}${b}${c}`":              "",
		"`${a}${b}` + `${c}`":            "",
		"`${a}${b}${c}":                  "", // does not parse: goja reports it
		"const q = 1 // ${a}${b}${c}":    "",
	} {
		got, ok := splitTemplateSource(src)
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("%s\n got: %s\nwant: %s", src, got, want)
		}
	}
}

// Function, its async and generator kin (reached through a function's
// constructor, as no global names them), a subclass of Function and
// indirect eval give goja's own results with the split: the values, the
// order in which arguments and values are converted, the errors, the
// text of the function made, and a direct eval still sees the scope it is
// written in.
func TestRuntimeCompiledTemplatesKeepGojasResults(t *testing.T) {
	const big = "'${s}'.repeat(5)"
	sameAsGoja(t, []string{
		"Function('s', 'return `' + " + big + " + '`')('ab')",
		"new Function('s', 'return `<' + " + big + " + '>`')('é')",
		"Function('s', 't', 'return `' + " + big + " + '${t}`')('a', 'b')",
		"Function('s, t = `${s}${s}${s}`', 'return t + `${t}${t}${t}`')('q')",
		"(function () {}).constructor('s', 'return `${s}${s}${s}`')('z').length",
		"Function('return `${1}${2}${3}`').toString()",
		"Function('a', 'b', 'return `${a}${b}${a}${b}`').length",
		"Function({ toString() { log.push('p'); return 's' } }, { toString() { log.push('b'); return 'return `${s}${s}${s}`' } })('w')",
		"Function('return `${1}${2}${3}')",
		"Function('return `${1}${2}${3}`}, function () {')",
		"Function(Symbol(), 'return 1')",
		"(async function () {}).constructor('s', 'return `${s}${s}${s}${s}`')('x').then(v => log.push(v))",
		"[...(function* () {}).constructor('s', 'yield `${s}${s}${s}`; yield 2')('y')]",
		"Object.getPrototypeOf(function* () {}).constructor.name + (function* () {}).constructor('return 1').toString()",
		"(() => { class F extends Function {} const f = new F('s', 'return `${s}${s}${s}`'); return [f instanceof F, f('k')] })()",
		"(0, eval)('`${1}${2}${3}${4}`')",
		"globalThis.eval('var ev1 = 1; `${ev1}${ev1}${ev1}`') + typeof ev1",
		"(0, eval)('let ev2 = 2; `${ev2}${ev2}${ev2}`') + typeof ev2",
		"(0, eval)('`${1}${2}${3}')",
		"(0, eval)(5)",
		"(() => { const q = 'in'; return eval('`${q}${q}${q}`') })()",
		"(() => { const q = 'in'; return eval('(0, eval)(`typeof q`)') })()",
		"eval === globalThis.eval && Function === (function () {}).constructor",
	})
}

// What the split changes, and the only thing: the text of a function
// declared inside source compiled at run time is the source as split.
func TestRuntimeCompiledFunctionsShowTheSplitText(t *testing.T) {
	got := evalIn(t, prepareSession(false), "(0, eval)('(function f(s) { return `${s}${s}${s}` })').toString()")
	if want := evalIn(t, prepareSession(true), "'function f(s) { return (`${s}${s}`+`${s}`) }'"); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
