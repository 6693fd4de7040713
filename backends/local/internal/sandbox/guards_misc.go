package sandbox

import (
	"unicode/utf16"

	"github.com/dop251/goja"
)

// The remaining guards: the built-in iterators' next (which Go loops of
// goja's call, for spread, Array.from, new Set and the rest), JSON,
// argument lists built from array-likes, Object's lists of a string's
// properties, and the URI encoders.

func (g *guards) installMisc() error {
	if err := g.installIterators(); err != nil {
		return err
	}
	// JSON and Reflect are guarded when goja builds them (any read or
	// write of the global does first; nothing else reaches them).
	err := g.deferGlobal("JSON", func(json *goja.Object) error {
		if err := g.method(json, "stringify", g.jsonStringify); err != nil {
			return err
		}
		return g.method(json, "parse", g.jsonParse)
	})
	if err != nil {
		return err
	}
	fnProto := g.global("Function").Get("prototype").(*goja.Object)
	if err := g.method(fnProto, "apply", g.functionApply); err != nil {
		return err
	}
	if err := g.deferGlobal("Reflect", g.installReflect); err != nil {
		return err
	}
	object := g.global("Object")
	for name, wrap := range map[string]func(nativeFunc) nativeFunc{
		"keys":                      g.stringKeys(keysOnly),
		"values":                    g.stringKeys(valuesOnly),
		"entries":                   g.stringKeys(entries),
		"getOwnPropertyNames":       g.stringKeys(ownNames),
		"getOwnPropertyDescriptors": g.stringKeys(descriptors),
		"assign":                    g.objectAssign,
		"freeze":                    g.keysReserving,
	} {
		if err := g.method(object, name, wrap); err != nil {
			return err
		}
	}
	global := g.vm.GlobalObject()
	for name, wrap := range map[string]func(nativeFunc) nativeFunc{
		"encodeURI":          g.uriEncoding(true),
		"encodeURIComponent": g.uriEncoding(true),
		"escape":             g.uriEncoding(false),
	} {
		if err := g.method(global, name, wrap); err != nil {
			return err
		}
	}
	return nil
}

// installReflect captures Reflect.has and Reflect.get for the guards'
// own use and guards Reflect.apply, construct and ownKeys.
func (g *guards) installReflect(reflect *goja.Object) error {
	g.reflectHas, _ = goja.AssertFunction(reflect.Get("has"))
	g.reflectGet, _ = goja.AssertFunction(reflect.Get("get"))
	if g.reflectHas == nil || g.reflectGet == nil {
		return errNotBuiltin("Reflect.has")
	}
	if err := g.method(reflect, "apply", g.reflectApply); err != nil {
		return err
	}
	if err := g.method(reflect, "construct", g.reflectConstruct); err != nil {
		return err
	}
	return g.method(reflect, "ownKeys", g.keysReserving)
}

// installIterators guards the next of goja's built-in iterators: spread,
// destructuring, Array.from, new Set and Map, Promise.all and the other
// iterating built-ins call it from one Go loop, so it looks at the
// interrupt (every call, for a flag; every guardStride calls, the run's
// context). The array iterator is guarded at once (any for-of over an
// array, the bootstrap's among them, builds it); the string iterator when
// goja builds String.prototype[Symbol.iterator], the only maker of string
// iterators (deferSymbol); the Map and Set iterators when goja builds Map
// or Set (deferGlobal), the RegExp string iterator when
// RegExp.prototype[Symbol.matchAll] first makes one: making them up front
// would cost every prepared runtime those families' objects and a regular
// expression's compilation.
func (g *guards) installIterators() error {
	if err := g.guardIteratorOf(g.arrayProto.GetSymbol(goja.SymIterator), g.vm.NewArray()); err != nil {
		return err
	}
	stringProto := g.global("String").Get("prototype").(*goja.Object)
	guardStrings := func(iter goja.Value) error { return g.guardIteratorOf(iter, g.vm.ToValue("")) }
	if !g.deferSymbol(stringProto, goja.SymIterator, func(v goja.Value) { throwing(guardStrings(functionOfProp(v))) }) {
		if err := guardStrings(stringProto.GetSymbol(goja.SymIterator)); err != nil {
			return err
		}
	}
	for _, name := range []string{"Map", "Set"} {
		err := g.deferGlobal(name, func(ctor *goja.Object) error {
			o, err := g.vm.New(ctor)
			if err != nil {
				return err
			}
			it, err := g.callValue(o.GetSymbol(goja.SymIterator).(*goja.Object), o)
			if err != nil {
				return err
			}
			return g.guardNext(it.(*goja.Object).Prototype())
		})
		if err != nil {
			return err
		}
	}
	return g.guardMatchAll()
}

