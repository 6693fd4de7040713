package sandbox

import (
	"fmt"
	"reflect"

	"github.com/dop251/goja"
)

// ArrayBuffer and typed array guards. goja allocates a buffer whole
// (new ArrayBuffer(2**30) takes a gigabyte at once, and past the worker's
// address-space limit the Go runtime dies), so the constructors are
// wrapped and ask the budget first; %TypedArray%.from, the constructor
// over an array-like, set from one and the methods that loop over a typed
// array's elements in Go work a range at a time, over views of the same
// buffer made with goja's own constructors, or in an interruptible loop.

// typedKinds are the typed array constructors and their element sizes.
var typedKinds = []struct {
	name string
	size int64
}{
	{"Int8Array", 1}, {"Uint8Array", 1}, {"Uint8ClampedArray", 1}, {"Int16Array", 2}, {"Uint16Array", 2},
	{"Int32Array", 4}, {"Uint32Array", 4}, {"Float32Array", 4}, {"Float64Array", 8},
	{"BigInt64Array", 8}, {"BigUint64Array", 8},
}

// typedKind is one typed array constructor as goja made it.
type typedKind struct {
	size      int64
	ctor      *goja.Object // the original constructor
	construct goja.Constructor
	guard     *goja.Object // what stands in for it
}

// typedState is what the typed array guards share.
type typedState struct {
	kinds map[string]*typedKind
	// The getters of %TypedArray%.prototype: length, buffer, byteOffset
	// and the Symbol.toStringTag that names the kind; all native, all
	// quiet.
	taBuffer, taByteOffset, taTag, taLen goja.Callable
	// set, fill and reverse are %TypedArray%.prototype's own, for views.
	set, fill, reverse nativeFunc
}

func (g *guards) installBuffers() error {
	g.abCtor = g.global("ArrayBuffer")
	if _, err := g.constructor("ArrayBuffer", g.abCtor, true, g.bufferConstructor); err != nil {
		return err
	}
	// The typed arrays are guarded when goja first builds one of their
	// constructors: nothing makes a typed array without reading one
	// (the host's code reads them too), and building them all up front
	// costs every prepared runtime most of the family's objects.
	deferred := true
	for _, k := range typedKinds {
		name := k.name
		deferred = g.deferBuild(g.vm.GlobalObject(), name, func(v goja.Value) {
			ctor := functionOfProp(v)
			if ctor == nil {
				panic(errNotBuiltin(name))
			}
			if g.typedInstalling {
				return // read by installTyped itself, which guards it
			}
			throwing(g.installTyped(name, ctor))
			// goja is building the global name: its guard becomes its
			// value here, since the global cannot be defined meanwhile.
			setFunctionOfProp(v, g.typed.kinds[name].guard)
		}) && deferred
	}
	if !deferred {
		// Recording, or goja's layout not the one known: up front.
		return g.installTyped("", nil)
	}
	return nil
}

