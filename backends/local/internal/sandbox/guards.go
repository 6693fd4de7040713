package sandbox

import (
	"reflect"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dop251/goja"
)

// MemoryBudget is implemented by a Host that bounds the run's memory
// (the worker process's meter). A built-in about to allocate a large
// result in one call asks it first.
type MemoryBudget interface {
	// Reserve is asked before the run allocates n bytes in one step.
	// It reports false when the run would pass its memory limit with
	// them; the host has then ended the run with the memory text
	// (as its context's cause), and the built-in must return without
	// allocating. A true answer counts the n bytes as the run's.
	Reserve(n int64) bool
}

// The guards' bounds. goja checks its interrupt only between instructions,
// so a built-in that loops or allocates in one Go call runs past the run's
// bound and its memory limit; the guards put a Go wrapper in front of such
// built-ins (guards_*.go), installed once per prepared runtime.
const (
	// guardLoop is the element count from which a guarded built-in leaves
	// goja's native loop for an interruptible one, which looks at the
	// run's interrupt every guardStride elements. Measured on 2 vCPUs, the
	// slowest of goja's loops that take it (join, indexOf and includes,
	// every/some/forEach/map/filter/reduce, find, slice, splice, concat,
	// flat, sort, reverse, copyWithin over holes or an array-like) spend
	// 60 to 130 ns an element, so a native call below it ends within
	// about 17 ms of the interrupt; above it, a bomb of any length ends
	// within a stride.
	guardLoop = 1 << 17
	// guardSlowLoop is guardLoop for the built-ins whose native loop costs
	// about 1 to 2 µs an element over holes or an array-like (fill, with,
	// toReversed, toSpliced, Array.from, a list of arguments built from an
	// array-like): 2^15 elements take at most about 60 ms.
	guardSlowLoop = 1 << 15
	// guardStride is how many elements an interruptible loop handles
	// between two looks at the interrupt.
	guardStride = 1 << 10
	// reserveFloor is the smallest allocation a guard asks the budget
	// for: below it a call costs nothing.
	reserveFloor = 1 << 20
	// valueBytes is what one element of a goja array or argument list
	// takes (an interface value).
	valueBytes = 16
)

// guardsOff leaves the built-ins as goja made them, for tests that
// measure or compare against the unguarded runtime.
var guardsOff atomic.Bool

// guardsShift shifts every threshold of the guards right by its value in
// the runtimes prepared from then on: tests run the guards' own paths over
// small inputs with it. It is zero but in tests.
var guardsShift uint

// interruptMemory ends a run whose built-in was about to allocate more
// than the job's memory limit in one step, when its host keeps no budget.
type interruptMemory struct{}

// guards holds what the wrappers of one runtime share: the originals they
// call and the intrinsics they compare against, captured before any
// program runs.
type guards struct {
	s  *session
	vm *goja.Runtime

	// noop is a JavaScript function: calling it raises the runtime's
	// pending interrupt as goja's own uncatchable error.
	noop goja.Callable
	// reflectHas is Reflect.has (HasProperty), ownDesc
	// Object.getOwnPropertyDescriptor, isArray Array.isArray.
	reflectHas, ownDesc, isArray goja.Callable
	// reflectGet is Reflect.get; recurse a function that recurses until
	// goja's stack overflow; rangeErrorCtor RangeError. Reflect's and
	// RangeError's are captured when goja builds those globals (nil
	// until then: reflectOps and rangeErrorOf build them).
	reflectGet, recurse goja.Callable
	rangeErrorCtor      goja.Value
	// ownSymbolsOf is Object.getOwnPropertySymbols.
	ownSymbolsOf goja.Callable

	objectProto, arrayProto, arrayCtor *goja.Object
	// taLength is the getter of %TypedArray%.prototype.length (nil until
	// the typed arrays are guarded); abCtor is goja's ArrayBuffer;
	// typedInstalling is set while installTyped runs.
	taLength        *goja.Object
	abCtor          *goja.Object
	typedInstalling bool

	// thisString is goja's RequireObjectCoercible and ToString of a
	// String method's receiver.
	thisString func(this goja.Value) goja.String

	// typed is what the typed array guards share (guards_typed.go),
	// regexp what the RegExp guards do (guards_regexp.go).
	typed  *typedState
	regexp *regexpState
	// makeConstructor is constructorProgram's function; constructors the
	// guards it made, by name, which ctorCall and ctorConstruct serve.
	makeConstructor         goja.Callable
	constructors            map[string]constructorGuard
	ctorCall, ctorConstruct *goja.Object
	// sources maps a guard that stands in for a built-in constructor to
	// the built-in, whose text Function.prototype.toString gives.
	sources map[*goja.Object]*goja.Object
	// kinCtors are the async and the generator function constructors.
	kinCtors [2]*goja.Object
	// compiledText maps a function made from source whose templates were
	// split (guards_compile.go) to the text of the source as given, which
	// Function.prototype.toString gives.
	compiledText map[*goja.Object]string

	// loop, slowLoop, dense, strNative and strStride are guardLoop,
	// guardSlowLoop, denseNative, stringNative and stringStride, each
	// shifted right by guardsShift (zero but in tests).
	loop, slowLoop, dense, strNative int64
	strStride                        int
	shift                            uint

	// replacer is JSON.stringify's guard replacer, made once; replacers
	// the program's replacers of the calls in progress (nil: none).
	replacer  goja.Value
	replacers []nativeFunc

	// iterCalls counts the guarded iterator steps.
	iterCalls int64

	// pending are the guards of template methods goja has not built yet
	// (guards_lazy.go); recording, set only while patchTemplates learns
	// them, the template methods guarded.
	pending   map[templateProp]func(goja.Value)
	recording map[templateProp]bool

	// joinStack holds the arrays whose join (or toLocaleString) is in
	// progress in a guard, as goja's toStringStack does for its own: a
	// cycle joins to the empty string.
	joinStack []*goja.Object
}