// guardIteratorOf guards the next method of the iterators that iter (an
// iterator method) makes, called on this.
func (g *guards) guardIteratorOf(iter, this goja.Value) error {
	fn, ok := iter.(*goja.Object)
	if !ok {
		return errNotBuiltin("an iterator method")
	}
	it, err := g.callValue(fn, this)
	if err != nil {
		return err
	}
	o, ok := it.(*goja.Object)
	if !ok || o.Prototype() == nil {
		return errNotBuiltin("an iterator")
	}
	return g.guardNext(o.Prototype())
}

// guardNext guards the next method of the built-in iterator prototype
// proto.
func (g *guards) guardNext(proto *goja.Object) error {
	return g.method(proto, "next", func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			if g.s.halted() {
				g.raise()
			}
			if g.iterCalls++; g.iterCalls%guardStride == 0 {
				g.checkpoint()
			}
			return orig(call)
		}
	})
}

// guardMatchAll guards the RegExp string iterator the first time
// RegExp.prototype[Symbol.matchAll] (which String.prototype.matchAll
// calls) makes one, before anything can step it.
func (g *guards) guardMatchAll() error {
	proto := g.global("RegExp").Get("prototype").(*goja.Object)
	orig, ok := proto.GetSymbol(goja.SymMatchAll).(*goja.Object)
	if !ok {
		return errNotBuiltin("RegExp.prototype[Symbol.matchAll]")
	}
	f, ok := orig.Export().(nativeFunc)
	if !ok {
		return errNotBuiltin("RegExp.prototype[Symbol.matchAll]")
	}
	guarded := false
	guard := func(call goja.FunctionCall) goja.Value {
		v := f(call)
		if it, isObj := v.(*goja.Object); isObj && !guarded {
			guarded = true
			throwing(g.guardNext(it.Prototype()))
		}
		return v
	}
	if swapNative(orig, g.contained(guard)) {
		return nil
	}
	w := g.native(orig.Get("name").String(), orig.Get("length"), guard)
	return proto.DefineDataPropertySymbol(goja.SymMatchAll, w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// jsonStringify guards JSON.stringify, which walks its whole value in one
// call: a replacer of the guard's, called for every value goja serializes
// (the program's own replacer inside it, or none), looks at the
// interrupt. A replacer array (a property list, which a function cannot
// stand for) is read here, a name at a time, and handed to goja as a
// plain array of its names.
func (g *guards) jsonStringify(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		replacer := call.Argument(1)
		var inner nativeFunc
		if r, ok := replacer.(*goja.Object); ok {
			if g.isArrayValue(r) {
				args := append([]goja.Value{call.Argument(0), g.propertyList(r)}, call.Arguments[min(2, len(call.Arguments)):]...)
				return orig(goja.FunctionCall{This: call.This, Arguments: args})
			}
			inner, _ = callable(r)
		}
		if g.replacer == nil {
			calls := int64(0)
			g.replacer = g.vm.ToValue(func(c goja.FunctionCall) goja.Value {
				if g.s.halted() {
					g.raise()
				}
				if calls++; calls%guardStride == 0 {
					g.checkpoint()
				}
				if inner := g.replacers[len(g.replacers)-1]; inner != nil {
					return inner(c)
				}
				return c.Argument(1)
			})
		}
		// A toJSON can stringify again, inside: the replacer in use is
		// the innermost call's.
		g.replacers = append(g.replacers, inner)
		defer func() { g.replacers = g.replacers[:len(g.replacers)-1] }()
		args := []goja.Value{call.Argument(0), g.replacer}
		if len(call.Arguments) > 2 {
			args = append(args, call.Arguments[2:]...)
		}
		return orig(goja.FunctionCall{This: call.This, Arguments: args})
	}
}

// propertyList is goja's reading of a replacer array into its property
// list: names of strings, numbers and their wrapper objects, once each.
func (g *guards) propertyList(r *goja.Object) *goja.Object {
	n := lengthOf(r)
	seen := map[string]bool{}
	var names []any
	for i := int64(0); i < n; i++ {
		g.tick(i)
		v := r.Get(key(i))
		var name string
		switch x := v.(type) {
		case goja.String:
			name = x.String()
		case *goja.Object:
			if c := x.ClassName(); c != "Number" && c != "String" {
				continue
			}
			name = x.String()
		default:
			if v == nil || !goja.IsNumber(v) {
				continue
			}
			name = v.String()
		}
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return g.vm.NewArray(names...)
}

// What goja's JSON.parse takes a piece of its input to, measured: an
// array 611 bytes, an object 227 and 190 a member, a number 19 to 35, a
// string 40 and its text. The estimate stays a little below.
const (
	jsonArrayBytes  = 512
	jsonObjectBytes = 192
	jsonMemberBytes = 160
	jsonValueBytes  = 16
	jsonStringBytes = 32
)

// jsonParse guards JSON.parse: goja parses the whole text in one call, to
// values that take up to 200 times the text ("[[],[],…]"). The guard
// estimates their size from the text and asks the budget first.
func (g *guards) jsonParse(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		text := g.toStr(call.Argument(0))
		args := append([]goja.Value{text}, call.Arguments[min(1, len(call.Arguments)):]...)
		if text.Length() >= 4096 {
			g.reserve(g.jsonEstimate(g.utf8Of(text)))
		}
		return orig(goja.FunctionCall{This: call.This, Arguments: args})
	}
}

// jsonEstimate is the heap goja's parse of text takes, about.
func (g *guards) jsonEstimate(text string) int64 {
	var n int64
	for i := 0; i < len(text); i++ {
		if i%g.strStride == 0 {
			g.checkpoint()
		}
		switch text[i] {
		case '[':
			n += jsonArrayBytes
		case '{':
			n += jsonObjectBytes
		case ':':
			n += jsonMemberBytes
		case ',':
			n += jsonValueBytes
		case '"':
			start := i
			for i++; i < len(text) && text[i] != '"'; i++ {
				if text[i] == '\\' {
					i++
				}
			}
			n += jsonStringBytes + int64(i-start)
		}
	}
	return n
}

// argumentList is goja's CreateListFromArrayLike of v, built here with a
// look at the interrupt, as a plain array goja hands on as it is: past
// guardSlowLoop elements of an array-like (goja allocates the whole list
// at once, then reads an index at a time, about a microsecond each).
// small is true when goja's own may build it.
func (g *guards) argumentList(v goja.Value) (list goja.Value, small bool) {
	o, ok := v.(*goja.Object)
	if !ok {
		return v, true
	}
	if _, dense := denseArray(o); dense {
		return v, true
	}
	if n, quiet := g.quietLength(o); quiet && n < g.slowLoop {
		return v, true
	}
	n := lengthOf(o)
	g.reserve(n * valueBytes)
	items := make([]any, 0, n)
	for k := int64(0); k < n; k++ {
		g.tick(k)
		items = append(items, nilSafe(o.Get(key(k))))
	}
	return g.vm.NewArray(items...), false
}

// functionApply guards Function.prototype.apply.
func (g *guards) functionApply(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		a := call.Argument(1)
		if goja.IsUndefined(a) || goja.IsNull(a) {
			return orig(call)
		}
		list, _ := g.argumentList(a)
		return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{call.Argument(0), list}})
	}
}