// installTyped guards the typed array family: every constructor,
// %TypedArray%.from and the methods of %TypedArray%.prototype. building
// names the constructor goja is building (ctor), whose global the caller
// sets; "" when none is.
func (g *guards) installTyped(building string, ctor *goja.Object) error {
	if g.typed != nil {
		return nil
	}
	g.typedInstalling = true
	defer func() { g.typedInstalling = false }()
	ts := &typedState{kinds: map[string]*typedKind{}}
	ctors := map[string]*goja.Object{}
	for _, k := range typedKinds {
		if k.name == building {
			ctors[k.name] = ctor
		} else {
			ctors[k.name] = g.global(k.name)
		}
	}
	taProto := ctors["Uint8Array"].Prototype().Get("prototype").(*goja.Object)
	getter := func(name string) (goja.Callable, error) {
		d, err := g.ownDesc(goja.Undefined(), taProto, g.vm.ToValue(name))
		if err != nil {
			return nil, err
		}
		f, _ := goja.AssertFunction(d.(*goja.Object).Get("get"))
		return f, nil
	}
	var err error
	if ts.taBuffer, err = getter("buffer"); err != nil {
		return err
	}
	if ts.taByteOffset, err = getter("byteOffset"); err != nil {
		return err
	}
	lengthDesc, err := g.ownDesc(goja.Undefined(), taProto, g.vm.ToValue("length"))
	if err != nil {
		return err
	}
	g.taLength = lengthDesc.(*goja.Object).Get("get").(*goja.Object)
	ts.taLen, _ = goja.AssertFunction(g.taLength)
	tagDesc, err := g.ownDesc(goja.Undefined(), taProto, goja.SymToStringTag)
	if err != nil {
		return err
	}
	ts.taTag, _ = goja.AssertFunction(tagDesc.(*goja.Object).Get("get"))
	ts.set, _ = taProto.Get("set").(*goja.Object).Export().(nativeFunc)
	ts.fill, _ = taProto.Get("fill").(*goja.Object).Export().(nativeFunc)
	ts.reverse, _ = taProto.Get("reverse").(*goja.Object).Export().(nativeFunc)
	g.typed = ts
	for _, k := range typedKinds {
		c := ctors[k.name]
		construct, ok := goja.AssertConstructor(c)
		if !ok {
			return errNotBuiltin(k.name)
		}
		kind := &typedKind{size: k.size, ctor: c, construct: construct}
		ts.kinds[k.name] = kind
		if kind.guard, err = g.constructor(k.name, c, k.name != building, g.typedConstructor(k.name)); err != nil {
			return err
		}
	}
	typedArray := ctors["Uint8Array"].Prototype()
	if err := g.method(typedArray, "from", g.typedFrom); err != nil {
		return err
	}
	for name, wrap := range map[string]func(nativeFunc) nativeFunc{
		"join":           g.typedJoin(false),
		"toLocaleString": g.typedJoin(true),
		"fill":           g.typedFill,
		"indexOf":        g.typedSearch(searchFirst),
		"includes":       g.typedSearch(searchIncludes),
		"lastIndexOf":    g.typedSearch(searchLast),
		"reverse":        g.typedReverse,
		"set":            g.typedSet,
		"toReversed":     g.typedToReversed,
		"with":           g.typedWith,
		"toSorted":       g.typedReserving,
		"filter":         g.typedFilter,
		"map":            g.typedLooping(g.slowTypedMap),
		"forEach":        g.typedLooping(g.slowTypedEach(eachForEach)),
		"every":          g.typedLooping(g.slowTypedEach(eachEvery)),
		"some":           g.typedLooping(g.slowTypedEach(eachSome)),
		"find":           g.typedLooping(g.slowTypedEach(eachFind)),
		"findIndex":      g.typedLooping(g.slowTypedEach(eachFindIndex)),
		"findLast":       g.typedLooping(g.slowTypedEach(eachFindLast)),
		"findLastIndex":  g.typedLooping(g.slowTypedEach(eachFindLastIndex)),
		"reduce":         g.typedLooping(g.slowTypedReduce(false)),
		"reduceRight":    g.typedLooping(g.slowTypedReduce(true)),
	} {
		if err := g.method(taProto, name, wrap); err != nil {
			return err
		}
	}
	return nil
}