var (
	proxyType = reflect.TypeOf(goja.Proxy{})
	funcType  = reflect.TypeOf((func(goja.FunctionCall) goja.Value)(nil))
)

// installGuards wraps goja's built-ins that do unbounded work or
// allocation in one Go call. It runs before the bootstrap and the web
// platform capture the built-ins they use, so theirs are guarded too.
func (s *session) installGuards() error {
	if s.unguarded {
		// Programs are compiled with their direct evals' source routed
		// through the hook (routeDirectEvals): here it passes it on as
		// given.
		return defineDirectEvalHook(s.vm, func(text string) (string, bool) { return text, false })
	}
	g := &guards{s: s, vm: s.vm, sources: map[*goja.Object]*goja.Object{}}
	s.guards = g
	if lazyTemplates.ok {
		g.register()
	}
	return g.install()
}

// install installs every guard, with the thresholds shifted by
// guardsShift.
func (g *guards) install() error {
	g.loop, g.slowLoop, g.dense = guardLoop>>guardsShift, guardSlowLoop>>guardsShift, denseNative>>guardsShift
	g.strNative, g.strStride, g.shift = stringNative>>guardsShift, stringStride>>guardsShift, guardsShift
	if err := g.capture(); err != nil {
		return err
	}
	for _, install := range []func() error{
		g.installStrings,
		g.installArrays,
		g.installBuffers,
		g.installFunctions,
		g.installCompilers,
		g.installDirectEvalHook,
		g.installMisc,
		g.installRegExps,
	} {
		if err := install(); err != nil {
			return err
		}
	}
	return nil
}

// The guards' few lines of JavaScript, compiled once for every runtime.
var (
	// captureProgram makes the two functions of the guards' own that
	// capture needs in JavaScript, and an async function and a generator
	// function, whose prototypes hold their constructors
	// (installCompilers).
	captureProgram = guardProgram("guards-capture.js", `[function () {}, function recurse() { return recurse() }, async function () {}, function* () {}]`)
)

func guardProgram(name, src string) *goja.Program {
	prg, err := parseAndCompile(name, src, true)
	if err != nil {
		panic("sandbox: " + name + " does not compile: " + err.Error())
	}
	return prg
}