// reflectApply guards Reflect.apply, which checks its target first.
func (g *guards) reflectApply(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		if _, ok := callable(call.Argument(0)); !ok {
			return orig(call)
		}
		list, _ := g.argumentList(call.Argument(2))
		return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{call.Argument(0), call.Argument(1), list}})
	}
}

// reflectConstruct guards Reflect.construct, which checks its target and
// new.target first.
func (g *guards) reflectConstruct(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		isCtor := func(v goja.Value) bool {
			o, ok := v.(*goja.Object)
			if !ok {
				return false
			}
			_, ok = goja.AssertConstructor(o)
			return ok
		}
		if !isCtor(call.Argument(0)) || len(call.Arguments) > 2 && !isCtor(call.Argument(2)) {
			return orig(call)
		}
		list, _ := g.argumentList(call.Argument(1))
		args := []goja.Value{call.Argument(0), list}
		if len(call.Arguments) > 2 {
			args = append(args, call.Argument(2))
		}
		return orig(goja.FunctionCall{This: call.This, Arguments: args})
	}
}

// keyBytes is what a property key in a list takes: the interface value,
// the string header it points to and the digits.
const keyBytes = 48

// keysReserving asks the budget for the list of keys of a dense array or
// a typed array (one a key, goja's lists hold, or its freeze makes one
// property record an element).
func (g *guards) keysReserving(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		if o, ok := call.Argument(0).(*goja.Object); ok {
			if n, dense := denseArray(o); dense {
				g.reserve(n * keyBytes)
			} else if n, typed := g.typedLength(o); typed {
				g.reserve(n * keyBytes)
			}
		}
		return orig(call)
	}
}