// constructor replaces the global constructor name with one that behaves
// as goja's, guarded by construct: the same name, length, prototype (whose
// constructor it becomes), static members and [[Prototype]], and
// Function.prototype.toString gives goja's text for it. Called without
// new it is goja's, which throws.
//
// It is a strict JavaScript function that hands new.target and its
// arguments to Go: goja's native constructors cannot tell new from a call
// (both construct), and goja cannot take instanceof through a Proxy. Like
// any function's, its [[Construct]] reads new.target's prototype before
// the body runs: a new.target whose prototype is an accessor or behind a
// trap (Reflect.construct's third argument) sees one read more. Its
// properties are copied in Go: copied by JavaScript, they cost a prepared
// runtime a quarter of a millisecond.
func (g *guards) constructor(name string, orig *goja.Object, define bool, construct func(newTarget *goja.Object, args []goja.Value) *goja.Object) (*goja.Object, error) {
	call, ok := orig.Export().(nativeFunc)
	if !ok {
		return nil, errNotBuiltin(name)
	}
	if g.makeConstructor == nil {
		if err := g.constructorMaker(); err != nil {
			return nil, err
		}
	}
	g.constructors[name] = constructorGuard{call: call, construct: construct}
	v, err := g.makeConstructor(goja.Undefined(), orig, g.vm.ToValue(name), g.ctorCall, g.ctorConstruct)
	if err != nil {
		return nil, err
	}
	f := v.(*goja.Object)
	for _, k := range orig.GetOwnPropertyNames() {
		if err := g.copyOwn(f, orig, g.vm.ToValue(k)); err != nil {
			return nil, err
		}
	}
	syms, err := g.ownSymbolsOf(goja.Undefined(), orig)
	if err != nil {
		return nil, err
	}
	for i, list := int64(0), syms.(*goja.Object); i < lengthOf(list); i++ {
		if err := g.copyOwn(f, orig, list.Get(key(i))); err != nil {
			return nil, err
		}
	}
	if err := f.SetPrototype(orig.Prototype()); err != nil {
		return nil, err
	}
	proto := orig.Get("prototype").(*goja.Object)
	if err := proto.DefineDataProperty("constructor", f, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	if define {
		if err := g.vm.GlobalObject().DefineDataProperty(name, f, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return nil, err
		}
	}
	g.sources[f] = orig
	return f, nil
}

// constructorGuard is what a constructor guard calls in Go.
type constructorGuard struct {
	call      nativeFunc
	construct func(newTarget *goja.Object, args []goja.Value) *goja.Object
}

// constructorMaker makes the function that makes constructor guards and
// the two natives every guard shares, which take the constructor's name
// first.
func (g *guards) constructorMaker() error {
	v, err := g.vm.RunProgram(constructorProgram)
	if err != nil {
		return err
	}
	g.makeConstructor, _ = goja.AssertFunction(v)
	g.constructors = map[string]constructorGuard{}
	guard := func(c goja.FunctionCall) constructorGuard { return g.constructors[c.Argument(0).String()] }
	g.ctorCall = g.native("call", g.vm.ToValue(0), func(c goja.FunctionCall) goja.Value {
		return guard(c).call(goja.FunctionCall{This: c.Argument(1), Arguments: c.Arguments[min(2, len(c.Arguments)):]})
	})
	g.ctorConstruct = g.native("construct", g.vm.ToValue(0), func(c goja.FunctionCall) goja.Value {
		return guard(c).construct(c.Argument(1).(*goja.Object), c.Arguments[min(2, len(c.Arguments)):])
	})
	return nil
}

// constructorProgram makes a constructor guard (guards.constructor).
var constructorProgram = guardProgram("guards-constructor.js", `(function (orig, name, call, construct) {
  'use strict'
  // goja's typed array and buffer constructors read three arguments at
  // most, an undefined one as an absent one. A small length needs no
  // budget: goja's own constructor takes it at once (new orig makes the
  // same object as new f: they share their prototype).
  const f = function (a, b, c) {
    if (new.target === undefined) return call(name, this, a, b, c)
    if (new.target === f && typeof a === 'number' && a >= 0 && a <= 65536) return new orig(a)
    return construct(name, new.target, a, b, c)
  }
  return f
})`)

// copyOwn gives to the own property key (a string or a symbol) of from,
// with its attributes.
func (g *guards) copyOwn(to, from *goja.Object, key goja.Value) error {
	d, err := g.ownDesc(goja.Undefined(), from, key)
	if err != nil {
		return err
	}
	desc := d.(*goja.Object)
	flag := func(name string) goja.Flag {
		if desc.Get(name).ToBoolean() {
			return goja.FLAG_TRUE
		}
		return goja.FLAG_FALSE
	}
	sym, isSym := key.(*goja.Symbol)
	if v := desc.Get("value"); v != nil {
		if isSym {
			return to.DefineDataPropertySymbol(sym, v, flag("writable"), flag("enumerable"), flag("configurable"))
		}
		return to.DefineDataProperty(key.String(), v, flag("writable"), flag("enumerable"), flag("configurable"))
	}
	get, set := desc.Get("get"), desc.Get("set")
	if isSym {
		return to.DefineAccessorPropertySymbol(sym, get, set, flag("enumerable"), flag("configurable"))
	}
	return to.DefineAccessorProperty(key.String(), get, set, flag("enumerable"), flag("configurable"))
}

// toIndex is goja's ToIndex, with its RangeError.
func (g *guards) toIndex(v goja.Value) int64 {
	n := v.ToInteger()
	if n < 0 || n >= maxSafeInt {
		panic(g.rangeError(fmt.Sprintf("Invalid index %s", v.String())))
	}
	return n
}

// bufferConstructor guards new ArrayBuffer(length).
func (g *guards) bufferConstructor(newTarget *goja.Object, args []goja.Value) *goja.Object {
	if len(args) > 0 {
		n := g.toIndex(args[0])
		g.reserve(n)
		args = append([]goja.Value{g.vm.ToValue(n)}, args[1:]...)
	}
	construct, _ := goja.AssertConstructor(g.abCtor)
	o, err := construct(newTarget, args...)
	throwing(err)
	return o
}

// typedConstructor guards a typed array constructor: a length, a typed
// array or an array-like sizes the buffer, which is asked of the budget;
// an array-like past guardLoop is copied in an interruptible loop.
func (g *guards) typedConstructor(name string) func(*goja.Object, []goja.Value) *goja.Object {
	return func(newTarget *goja.Object, args []goja.Value) *goja.Object {
		kind := g.typed.kinds[name]
		construct := func(args ...goja.Value) *goja.Object {
			o, err := kind.construct(newTarget, args...)
			throwing(err)
			return o
		}
		if len(args) == 0 {
			return construct()
		}
		obj, isObj := args[0].(*goja.Object)
		if !isObj {
			n := g.toIndex(args[0])
			g.reserve(n * kind.size)
			return construct(g.vm.ToValue(n))
		}
		if obj.ExportType() == arrayBufferType {
			return construct(args...)
		}
		if n, ok := g.typedLength(obj); ok {
			g.reserve(n * kind.size)
			return construct(args...)
		}
		// goja's typedArrayFrom over obj: an iterator, else an array-like.
		iterate, stand, n, quiet := g.fromItems(obj)
		if iterate {
			return construct(args...)
		}
		if stand != nil {
			return construct(stand)
		}
		g.reserve(n * kind.size)
		if n < g.loop {
			if quiet {
				return construct(args...)
			}
			return construct(g.arrayLikeStandIn(obj, n))
		}
		ta := construct(g.vm.ToValue(n))
		for i := int64(0); i < n; i++ {
			g.tick(i)
			throwing(ta.Set(key(i), nilSafe(obj.Get(key(i)))))
		}
		return ta
	}
}

// arrayBufferType is what goja exports an ArrayBuffer as.
var arrayBufferType = reflect.TypeOf(goja.ArrayBuffer{})

// iterableStandIn is an object whose Symbol.iterator lends m, called on
// items: goja takes an iterator from it as from items, whose method was
// read already.
func (g *guards) iterableStandIn(items *goja.Object, m nativeFunc) *goja.Object {
	stand := g.vm.NewObject()
	throwing(stand.SetSymbol(goja.SymIterator, g.vm.ToValue(func(goja.FunctionCall) goja.Value {
		return m(goja.FunctionCall{This: items})
	})))
	return stand
}

// arrayLikeStandIn is an array-like whose length is n and whose indices
// are items' (read as goja reads them), with no prototype: goja reads it
// as it would items, whose length was read already.
func (g *guards) arrayLikeStandIn(items *goja.Object, n int64) *goja.Object {
	stand := g.vm.NewDynamicObject(&arrayLikeView{o: items, length: g.vm.ToValue(n)})
	throwing(stand.SetPrototype(nil))
	return stand
}

// typedLayout locates the length of goja's typed array object, read by
// reflection: the guards ask it on every call of a typed array method,
// and goja's getter costs a call through the runtime. Should a goja
// upgrade rename it, the getter answers.
var typedLayout = func() (l struct {
	ok     bool
	typ    reflect.Type
	length []int
}) {
	v, err := goja.New().RunString("new Uint8Array(1)")
	if err != nil || !arrayLayout.ok {
		return l
	}
	impl := reflect.ValueOf(v.(*goja.Object)).Elem().FieldByIndex(arrayLayout.self)
	if impl.IsNil() || impl.Elem().Kind() != reflect.Pointer {
		return l
	}
	l.typ = impl.Elem().Type()
	f, found := l.typ.Elem().FieldByName("length")
	if !found || f.Type.Kind() != reflect.Int {
		return l
	}
	l.length, l.ok = f.Index, true
	return l
}()

// typedLength is a typed array's length; ok is false for anything else.
func (g *guards) typedLength(v goja.Value) (int64, bool) {
	o, isObj := v.(*goja.Object)
	if g.typed == nil || !isObj {
		return 0, false
	}
	if typedLayout.ok {
		impl := reflect.ValueOf(o).Elem().FieldByIndex(arrayLayout.self)
		if impl.IsNil() || impl.Elem().Type() != typedLayout.typ {
			return 0, false
		}
		return impl.Elem().Elem().FieldByIndex(typedLayout.length).Int(), true
	}
	n, err := g.typed.taLen(o)
	if err != nil {
		return 0, false
	}
	return n.ToInteger(), true
}

// typedKindOf is the kind of typed array o is.
func (g *guards) typedKindOf(o goja.Value) *typedKind {
	v, err := g.typed.taTag(o)
	if err != nil {
		return nil
	}
	return g.typed.kinds[v.String()]
}

// view is a typed array of o's kind over count of o's elements from
// start, made by goja's own constructor: no budget, nothing observable.
func (g *guards) view(o *goja.Object, kind *typedKind, start, count int64) *goja.Object {
	buf, err := g.typed.taBuffer(o)
	throwing(err)
	off, err := g.typed.taByteOffset(o)
	throwing(err)
	v, err := kind.construct(kind.ctor, buf, g.vm.ToValue(off.ToInteger()+start*kind.size), g.vm.ToValue(count))
	throwing(err)
	return v
}

// typedFrom guards %TypedArray%.from over an array-like.
func (g *guards) typedFrom(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		c, isObj := call.This.(*goja.Object)
		source, srcObj := call.Argument(0).(*goja.Object)
		mapArg := call.Argument(1)
		var mapFn nativeFunc
		if !goja.IsUndefined(mapArg) {
			f, ok := callable(mapArg)
			if !ok {
				return orig(call)
			}
			mapFn = f
		}
		if !isObj || !srcObj {
			return orig(call)
		}
		iterate, stand, n, quiet := g.fromItems(source)
		if iterate {
			return orig(call)
		}
		if stand != nil {
			return orig(goja.FunctionCall{This: c, Arguments: []goja.Value{stand, mapArg, call.Argument(2)}})
		}
		if n < g.loop {
			if quiet {
				return orig(call)
			}
			return orig(goja.FunctionCall{This: c, Arguments: []goja.Value{g.arrayLikeStandIn(source, n), mapArg, call.Argument(2)}})
		}
		ta := g.typedCreate(c, n)
		this := call.Argument(2)
		for i := int64(0); i < n; i++ {
			g.tick(i)
			v := nilSafe(source.Get(key(i)))
			if mapFn != nil {
				v = mapFn(goja.FunctionCall{This: this, Arguments: []goja.Value{v, g.vm.ToValue(i)}})
			}
			throwing(ta.Set(key(i), v))
		}
		return ta
	}
}