// capture reads the intrinsics the wrappers use. Those of Reflect and
// RangeError are read when goja builds those globals (deferGlobal): a
// runtime that never reaches them does not build them.
func (g *guards) capture() error {
	v, err := g.vm.RunProgram(captureProgram)
	if err != nil {
		return err
	}
	list := v.(*goja.Object)
	g.noop, _ = goja.AssertFunction(list.Get("0"))
	g.recurse, _ = goja.AssertFunction(list.Get("1"))
	for i := range g.kinCtors {
		g.kinCtors[i], _ = list.Get(strconv.Itoa(2 + i)).(*goja.Object).Prototype().Get("constructor").(*goja.Object)
	}
	object := g.global("Object")
	g.ownDesc, _ = goja.AssertFunction(object.Get("getOwnPropertyDescriptor"))
	g.ownSymbolsOf, _ = goja.AssertFunction(object.Get("getOwnPropertySymbols"))
	g.objectProto = object.Get("prototype").(*goja.Object)
	g.arrayCtor = g.global("Array")
	g.isArray, _ = goja.AssertFunction(g.arrayCtor.Get("isArray"))
	g.arrayProto = g.arrayCtor.Get("prototype").(*goja.Object)
	if g.noop == nil || g.recurse == nil || g.ownDesc == nil || g.ownSymbolsOf == nil || g.isArray == nil {
		return errNotBuiltin("an intrinsic the guards use")
	}
	return g.deferGlobal("RangeError", func(ctor *goja.Object) error {
		g.rangeErrorCtor = ctor
		return nil
	})
}

// reflectOps is Reflect.has and Reflect.get, goja's: it builds Reflect
// (which captures them, installReflect) when nothing has yet. Whatever
// replaced or deleted the global built it first, so what it finds is
// always goja's own.
func (g *guards) reflectOps() (has, get goja.Callable) {
	if g.reflectHas == nil {
		g.vm.GlobalObject().Get("Reflect")
	}
	if g.reflectHas == nil {
		panic(errNotBuiltin("Reflect"))
	}
	return g.reflectHas, g.reflectGet
}

// rangeErrorOf is goja's RangeError, built (and captured) on first use.
func (g *guards) rangeErrorOf() goja.Value {
	if g.rangeErrorCtor == nil {
		g.vm.GlobalObject().Get("RangeError")
	}
	if g.rangeErrorCtor == nil {
		panic(errNotBuiltin("RangeError"))
	}
	return g.rangeErrorCtor
}

// global is the global constructor or namespace object name.
func (g *guards) global(name string) *goja.Object {
	return g.vm.GlobalObject().Get(name).(*goja.Object)
}

