package sandbox

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/supolka/codemode-gateway/protocol"
)

// entryFile is the name the generated entry module carries in syntax errors
// and stack frames.
const entryFile = "executor.js"

// entryModule is the generated entry module of one run, in two spellings
// with the same lines: esm is the ES module esbuild reads; direct is the same
// module as a goja wrapper function, usable when it has no import lines.
type entryModule struct {
	esm        string
	direct     string
	hasImports bool
}

// liftImports splits code into its leading import block and the arrow body.
// The lift works a line at a time and takes an import line whole, trailing
// code included. Blank lines and // comment lines between imports go with
// them. An import whose named list opens on one line and closes on a later
// one takes the lines up to the close.
func liftImports(code string) (imports, body string) {
	lines := strings.SplitAfter(code, "\n")
	lifted := 0 // lines taken so far
	lastImport := -1
	for lifted < len(lines) {
		t := strings.TrimSpace(lines[lifted])
		switch {
		case t == "" || strings.HasPrefix(t, "//"):
			lifted++
			continue
		case isImportLine(t):
			lifted++
			// A named-import list left open on its line ("import {") takes
			// the lines up to the one that closes it.
			if openImportList.MatchString(t) {
				for lifted < len(lines) && !strings.Contains(lines[lifted], "}") {
					lifted++
				}
				if lifted < len(lines) {
					lifted++
				}
			}
			lastImport = lifted
			continue
		}
		break
	}
	if lastImport < 0 {
		return "", code
	}
	return strings.Join(lines[:lastImport], ""), strings.Join(lines[lastImport:], "")
}

var openImportList = regexp.MustCompile(`^import\s*(?:[\w$]+\s*,\s*)?(?:type\s+)?\{[^}]*$`)

// isImportLine reports whether a trimmed line opens a static import
// declaration (not import() or import.meta).
func isImportLine(t string) bool {
	if !strings.HasPrefix(t, "import") || len(t) == len("import") {
		return false
	}
	switch t[len("import")] {
	case ' ', '\t', '{', '*', '"', '\'':
		return true
	}
	return false
}

// buildEntry generates the entry module: the lifted imports, one
// declaration per provider (its generated proxy or its proxySource), the
// preludes, then the body wrapped as the default export and invoked by the
// bootstrap. The body is wrapped, never rewritten: code outside the form
// reports its own syntax error, located in this module.
func buildEntry(code string, providers []protocol.ProviderDescriptor) entryModule {
	imports, body := liftImports(code)
	var pre strings.Builder
	for _, p := range providers {
		switch {
		case p.ProxySource == "":
			pre.WriteString("const " + p.Name + " = " + generatedProxy(p) + ";\n")
		case isExpression(p.ProxySource):
			pre.WriteString("const " + p.Name + " = (\n" + p.ProxySource + "\n);\n")
		default:
			// Statements that declare the provider's name themselves.
			pre.WriteString(p.ProxySource + "\n;\n")
		}
	}
	for _, p := range providers {
		if p.Prelude != "" {
			pre.WriteString(p.Prelude)
			pre.WriteString("\n;\n")
		}
	}
	if imports != "" && !strings.HasSuffix(imports, "\n") {
		imports += "\n"
	}
	// The doubled parentheses make an empty body the syntax error V8 reports
	// for it (a bare "()" is not an expression), where a single pair would
	// read as the start of an arrow's parameter list.
	esm := imports + pre.String() + "export default ((\n" + body + "\n)\n);\n"
	direct := "(function (" + directParams + ") {" + pre.String() +
		"__module.exports = { default: ((\n" + body + "\n)\n) };\n})"
	return entryModule{esm: esm, direct: direct, hasImports: imports != ""}
}

// isExpression reports whether src parses as one expression, which is how
// a proxySource usually comes: the value that replaces the generated proxy.
// Anything else is taken as statements that declare the provider's name.
func isExpression(src string) bool {
	prg, err := parseSource("", "(\n"+src+"\n)")
	if err != nil || len(prg.Body) != 1 {
		return false
	}
	_, ok := prg.Body[0].(*ast.ExpressionStatement)
	return ok
}

// generatedProxy is the proxy of one provider, on one line. Every string
// property but then and toJSON is a tool: reading it gives an async
// function that packs its arguments by the dispatch grammar, sends them
// through __dispatch and unwraps the envelope: {"error": text} throws an
// Error with that text, any other object gives its result member ({} is
// {"result": undefined} as JSON writes it), and anything that is not an
// object throws the outside-envelope text. Own properties (a prelude's
// additions) win over the dispatch path. then, toJSON and symbols answer
// undefined, so the proxy can be returned, awaited, logged and serialized.
func generatedProxy(p protocol.ProviderDescriptor) string {
	name := strconv.Quote(p.Name)
	outside := strconv.Quote(protocol.OutsideEnvelopeText)
	var pack string
	if p.PositionalArgs {
		pack = "a.length === 0 ? '' : __stringifyForDispatch(a)"
	} else {
		// One argument. An array argument travels inside a one-element list,
		// since a bare array would read as an argument list.
		pack = "a.length === 0 || a[0] === undefined ? '' : __stringifyForDispatch(Array.isArray(a[0]) ? [a[0]] : a[0])"
	}
	return "new Proxy({}, { get(t, k) { " +
		"if (Object.prototype.hasOwnProperty.call(t, k)) return t[k]; " +
		"if (typeof k !== 'string' || k === 'then' || k === 'toJSON') return undefined; " +
		"return async (...a) => { " +
		"const x = await __dispatch(" + name + ", k, " + pack + "); " +
		"let e; try { e = __parseForDispatch(x); } catch { throw new Error(" + outside + "); } " +
		"if (e === null || typeof e !== 'object' || Array.isArray(e)) throw new Error(" + outside + "); " +
		"if (Object.prototype.hasOwnProperty.call(e, 'error')) throw new Error(typeof e.error === 'string' ? e.error : " + outside + "); " +
		"return e.result; }; } })"
}