// typedCreate is goja's typedArrayCreate(c, [n]).
func (g *guards) typedCreate(c *goja.Object, n int64) *goja.Object {
	construct, ok := goja.AssertConstructor(c)
	if !ok {
		panic(g.vm.NewTypeError("Value is not a constructor"))
	}
	o, err := construct(c, g.vm.ToValue(n))
	throwing(err)
	m, ok := g.typedLength(o)
	if !ok {
		panic(g.vm.NewTypeError(fmt.Sprintf("Invalid TypedArray: %s", o.String())))
	}
	if m < n {
		panic(g.vm.NewTypeError("Derived TypedArray constructor created an array which was too small"))
	}
	return o
}

// typedReceiver is a typed array method's receiver, its kind and length
// when it is a typed array past guardLoop; ok is false otherwise (goja's
// method then takes the call, errors and all).
func (g *guards) typedReceiver(call goja.FunctionCall) (o *goja.Object, kind *typedKind, n int64, ok bool) {
	n, isTyped := g.typedLength(call.This)
	if !isTyped || n < g.loop {
		return nil, nil, 0, false
	}
	o = call.This.(*goja.Object)
	if kind = g.typedKindOf(o); kind == nil {
		return nil, nil, 0, false
	}
	return o, kind, n, true
}

// typedJoin guards join (and toLocaleString: the elements' own
// toLocaleString, through Number.prototype, in order): goja spends about
// 80 ns an element, the guard a range at a time.
func (g *guards) typedJoin(locale bool) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			o, kind, n, ok := g.typedReceiver(call)
			if !ok {
				return orig(call)
			}
			var sep goja.String = g.vm.ToValue(",").(goja.String)
			args := []goja.Value{}
			if s := call.Argument(0); !locale && !goja.IsUndefined(s) {
				sep = g.toStr(s)
				args = []goja.Value{sep}
			}
			// toLocaleString calls a method an element, about a
			// microsecond: its ranges are shorter.
			chunk := g.loop
			if locale {
				chunk = g.slowLoop
			}
			b := &builder{g: g}
			for start := int64(0); start < n; start += chunk {
				if start > 0 {
					b.write(sep)
				}
				part := orig(goja.FunctionCall{This: g.view(o, kind, start, min(chunk, n-start)), Arguments: args})
				b.write(part.(goja.String))
				b.check()
			}
			return b.b.String()
		}
	}
}

