package sandbox

import (
	"reflect"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/dop251/goja"
)

// Code compiled at run time. goja compiles the source given to Function,
// to the async and generator function constructors and to an indirect
// eval itself, where the template split of compile time (templates.go)
// does not reach: `Function('s', 'return `' + '${s}'.repeat(24) + '`')`
// would still ask for 24 times a string the run holds in one allocation.
// So these built-ins split the templates of the source text they are
// given (splitTemplateSource) and hand goja the result. They are changed
// in place (swapNative, swapConstruct), so their identity stays: a direct
// eval, which goja recognises by the callee being its own eval, stays
// direct. A direct eval does not call eval's Go function at all: goja's VM
// compiles its source itself, so its templates are not split (see
// docs/local-executor.md).

// construct is a goja native constructor's Go function: args and
// new.target.
type constructFunc = func(args []goja.Value, newTarget *goja.Object) *goja.Object

var constructType = reflect.TypeOf((constructFunc)(nil))

// constructField is the index of the constructor function in goja's
// native function object, or nil when its layout is not the one known.
var constructField = func() []int {
	if !nativeLayout.ok {
		return nil
	}
	f, ok := nativeLayout.typ.Elem().FieldByName("construct")
	if !ok || f.Type != constructType {
		return nil
	}
	return f.Index
}()

// swapConstruct makes wrap(the original) the constructor function of the
// native function object o, and reports whether it could.
func swapConstruct(o *goja.Object, wrap func(constructFunc) constructFunc) bool {
	if constructField == nil {
		return false
	}
	impl := reflect.ValueOf(o).Elem().FieldByIndex(nativeLayout.self)
	if impl.IsNil() || impl.Elem().Type() != nativeLayout.typ {
		return false
	}
	field := impl.Elem().Elem().FieldByIndex(constructField)
	if field.IsNil() {
		return false
	}
	f := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
	f.Set(reflect.ValueOf(wrap(f.Interface().(constructFunc))))
	return true
}

// installCompilers makes Function, its async and generator kin and
// indirect eval split the templates of the source they compile. Where
// goja's layout is not the one known it leaves them alone: a new eval
// would turn every direct eval into an indirect one.
func (g *guards) installCompilers() error {
	if constructField == nil {
		return nil
	}
	if err := g.method(g.vm.GlobalObject(), "eval", g.indirectEval); err != nil {
		return err
	}
	for head, ctor := range map[string]goja.Value{
		"(function anonymous(":       g.global("Function"),
		"(async function anonymous(": g.kinCtors[0],
		"(function* anonymous(":      g.kinCtors[1],
	} {
		if err := g.splitCompiler(ctor, head); err != nil {
			return err
		}
	}
	return nil
}

// indirectEval guards eval when called as a function (an indirect eval).
func (g *guards) indirectEval(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		if src, ok := call.Argument(0).(goja.String); ok && len(call.Arguments) > 0 {
			if text, ok := sourceText(src); ok {
				if split, ok := splitTemplateSource(text); ok {
					return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{g.vm.ToValue(split)}})
				}
			}
		}
		return orig(call)
	}
}

// sourceText is src as Go text, when it converts without loss (a lone
// surrogate does not: such source is left to goja as it is).
func sourceText(src goja.String) (string, bool) {
	text := src.String()
	return text, !strings.ContainsRune(text, utf8.RuneError)
}

// splitCompiler makes ctor, a function constructor whose source starts
// with head, split the templates of the source it compiles, called or
// constructed.
func (g *guards) splitCompiler(ctor goja.Value, head string) error {
	o, ok := ctor.(*goja.Object)
	if !ok {
		return errNotBuiltin(head)
	}
	call, ok := o.Export().(nativeFunc)
	if !ok || !swapNative(o, g.contained(func(c goja.FunctionCall) goja.Value {
		args, text := g.splitFunctionArgs(head, c.Arguments)
		return g.compiled(call(goja.FunctionCall{This: c.This, Arguments: args}), text)
	})) {
		return errNotBuiltin(head)
	}
	if !swapConstruct(o, func(construct constructFunc) constructFunc {
		return func(args []goja.Value, newTarget *goja.Object) (out *goja.Object) {
			// As contained does for calls.
			defer g.endRunOnBug(func() { out = g.vm.NewObject() })
			args, text := g.splitFunctionArgs(head, args)
			o := construct(args, newTarget)
			g.compiled(o, text)
			return o
		}
	}) {
		return errNotBuiltin(head)
	}
	return nil
}

// splitFunctionArgs is the arguments of a function constructor with the
// templates of the function they make split: the parameters joined as one
// (goja joins them with commas), then the body. text is the source goja's
// Function.prototype.toString gives for the function the arguments as
// given make ("": nothing split, args are returned converted).
func (g *guards) splitFunctionArgs(head string, args []goja.Value) ([]goja.Value, string) {
	if len(args) == 0 {
		return args, ""
	}
	// ToString of each, in goja's order: the parameters, then the body.
	strs := make([]goja.Value, len(args))
	texts := make([]string, len(args))
	lossless := true
	for i, a := range args {
		s := g.toStr(a)
		strs[i] = s
		var ok bool
		texts[i], ok = sourceText(s)
		lossless = lossless && ok
	}
	if !lossless {
		return strs, ""
	}
	params, body := strings.Join(texts[:len(texts)-1], ","), texts[len(texts)-1]
	const glue, tail = "\n) {\n", "\n})"
	src := head + params + glue + body + tail
	ins := templateSplits(src)
	if len(ins) == 0 || !parses(insert(src, ins)) {
		return strs, ""
	}
	paramsAt, bodyAt := len(head), len(head)+len(params)+len(glue)
	var inParams, inBody []insertion
	for _, in := range ins {
		switch {
		case in.at >= paramsAt && in.at <= paramsAt+len(params):
			inParams = append(inParams, insertion{at: in.at - paramsAt, text: in.text})
		case in.at >= bodyAt && in.at <= bodyAt+len(body):
			inBody = append(inBody, insertion{at: in.at - bodyAt, text: in.text})
		default:
			return strs, "" // a template in goja's own text: no such source parses
		}
	}
	out := []goja.Value{g.vm.ToValue(insert(body, inBody))}
	if len(args) > 1 {
		out = []goja.Value{g.vm.ToValue(insert(params, inParams)), out[0]}
	}
	// goja's text of the function is its expression, inside the parentheses.
	return out, src[1 : len(src)-1]
}

// compiled records text as what Function.prototype.toString gives for fn,
// a function a constructor made from split source.
func (g *guards) compiled(fn goja.Value, text string) goja.Value {
	if o, ok := fn.(*goja.Object); ok && text != "" {
		if g.compiledText == nil {
			g.compiledText = map[*goja.Object]string{}
		}
		g.compiledText[o] = text
	}
	return fn
}
