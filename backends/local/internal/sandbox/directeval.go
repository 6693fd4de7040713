package sandbox

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/unistring"
)

// A direct eval (eval(src) where eval is the global one) is compiled by
// goja itself, from text the program builds as it runs, so neither the
// template splitting of the program's own source (splitTemplates) nor the
// guard of indirect eval (installCompilers) reaches it: eval('`' +
// '${s}'.repeat(1000) + '`') over a 2 MB string asked for 2 GB in one
// allocation and the address-space limit killed the worker with all its
// runs. goja decides that a call is a direct eval by its callee alone, so
// the sandbox leaves the call as it is and routes its argument through a
// hook: eval(x) is compiled as eval(""["codemode:evalSource"](x)). The hook
// returns a string's source with its templates split (and its own direct
// evals routed the same way), and anything else untouched, which is what
// direct eval returns for a value that is not a string. The call stays
// direct, so the evaluated code sees the caller's scope as before.
//
// The hook is a property of String.prototype that no program can replace
// or delete (neither writable nor configurable), reached through a string
// literal, which no binding can shadow. A program may call it; it only
// rewrites source. What changes is visible in one place only: the text of
// functions defined in evaluated source that had something to split
// (Function.prototype.toString) shows the split.
const directEvalHook = "codemode:evalSource"

// directEvalArgument is the argument to route through the hook when e is
// a call of eval by that name with a first argument that is not spread,
// else nil.
func directEvalArgument(e ast.Expression) ast.Expression {
	c, ok := e.(*ast.CallExpression)
	if !ok || len(c.ArgumentList) == 0 {
		return nil
	}
	if id, ok := c.Callee.(*ast.Identifier); !ok || id.Name != "eval" {
		return nil
	}
	if _, spread := c.ArgumentList[0].(*ast.SpreadElement); spread {
		return nil
	}
	return c.ArgumentList[0]
}

// routeDirectEvals routes the argument of every direct eval in prg
// through the hook, in place.
func routeDirectEvals(prg *ast.Program, src string) {
	if !strings.Contains(src, "eval") {
		return
	}
	walkExpressions(reflect.ValueOf(prg), func(e ast.Expression) ast.Expression {
		if arg := directEvalArgument(e); arg != nil {
			e.(*ast.CallExpression).ArgumentList[0] = hookCall(arg)
		}
		return e
	})
}

// hookCall is ""["codemode:evalSource"](arg), placed where arg is (for
// the positions of errors).
func hookCall(arg ast.Expression) ast.Expression {
	at, end := arg.Idx0(), arg.Idx1()
	return &ast.CallExpression{
		Callee: &ast.BracketExpression{
			Left:         &ast.StringLiteral{Idx: at, Literal: `""`, Value: ""},
			Member:       &ast.StringLiteral{Idx: at, Literal: strconv.Quote(directEvalHook), Value: unistring.String(directEvalHook)},
			LeftBracket:  at,
			RightBracket: at,
		},
		LeftParenthesis:  at,
		ArgumentList:     []ast.Expression{arg},
		RightParenthesis: end,
	}
}

// directEvalInsertions are the insertions that route arg (in src, whose
// positions start at base) through the hook; ok is false when its
// positions are not inside src.
func directEvalInsertions(arg ast.Expression, src string, base int) ([]insertion, bool) {
	start, end := int(arg.Idx0())-base, int(arg.Idx1())-base
	if start < 0 || end > len(src) || start >= end {
		return nil, false
	}
	return []insertion{
		{at: start, rank: 0, text: `""[` + strconv.Quote(directEvalHook) + `](`},
		{at: end, rank: 2, text: ")"},
	}, true
}

// installDirectEvalHook defines the hook on String.prototype. As contained
// does for a guard, a Go runtime error while it rewrites ends the run, not
// the process.
func (g *guards) installDirectEvalHook() error {
	return defineDirectEvalHook(g.vm, func(text string) (out string, ok bool) {
		defer g.endRunOnBug(func() { out, ok = text, false })
		return splitTemplateSource(text)
	})
}

// defineDirectEvalHook makes String.prototype's property the compiled
// programs call, neither writable nor configurable: it returns a string's
// source as rewrite rewrote it (when ok), and anything else as given.
func defineDirectEvalHook(vm *goja.Runtime, rewrite func(string) (string, bool)) error {
	proto, ok := vm.GlobalObject().Get("String").(*goja.Object).Get("prototype").(*goja.Object)
	if !ok {
		return errNotBuiltin("String.prototype")
	}
	hook := func(call goja.FunctionCall) goja.Value {
		arg := call.Argument(0)
		if src, ok := arg.(goja.String); ok {
			if text, ok := sourceText(src); ok {
				if out, ok := rewrite(text); ok {
					return vm.ToValue(out)
				}
			}
		}
		return arg
	}
	return proto.DefineDataProperty(directEvalHook, vm.ToValue(hook), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
}

// parses reports whether src parses as a script.
func parses(src string) bool {
	_, err := parseSource("", src)
	return err == nil
}