// typedFill guards fill, a range at a time, the value made a number (or
// a BigInt) once by goja's own fill of a one-element array of the kind.
func (g *guards) typedFill(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o, kind, n, ok := g.typedReceiver(call)
		if !ok {
			return orig(call)
		}
		k, final := relArgs(call.Argument(1), call.Argument(2), n)
		scratch, err := kind.construct(kind.ctor, g.vm.ToValue(1))
		throwing(err)
		orig(goja.FunctionCall{This: scratch, Arguments: []goja.Value{call.Argument(0)}})
		value := scratch.Get("0")
		for ; k < final; k += g.loop {
			g.checkpoint()
			orig(goja.FunctionCall{This: o, Arguments: []goja.Value{value, g.vm.ToValue(k), g.vm.ToValue(min(k+g.loop, final))}})
		}
		return o
	}
}

type searchKind int

const (
	searchFirst searchKind = iota
	searchIncludes
	searchLast
)

// typedSearch guards indexOf, includes and lastIndexOf, a view at a time.
func (g *guards) typedSearch(kind searchKind) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			o, tk, n, ok := g.typedReceiver(call)
			if !ok {
				return orig(call)
			}
			search := call.Argument(0)
			args := []goja.Value{search}
			if kind == searchLast {
				from := n - 1
				if len(call.Arguments) >= 2 {
					from = call.Argument(1).ToInteger()
					if from >= 0 {
						from = min(from, n-1)
					} else {
						from += n
					}
				}
				for end := from + 1; end > 0; end -= g.loop {
					g.checkpoint()
					start := max(end-g.loop, 0)
					if r := orig(goja.FunctionCall{This: g.view(o, tk, start, end-start), Arguments: args}).ToInteger(); r >= 0 {
						return g.vm.ToValue(start + r)
					}
				}
				return g.vm.ToValue(-1)
			}
			from := call.Argument(1).ToInteger()
			if from >= n {
				return orig(goja.FunctionCall{This: o, Arguments: []goja.Value{search, g.vm.ToValue(from)}})
			}
			if from < 0 {
				from = max(n+from, 0)
			}
			for start := from; start < n; start += g.loop {
				g.checkpoint()
				r := orig(goja.FunctionCall{This: g.view(o, tk, start, min(g.loop, n-start)), Arguments: args})
				if kind == searchIncludes {
					if r.ToBoolean() {
						return r
					}
				} else if i := r.ToInteger(); i >= 0 {
					return g.vm.ToValue(start + i)
				}
			}
			if kind == searchIncludes {
				return g.vm.ToValue(false)
			}
			return g.vm.ToValue(-1)
		}
	}
}