type keyList int

const (
	keysOnly keyList = iota
	valuesOnly
	entries
	ownNames
	descriptors
)

// What a list of a string's properties takes an element, measured in the
// probe: a key 48 bytes, a value (one character) as much, an entry (an
// array of two) 600, a descriptor object 700.
var keyListBytes = map[keyList]int64{keysOnly: keyBytes, valuesOnly: keyBytes, entries: 600, ownNames: keyBytes, descriptors: 700}

// stringKeys guards Object.keys, values, entries, getOwnPropertyNames and
// getOwnPropertyDescriptors: of a string, goja lists a property a
// character (0.5 to 3.6 µs each). A string's list is asked of the budget,
// and past guardLoop characters made here; a dense or typed array's is
// asked of the budget.
func (g *guards) stringKeys(list keyList) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			s, ok := call.Argument(0).(goja.String)
			if !ok {
				if o, isObj := call.Argument(0).(*goja.Object); isObj {
					if n, dense := denseArray(o); dense {
						g.reserve(n * keyListBytes[list])
					} else if n, typed := g.typedLength(o); typed {
						g.reserve(n * keyListBytes[list])
					} else if o.ClassName() == "String" {
						if n, quiet := g.quietLength(o); quiet {
							g.reserve(n * keyListBytes[list])
						}
					}
				}
				return orig(call)
			}
			n := int64(s.Length())
			g.reserve(n * keyListBytes[list])
			if n < g.loop {
				return orig(call)
			}
			items := make([]any, 0, n+1)
			for i := int64(0); i < n; i++ {
				g.tick(i)
				switch list {
				case keysOnly, ownNames:
					items = append(items, key(i))
				case valuesOnly:
					items = append(items, s.Substring(int(i), int(i+1)))
				case entries:
					items = append(items, g.vm.NewArray(key(i), s.Substring(int(i), int(i+1))))
				}
			}
			switch list {
			case ownNames:
				items = append(items, "length")
			case descriptors:
				return g.stringDescriptors(s)
			}
			return g.vm.NewArray(items...)
		}
	}
}

// stringDescriptors is Object.getOwnPropertyDescriptors of a string.
func (g *guards) stringDescriptors(s goja.String) goja.Value {
	out := g.vm.NewObject()
	desc := func(v goja.Value, enumerable bool) *goja.Object {
		d := g.vm.NewObject()
		throwing(d.Set("value", v))
		throwing(d.Set("writable", false))
		throwing(d.Set("enumerable", enumerable))
		throwing(d.Set("configurable", false))
		return d
	}
	n := s.Length()
	for i := 0; i < n; i++ {
		g.tick(int64(i))
		define(out, int64(i), desc(s.Substring(i, i+1), true))
	}
	throwing(out.DefineDataProperty("length", desc(g.vm.ToValue(n), false), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE))
	return out
}

// objectAssign guards Object.assign, which sets a property a character of
// a string source (2.6 µs each): such a source is copied here, the others
// by goja, source by source.
func (g *guards) objectAssign(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		large := false
		for _, a := range call.Arguments[min(1, len(call.Arguments)):] {
			if s, ok := a.(goja.String); ok && int64(s.Length()) >= g.loop {
				large = true
			}
		}
		if !large {
			return orig(call)
		}
		to := call.Argument(0).ToObject(g.vm)
		for _, a := range call.Arguments[1:] {
			s, ok := a.(goja.String)
			if !ok || int64(s.Length()) < g.loop {
				orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{to, a}})
				continue
			}
			for i, n := 0, s.Length(); i < n; i++ {
				g.tick(int64(i))
				throwing(to.Set(key(int64(i)), s.Substring(i, i+1)))
			}
		}
		return to
	}
}

// uriEncoding guards encodeURI, encodeURIComponent and escape: goja
// encodes the whole string in one call (up to nine characters for one);
// the guard encodes it a piece at a time, never between the halves of a
// surrogate pair (encode: which would then be malformed).
func (g *guards) uriEncoding(pairs bool) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			s := g.toStr(call.Argument(0))
			n := s.Length()
			if int64(n) < g.strNative {
				return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{s}})
			}
			b := &builder{g: g}
			for i := 0; i < n; {
				end := min(i+g.strStride, n)
				if pairs && end < n && utf16.IsSurrogate(rune(s.CharAt(end-1))) && s.CharAt(end-1) < 0xdc00 {
					end++
				}
				b.write(orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{s.Substring(i, end)}}).(goja.String))
				b.check()
				i = end
			}
			return b.b.String()
		}
	}
}
