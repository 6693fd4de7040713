package local

import "testing"

// A template of many substitutions in source compiled at run time (by
// Function, the async function constructor, or an eval, direct or not) asked
// goja for 24 times a 64 MB string in one allocation, and the worker died
// at its address-space limit with all eleven runs beside it. Split as the
// program's own templates are, it ends only its run, with the memory text.
func TestHugeTemplatesCompiledAtRunTimeEndOnlyTheirRun(t *testing.T) {
	body := "'return `' + '${s}'.repeat(24) + '`'"
	for name, bomb := range map[string]string{
		"Function":           "async () => Function('s', " + body + ")('x'.repeat(64 << 20)).length",
		"new Function":       "async () => new Function('s', " + body + ")('x'.repeat(64 << 20)).length",
		"AsyncFunction":      "async () => (await (async function () {}).constructor('s', " + body + ")('x'.repeat(64 << 20))).length",
		"indirect eval":      "async () => { globalThis.s = 'x'.repeat(64 << 20); return (0, eval)('`' + '${s}'.repeat(24) + '`').length }",
		"direct eval":        "async () => { const s = 'x'.repeat(64 << 20); return eval('`' + '${s}'.repeat(24) + '`').length }",
		"nested direct eval": "async () => { const s = 'x'.repeat(64 << 20); return eval(\"eval('`' + '${s}'.repeat(24) + '`')\").length }",
		"a nested function":  "async () => Function('s', 'const f = () => `' + '${s}'.repeat(24) + '`; return f()')('x'.repeat(64 << 20)).length",
	} {
		t.Run(name, func(t *testing.T) { bombBesideSiblings(t, bomb) })
	}
}