// typedReverse guards reverse: the pair of ranges at each end swaps
// through a scratch array, each reversed by goja.
func (g *guards) typedReverse(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o, kind, n, ok := g.typedReceiver(call)
		if !ok {
			return orig(call)
		}
		scratch, err := kind.construct(kind.ctor, g.vm.ToValue(g.loop))
		throwing(err)
		for lo := int64(0); lo < n/2; lo += g.loop {
			g.checkpoint()
			c := min(g.loop, n/2-lo)
			low, high := g.view(o, kind, lo, c), g.view(o, kind, n-lo-c, c)
			tmp := g.view(scratch, kind, 0, c)
			orig(goja.FunctionCall{This: low})
			orig(goja.FunctionCall{This: high})
			g.typed.set(goja.FunctionCall{This: tmp, Arguments: []goja.Value{low}})
			g.typed.set(goja.FunctionCall{This: low, Arguments: []goja.Value{high}})
			g.typed.set(goja.FunctionCall{This: high, Arguments: []goja.Value{tmp}})
		}
		return o
	}
}

// typedSet guards set from an array-like past guardLoop, which goja copies
// in one loop.
func (g *guards) typedSet(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		target, isTyped := g.typedLength(call.This)
		src, isObj := call.Argument(0).(*goja.Object)
		if !isTyped || !isObj {
			return orig(call)
		}
		if _, srcTyped := g.typedLength(src); srcTyped {
			return orig(call)
		}
		offset := call.Argument(1).ToInteger()
		args := []goja.Value{src, g.vm.ToValue(offset)}
		if offset < 0 {
			return orig(goja.FunctionCall{This: call.This, Arguments: args})
		}
		if n, quiet := g.quietLength(src); quiet && n < g.loop {
			return orig(goja.FunctionCall{This: call.This, Arguments: args})
		}
		o := call.This.(*goja.Object)
		n := lengthOf(src)
		if n+offset > target {
			panic(g.rangeError("Source is too large"))
		}
		for i := int64(0); i < n; i++ {
			g.tick(i)
			v := nilSafe(src.Get(key(i)))
			throwing(o.Set(key(offset+i), v))
		}
		return goja.Undefined()
	}
}