// raise ends the native call in progress with the runtime's pending
// interrupt, as goja's uncatchable error; a run whose context ended
// without an interrupt yet is interrupted with its cause. It never returns.
func (g *guards) raise() {
	s := g.s
	if !s.halted() {
		s.interrupt(interruptCancel{})
	}
	for i := 0; ; i++ {
		// The interrupt is recorded an instant before goja's flag is set
		// (session.interrupt, on another goroutine, which is between the
		// two): wait for the flag. Raising an interrupt of our own instead
		// would replace the clock's or the meter's with one that has no
		// cause, and the run would end with "context canceled".
		if _, err := g.noop(goja.Undefined()); err != nil {
			panic(err)
		}
		if i < 1000 {
			runtime.Gosched()
		} else {
			// A loaded machine may not run the other goroutine soon.
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// checkpoint raises the run's interrupt when it was interrupted or its
// context ended: the guards' long loops call it every guardStride
// elements.
func (g *guards) checkpoint() {
	if g.s.halted() || (g.s.ctx != nil && g.s.ctx.Err() != nil) {
		g.raise()
	}
}

// reserve asks the run's memory budget for n bytes a built-in is about to
// allocate in one step. Refused, the run ends with the memory text and
// reserve does not return. A host without a budget leaves the job's limit
// to the sandbox: one allocation larger than MemoryLimitMB MiB is refused.
func (g *guards) reserve(n int64) {
	if n < reserveFloor {
		return
	}
	s := g.s
	if s.halted() {
		g.raise()
	}
	if b, ok := s.host.(MemoryBudget); ok {
		if b.Reserve(n) {
			return
		}
		if s.ctx != nil && s.ctx.Err() != nil {
			// The host ended the run with the memory text as its cause.
			s.interrupt(interruptCancel{})
		} else {
			s.interrupt(interruptMemory{})
		}
		g.raise()
	}
	if limit := int64(s.job.MemoryLimitMB) << 20; limit > 0 && n > limit {
		s.interrupt(interruptMemory{})
		g.raise()
	}
}

// native makes a Go function a native JavaScript function with the given
// name and length, as goja makes its built-ins: not a constructor, with
// name and length non-writable, non-enumerable and configurable. A Go
// runtime error inside it (a bug of the sandbox's) breaks the run as a
// host function's would; everything else goja or JavaScript throws passes.
func (g *guards) native(name string, length goja.Value, fn func(goja.FunctionCall) goja.Value) *goja.Object {
	f := g.vm.ToValue(g.contained(fn)).(*goja.Object)
	_ = f.DefineDataProperty("name", g.vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	_ = f.DefineDataProperty("length", length, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return f
}

// contained is fn, with a Go runtime error inside it (a bug in a guard,
// never the program's doing) ending the run instead of the process. It is
// never inlined, so that every guard it makes runs the same code, which
// tests recognise.
//
//go:noinline
func (g *guards) contained(fn nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) (out goja.Value) {
		defer g.endRunOnBug(func() { out = goja.Undefined() })
		return fn(call)
	}
}

// endRunOnBug, deferred by the sandbox's own Go code that goja calls,
// turns a Go runtime error there (a bug of the sandbox's, never the
// program's doing) into the end of the run instead of the process, and
// then gives the call the result fallback sets. Any other panic (goja's
// interrupt and exceptions) goes on.
func (g *guards) endRunOnBug(fallback func()) {
	if r := recover(); r != nil {
		if _, ok := r.(runtime.Error); !ok {
			panic(r)
		}
		g.s.breakRun()
		fallback()
	}
}

// nativeFunc is a goja built-in's own Go function.
type nativeFunc = func(goja.FunctionCall) goja.Value

// method puts a guard in front of the built-in method obj[name]; wrap
// builds it from the original's Go function. The guard takes the
// original's place inside its own function object (nativeLayout), so the
// method keeps its identity, name, length and attributes, and a prepared
// runtime pays for no new object; where goja's layout is not the one
// known, a new function object with the same name, length and attributes
// (writable, configurable, not enumerable) replaces it.
func (g *guards) method(obj *goja.Object, name string, wrap func(orig nativeFunc) nativeFunc) error {
	if g.deferMethod(obj, name, wrap) {
		return nil
	}
	orig, ok := obj.Get(name).(*goja.Object)
	if !ok {
		return errNotBuiltin(name)
	}
	f, ok := orig.Export().(nativeFunc)
	if !ok {
		return errNotBuiltin(name)
	}
	guard := wrap(f)
	if swapNative(orig, g.contained(guard)) {
		return nil
	}
	w := g.native(orig.Get("name").String(), orig.Get("length"), guard)
	return obj.DefineDataProperty(name, w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// nativeLayout locates the Go function inside goja's native function
// object, found by reflection on one: goja offers no way to wrap a
// built-in in place. Should a goja upgrade change it, ok is false and the
// guards fall back to new function objects.
var nativeLayout = func() (l struct {
	ok      bool
	self, f []int
	typ     reflect.Type
}) {
	fn, ok := goja.New().Get("parseInt").(*goja.Object)
	if !ok {
		return l
	}
	self, ok := reflect.TypeOf(fn).Elem().FieldByName("self")
	if !ok {
		return l
	}
	impl := reflect.ValueOf(fn).Elem().FieldByIndex(self.Index)
	if impl.Kind() != reflect.Interface || impl.IsNil() || impl.Elem().Kind() != reflect.Pointer {
		return l
	}
	typ := impl.Elem().Type()
	f, found := typ.Elem().FieldByName("f")
	if !found || f.Type != funcType {
		return l
	}
	l.self, l.f, l.typ, l.ok = self.Index, f.Index, typ, true
	return l
}()

// swapNative makes fn the Go function of the native function object o,
// and reports whether it could.
func swapNative(o *goja.Object, fn nativeFunc) bool {
	if !nativeLayout.ok {
		return false
	}
	impl := reflect.ValueOf(o).Elem().FieldByIndex(nativeLayout.self)
	if impl.IsNil() || impl.Elem().Type() != nativeLayout.typ {
		return false
	}
	field := impl.Elem().Elem().FieldByIndex(nativeLayout.f)
	if field.IsNil() {
		return false
	}
	reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem().Set(reflect.ValueOf(fn))
	return true
}

type errNotBuiltin string

func (e errNotBuiltin) Error() string { return "sandbox: " + string(e) + " is not a goja built-in" }

// isProxy reports whether o is a Proxy, without running any trap.
func isProxy(o *goja.Object) bool { return o.ExportType() == proxyType }

// toLength is goja's ToLength of a property read (nil: absent).
func toLength(v goja.Value) int64 {
	if v == nil {
		return 0
	}
	i := v.ToInteger()
	if i < 0 {
		return 0
	}
	if i >= maxSafeInt {
		return maxSafeInt - 1
	}
	return i
}

// maxSafeInt is goja's maxInt, 2^53.
const maxSafeInt = 1 << 53

// relIndex is goja's relToIdx: a relative index into a length.
func relIndex(rel, l int64) int64 {
	if rel >= 0 {
		return min(rel, l)
	}
	return max(l+rel, 0)
}

// key is the property key of index k.
func key(k int64) string { return strconv.FormatInt(k, 10) }

// quietLength reads o's length as goja's built-ins do, ToLength of
// Get(o, "length"), when the read runs no JavaScript: o is an Array, or
// no Proxy stands on its prototype chain before the length property, which
// is a data property (or %TypedArray%.prototype's own getter). ok is false
// when the read would be observable; the caller must then leave it to an
// implementation that reads it exactly once.
func (g *guards) quietLength(o *goja.Object) (n int64, ok bool) {
	if n, ok := arrayLength(o); ok {
		return n, true
	}
	if isProxy(o) {
		return 0, false
	}
	if o.ClassName() == "Array" {
		return toLength(o.Get("length")), true
	}
	for p := o; p != nil; p = p.Prototype() {
		if isProxy(p) {
			return 0, false
		}
		d, err := g.ownDesc(goja.Undefined(), p, g.vm.ToValue("length"))
		if err != nil {
			return 0, false
		}
		desc, isObj := d.(*goja.Object)
		if !isObj {
			continue
		}
		fields := desc.Keys()
		for _, f := range fields {
			if f == "value" {
				return toLength(desc.Get("value")), true
			}
		}
		if get, isFn := desc.Get("get").(*goja.Object); isFn && get == g.taLength {
			v, err := g.callValue(get, o)
			if err != nil {
				return 0, false
			}
			return toLength(v), true
		}
		return 0, false
	}
	return 0, true
}

// hasOwnSymbol reports whether o (not a Proxy) has an own property keyed
// by sym, enumerable or not.
func (g *guards) hasOwnSymbol(o *goja.Object, sym *goja.Symbol) bool {
	list, err := g.ownSymbolsOf(goja.Undefined(), o)
	throwing(err)
	l := list.(*goja.Object)
	for i, n := int64(0), lengthOf(l); i < n; i++ {
		if l.Get(key(i)) == sym {
			return true
		}
	}
	return false
}

// installFunctions guards Function.prototype.toString, so that it gives a
// constructor guard goja's text for the constructor it stands in for.
func (g *guards) installFunctions() error {
	proto := g.global("Function").Get("prototype").(*goja.Object)
	return g.method(proto, "toString", func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			if o, ok := call.This.(*goja.Object); ok {
				if src, ok := g.sources[o]; ok {
					return orig(goja.FunctionCall{This: src})
				}
				if text, ok := g.compiledText[o]; ok {
					return g.vm.ToValue(text)
				}
			}
			return orig(call)
		}
	})
}

// callValue calls fn (a function object) with this and args.
func (g *guards) callValue(fn *goja.Object, this goja.Value, args ...goja.Value) (goja.Value, error) {
	c, ok := goja.AssertFunction(fn)
	if !ok {
		return nil, errNotBuiltin("a callee")
	}
	return c(this, args...)
}

// callable is what goja's toCallable finds in v, as a Go function that
// throws as goja's own callees do; ok is false when v is not callable.
func callable(v goja.Value) (nativeFunc, bool) {
	o, ok := v.(*goja.Object)
	if !ok {
		return nil, false
	}
	c, ok := goja.AssertFunction(o)
	if !ok {
		return nil, false
	}
	if o.ExportType() == funcType {
		if f, ok := o.Export().(nativeFunc); ok {
			return f, true
		}
	}
	return func(call goja.FunctionCall) goja.Value {
		v, err := c(call.This, call.Arguments...)
		if err != nil {
			panic(err)
		}
		return v
	}, true
}

// throwing panics with err when it is not nil, so that a JavaScript
// exception a public goja call returned propagates as goja's own throws do.
func throwing(err error) {
	if err != nil {
		panic(err)
	}
}
