package sandbox

import "testing"

// A direct eval keeps goja's results with its argument routed through the
// hook: it sees and assigns the caller's scope, nests, returns a value
// that is not a string as it is (a String object too), leaves spread and
// empty calls alone, and reports the syntax errors of its source as goja
// does.
func TestDirectEvalKeepsGojasResults(t *testing.T) {
	sameAsGoja(t, []string{
		"(() => { const a = 1; return eval('eval(\"a + 1\")') })()",
		"(() => { let x = 'x'; eval('x = `${x}${x}${x}-${x}`'); return x })()",
		"(() => { const q = 'q'; return eval('(() => eval(`q + q`))()') })()",
		"(() => { const o = new String('1 + 1'); return eval(o) === o })()",
		"eval(5)",
		"eval()",
		"eval('1', 2)",
		"(() => { const args = ['7 * 6']; return eval(...args) })()",
		"(() => { try { eval('`${1}${2}${3}') } catch (e) { return e.name + ': ' + e.message } })()",
		"(function () { 'use strict'; return eval('var z = 3; z') + typeof z })()",
		"(() => { const s = 'ab'; return eval('`' + '${s}'.repeat(9) + '`') })()",
		"(() => { const s = 'ab'; return eval(`eval('` + '`' + '${s}'.repeat(5) + '`' + `')`) })()",
		"(() => { const f = eval('(function g(s) { return s + 1 })'); return f(1) + f.name })()",
		"typeof ''['codemode:evalSource']",
	})
}

// Neither a program nor the source it evaluates can replace the hook:
// assigning, deleting and redefining it fail, and a direct eval after the
// attempts still splits its templates (the text of a function it defines
// shows the split).
func TestDirectEvalHookCannotBeReplaced(t *testing.T) {
	got := evalIn(t, prepareSession(false), `(() => {
  'use strict'
  const key = 'codemode:evalSource'
  const tries = []
  try { String.prototype[key] = (src) => src; tries.push('assigned') } catch (e) { tries.push(e.name) }
  try { delete String.prototype[key]; tries.push('deleted') } catch (e) { tries.push(e.name) }
  try { Object.defineProperty(String.prototype, key, { value: (src) => src }); tries.push('redefined') } catch (e) { tries.push(e.name) }
  const shadow = eval('(function f(s) { return `+"`${s}${s}${s}`"+` })').toString()
  return tries.join(',') + ' ' + shadow
})()`)
	want := evalIn(t, prepareSession(false), "'TypeError,TypeError,TypeError function f(s) { return (`${s}${s}`+`${s}`) }'")
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