// typedToReversed guards toReversed: the result is asked of the budget
// and filled a range at a time.
func (g *guards) typedToReversed(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o, kind, n, ok := g.typedReceiver(call)
		if !ok {
			return orig(call)
		}
		g.reserve(n * kind.size)
		a, err := kind.construct(kind.ctor, g.vm.ToValue(n))
		throwing(err)
		for start := int64(0); start < n; start += g.loop {
			g.checkpoint()
			c := min(g.loop, n-start)
			dst := g.view(a, kind, n-start-c, c)
			g.typed.set(goja.FunctionCall{This: dst, Arguments: []goja.Value{g.view(o, kind, start, c)}})
			g.typed.reverse(goja.FunctionCall{This: dst})
		}
		return a
	}
}

// typedWith guards with: a copy a range at a time, the one value made a
// number (or a BigInt) as goja's fill makes it.
func (g *guards) typedWith(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o, kind, n, ok := g.typedReceiver(call)
		if !ok {
			return orig(call)
		}
		rel := call.Argument(0).ToInteger()
		index := rel
		if rel < 0 {
			index = n + rel
		}
		if index < 0 || index >= n {
			return orig(goja.FunctionCall{This: o, Arguments: []goja.Value{g.vm.ToValue(rel), call.Argument(1)}})
		}
		scratch, err := kind.construct(kind.ctor, g.vm.ToValue(1))
		throwing(err)
		g.typed.fill(goja.FunctionCall{This: scratch, Arguments: []goja.Value{call.Argument(1)}})
		g.reserve(n * kind.size)
		a, err := kind.construct(kind.ctor, g.vm.ToValue(n))
		throwing(err)
		for start := int64(0); start < n; start += g.loop {
			g.checkpoint()
			c := min(g.loop, n-start)
			g.typed.set(goja.FunctionCall{This: g.view(a, kind, start, c), Arguments: []goja.Value{g.view(o, kind, start, c)}})
		}
		throwing(a.Set(key(index), scratch.Get("0")))
		return a
	}
}

// typedReserving asks the budget for the copy a method makes whole.
func (g *guards) typedReserving(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		if n, ok := g.typedLength(call.This); ok {
			if kind := g.typedKindOf(call.This); kind != nil {
				g.reserve(n * kind.size)
			}
		}
		return orig(call)
	}
}

// typedCallback is a typed array method's callback, goja's toCallable:
// its error comes from goja's method on an empty array of the kind.
func (g *guards) typedCallback(orig nativeFunc, kind *typedKind, call goja.FunctionCall) nativeFunc {
	if f, ok := callable(call.Argument(0)); ok {
		return f
	}
	empty, err := kind.construct(kind.ctor, g.vm.ToValue(0))
	throwing(err)
	orig(goja.FunctionCall{This: empty, Arguments: call.Arguments})
	g.s.breakRun()
	g.raise()
	return nil
}

// typedLooping wraps a method that calls back for each element.
func (g *guards) typedLooping(slow func(orig nativeFunc, o *goja.Object, kind *typedKind, n int64, call goja.FunctionCall) goja.Value) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			o, kind, n, ok := g.typedReceiver(call)
			if !ok {
				return orig(call)
			}
			return slow(orig, o, kind, n, call)
		}
	}
}

type eachKind int

const (
	eachForEach eachKind = iota
	eachEvery
	eachSome
	eachFind
	eachFindIndex
	eachFindLast
	eachFindLastIndex
)

// slowTypedEach is goja's forEach, every, some and the finds over a typed
// array: every element, in order (the finds' Last ones from the end).
func (g *guards) slowTypedEach(each eachKind) func(nativeFunc, *goja.Object, *typedKind, int64, goja.FunctionCall) goja.Value {
	return func(orig nativeFunc, o *goja.Object, kind *typedKind, n int64, call goja.FunctionCall) goja.Value {
		cb := g.typedCallback(orig, kind, call)
		fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, call.This}}
		k, step, end := int64(0), int64(1), n
		if each == eachFindLast || each == eachFindLastIndex {
			k, step, end = n-1, -1, -1
		}
		for i := int64(0); k != end; k, i = k+step, i+1 {
			g.tick(i)
			v := nilSafe(o.Get(key(k)))
			idx := g.vm.ToValue(k)
			fc.Arguments[0], fc.Arguments[1] = v, idx
			r := cb(fc)
			switch each {
			case eachEvery:
				if !r.ToBoolean() {
					return g.vm.ToValue(false)
				}
			case eachSome:
				if r.ToBoolean() {
					return g.vm.ToValue(true)
				}
			case eachFind, eachFindLast:
				if r.ToBoolean() {
					return v
				}
			case eachFindIndex, eachFindLastIndex:
				if r.ToBoolean() {
					return idx
				}
			}
		}
		switch each {
		case eachEvery:
			return g.vm.ToValue(true)
		case eachSome:
			return g.vm.ToValue(false)
		case eachFindIndex, eachFindLastIndex:
			return g.vm.ToValue(-1)
		}
		return goja.Undefined()
	}
}

// speciesTyped is goja's speciesConstructorObj for a typed array.
func (g *guards) speciesTyped(o *goja.Object, kind *typedKind) *goja.Object {
	c := o.Get("constructor")
	if c != nil && !goja.IsUndefined(c) {
		c = c.ToObject(g.vm).GetSymbol(goja.SymSpecies)
	}
	if c == nil || goja.IsUndefined(c) || goja.IsNull(c) {
		return kind.ctor
	}
	obj := c.ToObject(g.vm)
	if _, ok := goja.AssertConstructor(obj); !ok {
		panic(g.vm.NewTypeError("Value is not a constructor"))
	}
	return obj
}

// slowTypedMap is goja's map over a typed array.
func (g *guards) slowTypedMap(orig nativeFunc, o *goja.Object, kind *typedKind, n int64, call goja.FunctionCall) goja.Value {
	cb := g.typedCallback(orig, kind, call)
	fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, call.This}}
	c := g.speciesTyped(o, kind)
	if c == kind.ctor {
		g.reserve(n * kind.size)
	}
	dst := g.typedCreate(c, n)
	for k := int64(0); k < n; k++ {
		g.tick(k)
		fc.Arguments[0], fc.Arguments[1] = nilSafe(o.Get(key(k))), g.vm.ToValue(k)
		throwing(dst.Set(key(k), cb(fc)))
	}
	return dst
}

// typedFilter guards filter, whose goja allocates the whole length's
// bytes first: asked of the budget, and past guardLoop run here.
func (g *guards) typedFilter(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		n, isTyped := g.typedLength(call.This)
		kind := g.typedKindOf(call.This)
		if !isTyped || kind == nil {
			return orig(call)
		}
		g.reserve(n * kind.size)
		if n < g.loop {
			return orig(call)
		}
		o := call.This.(*goja.Object)
		cb := g.typedCallback(orig, kind, call)
		fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, call.This}}
		var kept []goja.Value
		for k := int64(0); k < n; k++ {
			g.tick(k)
			v := nilSafe(o.Get(key(k)))
			fc.Arguments[0], fc.Arguments[1] = v, g.vm.ToValue(k)
			if cb(fc).ToBoolean() {
				kept = append(kept, v)
			}
		}
		c := g.speciesTyped(o, kind)
		ret, err := kind.construct(kind.ctor, g.vm.ToValue(len(kept)))
		throwing(err)
		if c != kind.ctor {
			ret = g.typedCreate(c, int64(len(kept)))
		}
		for i, v := range kept {
			g.tick(int64(i))
			throwing(ret.Set(key(int64(i)), v))
		}
		return ret
	}
}

// slowTypedReduce is goja's reduce and reduceRight over a typed array.
func (g *guards) slowTypedReduce(right bool) func(nativeFunc, *goja.Object, *typedKind, int64, goja.FunctionCall) goja.Value {
	return func(orig nativeFunc, o *goja.Object, kind *typedKind, n int64, call goja.FunctionCall) goja.Value {
		cb := g.typedCallback(orig, kind, call)
		fc := goja.FunctionCall{This: goja.Undefined(), Arguments: []goja.Value{nil, nil, nil, call.This}}
		k, step, end := int64(0), int64(1), n
		if right {
			k, step, end = n-1, -1, -1
		}
		if len(call.Arguments) >= 2 {
			fc.Arguments[0] = call.Argument(1)
		} else {
			fc.Arguments[0] = nilSafe(o.Get(key(k)))
			k += step
		}
		for i := int64(0); k != end; k, i = k+step, i+1 {
			g.tick(i)
			fc.Arguments[1], fc.Arguments[2] = nilSafe(o.Get(key(k))), g.vm.ToValue(k)
			fc.Arguments[0] = cb(fc)
		}
		return fc.Arguments[0]
	}
}
