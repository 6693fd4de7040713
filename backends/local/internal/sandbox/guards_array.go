package sandbox

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"

	"github.com/dop251/goja"
)

// Array guards. Every Array.prototype method that loops to a length (and
// Array.from) calls goja's own method when the length reads quietly and is
// below guardLoop, or when the array is dense (goja's own fast paths copy
// or scan its values, bounded by its memory) and below denseNative;
// anything else runs an interruptible Go loop that repeats goja's generic
// path read for read: the same property reads, HasProperty checks, calls
// and writes in the same order, so that getters, proxies and callbacks
// see what goja shows them.

// denseNative bounds the dense arrays whose methods goja runs in one call:
// its fast paths copy or compare about an element a nanosecond, so 2^22
// elements take a few milliseconds.
const denseNative = 1 << 22

// arrayLayout locates the fields of goja's array object that tell a dense
// array (its checkStdArrayObj: no accessor, no hole), read by reflection
// without running anything. Should a goja upgrade rename them, ok is
// false and every array takes the guarded paths by its length alone.
var arrayLayout = func() (l struct {
	ok                                    bool
	self, values, length, objCount, props []int
	typ                                   reflect.Type
}) {
	arr := goja.New().NewArray(1)
	self, ok := reflect.TypeOf(arr).Elem().FieldByName("self")
	if !ok {
		return l
	}
	impl := reflect.ValueOf(arr).Elem().FieldByIndex(self.Index)
	if impl.Kind() != reflect.Interface || impl.IsNil() || impl.Elem().Kind() != reflect.Pointer {
		return l
	}
	typ := impl.Elem().Type()
	field := func(name string, kind reflect.Kind) []int {
		f, found := typ.Elem().FieldByName(name)
		if !found || f.Type.Kind() != kind {
			return nil
		}
		return f.Index
	}
	l.values, l.length = field("values", reflect.Slice), field("length", reflect.Uint32)
	l.objCount, l.props = field("objCount", reflect.Int), field("propValueCount", reflect.Int)
	l.self, l.typ = self.Index, typ
	l.ok = l.values != nil && l.length != nil && l.objCount != nil && l.props != nil
	return l
}()

// arrayLength is the length of o when it is one of goja's arrays (dense or
// not), read from its field: what Get(o, "length") gives, without the
// lookup.
func arrayLength(o *goja.Object) (int64, bool) {
	if !arrayLayout.ok {
		return 0, false
	}
	impl := reflect.ValueOf(o).Elem().FieldByIndex(arrayLayout.self)
	if impl.IsNil() || impl.Elem().Type() != arrayLayout.typ {
		return 0, false
	}
	return int64(impl.Elem().Elem().FieldByIndex(arrayLayout.length).Uint()), true
}

// denseArray reports whether o is one of goja's dense arrays (every index
// below its length an own data property), and its length.
func denseArray(o *goja.Object) (int64, bool) {
	if !arrayLayout.ok {
		return 0, false
	}
	impl := reflect.ValueOf(o).Elem().FieldByIndex(arrayLayout.self)
	if impl.IsNil() || impl.Elem().Type() != arrayLayout.typ {
		return 0, false
	}
	a := impl.Elem().Elem()
	n := a.FieldByIndex(arrayLayout.length).Uint()
	dense := a.FieldByIndex(arrayLayout.props).Int() == 0 &&
		uint64(a.FieldByIndex(arrayLayout.values).Len()) == n &&
		uint64(a.FieldByIndex(arrayLayout.objCount).Int()) == n
	return int64(n), dense
}

func (g *guards) installArrays() error {
	p := g.arrayProto
	for name, wrap := range map[string]func(nativeFunc) nativeFunc{
		"join":           g.arrayJoin,
		"toLocaleString": g.arrayToLocaleString,
		"fill":           g.arrayFill,
		"slice":          g.arraySlice,
		"splice":         g.arraySplice,
		"concat":         g.arrayConcat,
		"indexOf":        func(o nativeFunc) nativeFunc { return g.cheap(o, false, g.slowIndexOf) },
		"lastIndexOf":    func(o nativeFunc) nativeFunc { return g.cheap(o, false, g.slowLastIndexOf) },
		"includes":       func(o nativeFunc) nativeFunc { return g.cheap(o, false, g.slowIncludes) },
		"every":          func(o nativeFunc) nativeFunc { return g.looping(o, g.slowEvery(false)) },
		"some":           func(o nativeFunc) nativeFunc { return g.looping(o, g.slowEvery(true)) },
		"forEach":        func(o nativeFunc) nativeFunc { return g.looping(o, g.slowForEach) },
		"map":            func(o nativeFunc) nativeFunc { return g.mapping(o) },
		"filter":         func(o nativeFunc) nativeFunc { return g.looping(o, g.slowFilter) },
		"reduce":         func(o nativeFunc) nativeFunc { return g.looping(o, g.slowReduce(false)) },
		"reduceRight":    func(o nativeFunc) nativeFunc { return g.looping(o, g.slowReduce(true)) },
		"find":           func(o nativeFunc) nativeFunc { return g.looping(o, g.slowFind(false, false)) },
		"findIndex":      func(o nativeFunc) nativeFunc { return g.looping(o, g.slowFind(true, false)) },
		"findLast":       func(o nativeFunc) nativeFunc { return g.looping(o, g.slowFind(false, true)) },
		"findLastIndex":  func(o nativeFunc) nativeFunc { return g.looping(o, g.slowFind(true, true)) },
		"flat":           g.arrayFlat(false),
		"flatMap":        g.arrayFlat(true),
		"sort":           g.arraySort,
		"reverse":        func(o nativeFunc) nativeFunc { return g.cheap(o, false, g.slowReverse) },
		"copyWithin":     g.arrayCopyWithin,
		"shift":          func(o nativeFunc) nativeFunc { return g.cheap(o, true, g.slowShift) },
		"unshift":        func(o nativeFunc) nativeFunc { return g.cheap(o, true, g.slowUnshift) },
		"toReversed":     func(o nativeFunc) nativeFunc { return g.copying(o, g.slowToReversed) },
		"toSorted":       g.arrayToSorted,
		"toSpliced":      g.arrayToSpliced,
		"with":           g.arrayWith,
	} {
		if err := g.method(p, name, wrap); err != nil {
			return err
		}
	}
	return g.method(g.arrayCtor, "from", g.arrayFrom)
}

// elems reads and writes the indices of an array-like object the way
// goja's generic paths do, with errors thrown as goja throws them.
type elems struct {
	g *guards
	o *goja.Object
	// clean: o is an Array whose prototype chain is Array.prototype and
	// Object.prototype, neither with an index property, so that
	// HasProperty(o, k) is Get(o, k) finding something, without a second
	// look (which only a trap or an accessor could tell apart).
	clean bool
}

func (g *guards) elems(o *goja.Object) *elems {
	return &elems{g: g, o: o, clean: g.cleanArray(o)}
}

// cleanArray reports whether o is an Array over the untouched intrinsic
// prototype chain.
func (g *guards) cleanArray(o *goja.Object) bool {
	return g.arrayOverProtos(o) && g.cleanProtos()
}

// arrayOverProtos reports whether o is an Array whose prototype is
// Array.prototype.
func (g *guards) arrayOverProtos(o *goja.Object) bool {
	return !isProxy(o) && o.ClassName() == "Array" && o.Prototype() == g.arrayProto
}

// cleanProtos reports whether Array.prototype and Object.prototype are
// chained as made and hold no index property.
func (g *guards) cleanProtos() bool {
	return g.arrayProto.Prototype() == g.objectProto && g.objectProto.Prototype() == nil &&
		!hasIndexKey(g.arrayProto) && !hasIndexKey(g.objectProto)
}

// hasIndexKey reports whether o has an own property named by digits.
func hasIndexKey(o *goja.Object) bool {
	for _, k := range o.GetOwnPropertyNames() {
		if k != "" && k[0] >= '0' && k[0] <= '9' {
			return true
		}
	}
	return false
}

// get is goja's getIdx: nil when no object on the chain has k.
func (e *elems) get(k int64) goja.Value { return e.o.Get(key(k)) }

// hasGet is HasProperty(o, k), then Get(o, k) when it holds.
func (e *elems) hasGet(k int64) (goja.Value, bool) {
	if e.clean {
		v := e.o.Get(key(k))
		return v, v != nil
	}
	has, _ := e.g.reflectOps()
	ok, err := has(goja.Undefined(), e.o, e.g.vm.ToValue(key(k)))
	throwing(err)
	if !ok.ToBoolean() {
		return nil, false
	}
	return nilSafe(e.o.Get(key(k))), true
}

func (e *elems) set(k int64, v goja.Value) { throwing(e.o.Set(key(k), v)) }
func (e *elems) del(k int64)               { throwing(e.o.Delete(key(k))) }

// define is CreateDataPropertyOrThrow(o, k, v).
func define(o *goja.Object, k int64, v goja.Value) {
	throwing(o.DefineDataProperty(key(k), v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE))
}

// nilSafe is goja's: an absent value reads as undefined.
func nilSafe(v goja.Value) goja.Value {
	if v == nil {
		return goja.Undefined()
	}
	return v
}

// lengthOf is goja's ToLength(Get(o, "length")), read once.
func lengthOf(o *goja.Object) int64 { return toLength(o.Get("length")) }

// tick looks at the interrupt every guardStride steps of a loop.
func (g *guards) tick(i int64) {
	if i%guardStride == 0 {
		g.checkpoint()
	}
}

// isArray is Array.isArray.
func (g *guards) isArrayValue(v goja.Value) bool {
	r, err := g.isArray(goja.Undefined(), v)
	throwing(err)
	return r.ToBoolean()
}

// speciesCreate is goja's arraySpeciesCreate(o, size).
func (g *guards) speciesCreate(o *goja.Object, size int64) *goja.Object {
	if g.isArrayValue(o) {
		v := o.Get("constructor")
		if c, ok := v.(*goja.Object); ok {
			v = c.GetSymbol(goja.SymSpecies)
			if v != nil && goja.IsNull(v) {
				v = nil
			}
		}
		if v != nil && !goja.IsUndefined(v) {
			if c, ok := v.(*goja.Object); ok {
				if ctor, ok := goja.AssertConstructor(c); ok {
					a, err := ctor(nil, g.vm.ToValue(size))
					throwing(err)
					return a
				}
			}
			panic(g.vm.NewTypeError("Species is not a constructor"))
		}
	}
	return g.newArrayLength(size)
}

// newArrayLength is goja's new Array of a length.
func (g *guards) newArrayLength(n int64) *goja.Object {
	a := g.vm.NewArray()
	throwing(a.Set("length", n))
	return a
}

// receiverOf is goja's ToObject of a method's receiver.
func (g *guards) receiverOf(this goja.Value) *goja.Object { return this.ToObject(g.vm) }

// slowPath is a guard's own run of a method: goja's generic path, read
// for read.
type slowPath func(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value

// small reports whether goja's own method may take o: a quiet length
// below limit or, when dense counts, a dense array below denseNative
// (whose prototypes must be the clean intrinsics when protos is set:
// goja's fast path of shift and unshift asks that too).
func (g *guards) small(o *goja.Object, limit int64, dense, protos bool) bool {
	if n, quiet := g.quietLength(o); quiet && n < limit {
		return true
	}
	if dense {
		if n, ok := denseArray(o); ok && n < g.dense && (!protos || g.cleanArray(o)) {
			return true
		}
	}
	return false
}

// cheap wraps a method whose native loop is cheap on a dense array.
func (g *guards) cheap(orig nativeFunc, protos bool, slow slowPath) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if g.small(o, g.loop, true, protos) {
			return orig(call)
		}
		return slow(orig, o, call)
	}
}

// looping wraps a method that calls back for each element: a native
// callback (or holes, which call nothing) leaves goja's loop without an
// instruction to interrupt, whatever the array.
func (g *guards) looping(orig nativeFunc, slow slowPath) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if g.small(o, g.loop, false, false) || g.scriptOverDense(o, call.Argument(0)) {
			return orig(call)
		}
		return slow(orig, o, call)
	}
}

// scriptOverDense reports whether goja's own loop over o calls back into
// JavaScript at every element: o is a dense array (no hole to skip) below
// denseNative, and the callback is written in JavaScript.
func (g *guards) scriptOverDense(o *goja.Object, callback goja.Value) bool {
	n, dense := denseArray(o)
	return dense && n < g.dense && isScriptFunction(callback)
}

// callback is a method's callback (its first argument) as goja's check
// finds it; when it is not callable, the original throws its own error on
// an empty array (it fails the same way, and before anything else).
func (g *guards) callback(orig nativeFunc, call goja.FunctionCall) nativeFunc {
	if f, ok := callable(call.Argument(0)); ok {
		return f
	}
	orig(goja.FunctionCall{This: g.vm.NewArray(), Arguments: call.Arguments})
	g.s.breakRun()
	g.raise()
	return nil
}

// joining reports whether o's join is in progress, and else records it.
func (g *guards) joining(o *goja.Object) bool {
	for _, p := range g.joinStack {
		if p == o {
			return true
		}
	}
	g.joinStack = append(g.joinStack, o)
	return false
}

func (g *guards) joined() {
	g.joinStack[len(g.joinStack)-1] = nil
	g.joinStack = g.joinStack[:len(g.joinStack)-1]
}

// builder is a string result that grows under the budget: a piece that
// takes it past what was granted asks for more before it is written, and
// every megabyte written looks at the interrupt.
type builder struct {
	g       *guards
	b       goja.StringBuilder
	units   int64
	wide    bool
	meter   growth
	pending int64
	// room is the units the buffer holds without growing (at least):
	// it grows by doubling, so that a large result is copied about once
	// (appends grow a large buffer by a quarter, five copies in all).
	room int64
}

func (b *builder) write(s goja.String) {
	n := int64(s.Length())
	if !b.wide && n > 0 && !isASCII(s) {
		b.wide = true
	}
	if size := (b.units + n) * unitBytes(!b.wide); size > b.meter.reserved {
		b.g.grow(&b.meter, size)
	}
	if b.pending += n; b.pending >= 1<<20 {
		b.pending = 0
		b.g.checkpoint()
	}
	if b.units+n > b.room && b.units+n > 1<<16 {
		extra := max(b.units, n)
		b.b.Grow(int(extra))
		b.room = b.units + extra
	}
	b.b.WriteString(s)
	b.units += n
}

// check looks at the interrupt.
func (b *builder) check() { b.g.checkpoint() }

// arrayJoin is Array.prototype.join. Its result's size is not bounded by
// its length (one large string, many times): goja joins a dense array of
// primitives, whose size a look at its elements tells, and anything else
// is joined in Go, its builder metered at any length. A cycle joins to ""
// as in goja.
func (g *guards) arrayJoin(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if g.joining(o) {
			return g.vm.ToValue("")
		}
		defer g.joined()
		l := lengthOf(o)
		var sep goja.String = g.vm.ToValue(",").(goja.String)
		if s := call.Argument(0); !goja.IsUndefined(s) {
			sep = g.toStr(s)
		}
		if l == 0 {
			return g.vm.ToValue("")
		}
		if units, strUnits, ascii, ok := g.primitivesSize(o, l); ok {
			seps := (l - 1) * int64(sep.Length())
			units += seps
			wide := !ascii || !isASCII(sep)
			size := units * unitBytes(!wide)
			if size >= reserveFloor {
				// A large result is built here, at its size: goja's join
				// grows its buffer by appending, so that it would hold
				// about twice the result at its peak.
				g.reserve(size)
				return g.joinPrimitives(o, l, sep, strUnits+seps, wide)
			}
			// goja reads the length again (an array's: quiet) and joins
			// on its own stack, which holds o only while it joins.
			g.joined()
			defer func() { g.joinStack = append(g.joinStack, o) }()
			return orig(goja.FunctionCall{This: o, Arguments: []goja.Value{sep}})
		}
		b := &builder{g: g}
		// The separators alone take (l-1) of them.
		if sl := int64(sep.Length()); sl > 0 {
			if l-1 > math.MaxInt64/(2*sl) {
				g.reserve(math.MaxInt64)
			}
			g.grow(&b.meter, (l-1)*sl*unitBytes(isASCII(sep)))
		}
		g.joinInto(o, l, sep, b.write)
		return b.b.String()
	}
}

// primitivesSize is the units the elements of o, a dense array of n
// primitives below denseNative, take as strings (at most), the units its
// strings take (exactly), and whether its strings are all ASCII; ok is
// false for any other o (their reads are quiet: a dense array has no
// accessor).
func (g *guards) primitivesSize(o *goja.Object, n int64) (units, strUnits int64, ascii, ok bool) {
	if m, dense := denseArray(o); !dense || m != n || n >= g.dense {
		return 0, 0, false, false
	}
	ascii = true
	for i := int64(0); i < n; i++ {
		g.tick(i)
		switch v := o.Get(key(i)).(type) {
		case goja.String:
			strUnits += int64(v.Length())
			ascii = ascii && isASCII(v)
		case *goja.Object, *goja.Symbol:
			return 0, 0, false, false
		default:
			if goja.IsBigInt(v) {
				return 0, 0, false, false
			}
			units += 24 // the longest number: -1.7976931348623157e+308
		}
	}
	return units + strUnits, strUnits, ascii, true
}

// joinPrimitives joins o, a dense array of n primitives, as goja's join
// does, in a buffer made for known units at once (its strings and
// separators: what numbers and the like take grows it as they come, so
// that a result is never held in a buffer larger than it); wide is set
// when a part is not ASCII.
func (g *guards) joinPrimitives(o *goja.Object, n int64, sep goja.String, known int64, wide bool) goja.Value {
	var b goja.StringBuilder
	if wide {
		b.LikelyUnicode(int(known))
	} else {
		b.Grow(int(known))
	}
	g.joinInto(o, n, sep, b.WriteString)
	return b.String()
}

// joinInto writes o's first n elements as join does, with sep between them
// and nothing for undefined and null, looking at the interrupt every
// guardStride elements.
func (g *guards) joinInto(o *goja.Object, n int64, sep goja.String, write func(goja.String)) {
	for i := int64(0); i < n; i++ {
		if i%guardStride == 0 {
			g.checkpoint()
		}
		if i > 0 {
			write(sep)
		}
		if e := o.Get(key(i)); e != nil && !goja.IsUndefined(e) && !goja.IsNull(e) {
			write(g.toStr(e))
		}
	}
}

// arrayToLocaleString is Array.prototype.toLocaleString, in Go as join is.
func (g *guards) arrayToLocaleString(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if g.joining(o) {
			return g.vm.ToValue("")
		}
		defer g.joined()
		l := lengthOf(o)
		b := &builder{g: g}
		comma := g.vm.ToValue(",").(goja.String)
		for i := int64(0); i < l; i++ {
			if i%guardStride == 0 {
				b.check()
			}
			if i > 0 {
				b.write(comma)
			}
			item := o.Get(key(i))
			if item == nil || goja.IsUndefined(item) || goja.IsNull(item) {
				continue
			}
			// goja reads the method with the item itself as receiver.
			_, get := g.reflectOps()
			f, err := get(goja.Undefined(), item.ToObject(g.vm), g.vm.ToValue("toLocaleString"), item)
			throwing(err)
			c, ok := callable(f)
			if !ok {
				panic(g.vm.NewTypeError(fmt.Sprintf("Property 'toLocaleString' of object %s is not a function", item.String())))
			}
			b.write(g.toStr(c(goja.FunctionCall{This: item})))
		}
		return b.b.String()
	}
}

// relArgs are a method's start and end arguments, ToInteger'd in order
// (end absent or undefined: the length) and made absolute.
func relArgs(start, end goja.Value, l int64) (int64, int64) {
	k := relIndex(start.ToInteger(), l)
	relEnd := l
	if !goja.IsUndefined(end) {
		relEnd = end.ToInteger()
	}
	return k, relIndex(relEnd, l)
}

// arrayFill is Array.prototype.fill: goja sets about an element a
// microsecond over holes or an array-like (54 s for new Array(5e7)). A
// quiet receiver is filled by goja in ranges of guardSlowLoop, as long as
// its length reads the same between them; anything else is set here.
func (g *guards) arrayFill(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		n, quiet := g.quietLength(o)
		if !quiet {
			l := lengthOf(o)
			k, final := relArgs(call.Argument(1), call.Argument(2), l)
			g.reserve(max(final-k, 0) * valueBytes)
			return g.fillRange(o, call.Argument(0), k, final)
		}
		k, final := relArgs(call.Argument(1), call.Argument(2), n)
		if _, dense := denseArray(o); !dense {
			// Filling holes makes elements: goja may lay the whole range
			// out in one slice.
			g.reserve(max(final-k, 0) * valueBytes)
		}
		if final-k < g.slowLoop {
			return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{call.Argument(0), g.vm.ToValue(k), g.vm.ToValue(final)}})
		}
		value := call.Argument(0)
		for ; k < final; k += g.slowLoop {
			g.checkpoint()
			if m, ok := g.quietLength(o); !ok || m != n {
				// A setter moved the length: goja's loop keeps the one it
				// read first.
				return g.fillRange(o, value, k, final)
			}
			orig(goja.FunctionCall{This: o, Arguments: []goja.Value{value, g.vm.ToValue(k), g.vm.ToValue(min(k+g.slowLoop, final))}})
		}
		return o
	}
}

func (g *guards) fillRange(o *goja.Object, value goja.Value, k, final int64) goja.Value {
	e := g.elems(o)
	for i := int64(0); k < final; k, i = k+1, i+1 {
		g.tick(i)
		e.set(k, value)
	}
	return o
}

// arraySlice is Array.prototype.slice.
func (g *guards) arraySlice(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		n, dense := denseArray(o)
		if !dense {
			var quiet bool
			if n, quiet = g.quietLength(o); !quiet {
				return g.slowSlice(o, call.Argument(0), call.Argument(1))
			}
		}
		start, end := relArgs(call.Argument(0), call.Argument(1), n)
		args := []goja.Value{g.vm.ToValue(start), g.vm.ToValue(end)}
		count := max(end-start, 0)
		if dense && n < g.dense || count < g.loop {
			g.reserve(count * valueBytes)
			return orig(goja.FunctionCall{This: call.This, Arguments: args})
		}
		return g.slowSlice(o, args[0], args[1])
	}
}

// slowSlice is goja's generic slice (which leaves the result's length as
// the species made it).
func (g *guards) slowSlice(o *goja.Object, startArg, endArg goja.Value) goja.Value {
	l := lengthOf(o)
	start, end := relArgs(startArg, endArg, l)
	a := g.speciesCreate(o, max(end-start, 0))
	for n := int64(0); start < end; start, n = start+1, n+1 {
		g.tick(n)
		if p := o.Get(key(start)); p != nil {
			define(a, n, p)
		}
	}
	return a
}

// arraySplice is Array.prototype.splice.
func (g *guards) arraySplice(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if n, quiet := g.quietLength(o); quiet && n < g.loop {
			return orig(call)
		}
		if n, ok := denseArray(o); ok && n < g.dense {
			// goja's dense path allocates the deleted elements, and the
			// whole array anew when it grows.
			start := relIndex(call.Argument(0).ToInteger(), n)
			args := append([]goja.Value{g.vm.ToValue(start)}, call.Arguments[min(1, len(call.Arguments)):]...)
			var del int64
			switch len(call.Arguments) {
			case 0:
				args = nil
			case 1:
				del = n - start
			default:
				del = min(max(call.Argument(1).ToInteger(), 0), n-start)
				args[1] = g.vm.ToValue(del)
			}
			bytes := del * valueBytes
			if items := int64(max(len(call.Arguments)-2, 0)); items > del {
				bytes += (n - del + items) * valueBytes
			}
			g.reserve(bytes)
			return orig(goja.FunctionCall{This: call.This, Arguments: args})
		}
		return g.slowSplice(o, call)
	}
}

// slowSplice is goja's generic splice.
func (g *guards) slowSplice(o *goja.Object, call goja.FunctionCall) goja.Value {
	_, wasDense := denseArray(o)
	e := g.elems(o)
	l := lengthOf(o)
	start := relIndex(call.Argument(0).ToInteger(), l)
	var del int64
	switch len(call.Arguments) {
	case 0:
	case 1:
		del = l - start
	default:
		del = min(max(call.Argument(1).ToInteger(), 0), l-start)
	}
	items := int64(max(len(call.Arguments)-2, 0))
	newLength := l - del + items
	if newLength >= maxSafeInt {
		panic(g.vm.NewTypeError("Invalid array length"))
	}
	a := g.speciesCreate(o, del)
	for k := int64(0); k < del; k++ {
		g.tick(k)
		if v, ok := e.hasGet(k + start); ok {
			define(a, k, v)
		}
	}
	if wasDense {
		// goja's dense path sets the result's length.
		throwing(a.Set("length", del))
	}
	switch {
	case items < del:
		for k := start; k < l-del; k++ {
			g.tick(k - start)
			if v, ok := e.hasGet(k + del); ok {
				e.set(k+items, v)
			} else {
				e.del(k + items)
			}
		}
		for k := l; k > l-del+items; k-- {
			g.tick(l - k)
			e.del(k - 1)
		}
	case items > del:
		for k := l - del; k > start; k-- {
			g.tick(l - del - k)
			if v, ok := e.hasGet(k + del - 1); ok {
				e.set(k+items-1, v)
			} else {
				e.del(k + items - 1)
			}
		}
	}
	for i, item := range call.Arguments[min(2, len(call.Arguments)):] {
		e.set(start+int64(i), item)
	}
	throwing(o.Set("length", newLength))
	return a
}

// arrayConcat is Array.prototype.concat, which goja copies an element at
// a time: quiet receiver and arguments with fewer than guardLoop elements
// in all go to goja.
func (g *guards) arrayConcat(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		total := int64(0)
		quiet := true
		for _, v := range append([]goja.Value{o}, call.Arguments...) {
			item, ok := v.(*goja.Object)
			if !ok {
				total++
				continue
			}
			spreadable, known := g.quietSpreadable(item)
			if !known {
				quiet = false
				break
			}
			if !spreadable {
				total++
				continue
			}
			n, q := g.quietLength(item)
			if !q {
				quiet = false
				break
			}
			total += n
		}
		if quiet && total < g.loop {
			return orig(call)
		}
		a := g.speciesCreate(o, 0)
		g.concatAppend(a, call.This.ToObject(g.vm))
		for _, item := range call.Arguments {
			g.concatAppend(a, item)
		}
		return a
	}
}

// quietSpreadable is IsConcatSpreadable(o) when it reads no accessor or
// trap: known is false otherwise.
func (g *guards) quietSpreadable(o *goja.Object) (spreadable, known bool) {
	for p := o; p != nil; p = p.Prototype() {
		if isProxy(p) || g.hasOwnSymbol(p, goja.SymIsConcatSpreadable) {
			return false, false
		}
	}
	return o.ClassName() == "Array", true
}

// concatAppend is goja's arrayproto_concat_append. The result grows an
// element at a time, so it asks the budget as it grows: a run doubling an
// array with concat grows a fresh one each time, which a collection
// running meanwhile would count as garbage allocated during its mark.
func (g *guards) concatAppend(a *goja.Object, item goja.Value) {
	n := lengthOf(a)
	if obj, ok := item.(*goja.Object); ok && g.spreadable(obj) {
		length := lengthOf(obj)
		if n+length >= maxSafeInt {
			panic(g.vm.NewTypeError("Invalid array length"))
		}
		defined := int64(0)
		for i := int64(0); i < length; i++ {
			g.tick(i)
			if v := obj.Get(key(i)); v != nil {
				define(a, n, v)
				if defined++; defined%guardStride == 0 {
					g.grant(guardStride*valueBytes, (n+1)*valueBytes)
				}
			}
			n++
		}
	} else {
		define(a, n, item)
		n++
	}
	throwing(a.Set("length", n))
}

// spreadable is goja's isConcatSpreadable.
func (g *guards) spreadable(o *goja.Object) bool {
	if s := o.GetSymbol(goja.SymIsConcatSpreadable); s != nil && !goja.IsUndefined(s) {
		return s.ToBoolean()
	}
	return g.isArrayValue(o)
}

// slowIndexOf is goja's generic indexOf.
func (g *guards) slowIndexOf(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	e := g.elems(o)
	l := lengthOf(o)
	if l == 0 {
		return g.vm.ToValue(-1)
	}
	n := call.Argument(1).ToInteger()
	if n >= l {
		return g.vm.ToValue(-1)
	}
	if n < 0 {
		n = max(l+n, 0)
	}
	search := call.Argument(0)
	for i := int64(0); n < l; n, i = n+1, i+1 {
		g.tick(i)
		if v, ok := e.hasGet(n); ok && search.StrictEquals(v) {
			return g.vm.ToValue(n)
		}
	}
	return g.vm.ToValue(-1)
}

// slowLastIndexOf is goja's generic lastIndexOf.
func (g *guards) slowLastIndexOf(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	e := g.elems(o)
	l := lengthOf(o)
	if l == 0 {
		return g.vm.ToValue(-1)
	}
	from := l - 1
	if len(call.Arguments) >= 2 {
		from = call.Argument(1).ToInteger()
		if from >= 0 {
			from = min(from, l-1)
		} else {
			from += l
		}
	}
	search := call.Argument(0)
	for k := from; k >= 0; k-- {
		g.tick(from - k)
		if v, ok := e.hasGet(k); ok && search.StrictEquals(v) {
			return g.vm.ToValue(k)
		}
	}
	return g.vm.ToValue(-1)
}

// slowIncludes is goja's generic includes (no HasProperty: holes read as
// undefined).
func (g *guards) slowIncludes(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	l := lengthOf(o)
	if l == 0 {
		return g.vm.ToValue(false)
	}
	n := call.Argument(1).ToInteger()
	if n >= l {
		return g.vm.ToValue(false)
	}
	if n < 0 {
		n = max(l+n, 0)
	}
	search := call.Argument(0)
	if f, ok := search.Export().(float64); ok && f == 0 && math.Signbit(f) {
		search = g.vm.ToValue(0)
	}
	for i := int64(0); n < l; n, i = n+1, i+1 {
		g.tick(i)
		if search.SameAs(nilSafe(o.Get(key(n)))) {
			return g.vm.ToValue(true)
		}
	}
	return g.vm.ToValue(false)
}

// slowEvery is goja's every (some: the first truthy answer wins).
func (g *guards) slowEvery(some bool) slowPath {
	return func(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
		l := lengthOf(o)
		cb := g.callback(orig, call)
		fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, o}}
		for k := int64(0); k < l; k++ {
			g.tick(k)
			if v := o.Get(key(k)); v != nil {
				fc.Arguments[0], fc.Arguments[1] = v, g.vm.ToValue(k)
				if cb(fc).ToBoolean() == some {
					return g.vm.ToValue(some)
				}
			}
		}
		return g.vm.ToValue(!some)
	}
}

// slowForEach is goja's forEach.
func (g *guards) slowForEach(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	l := lengthOf(o)
	cb := g.callback(orig, call)
	fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, o}}
	for k := int64(0); k < l; k++ {
		g.tick(k)
		if v := o.Get(key(k)); v != nil {
			fc.Arguments[0], fc.Arguments[1] = v, g.vm.ToValue(k)
			cb(fc)
		}
	}
	return goja.Undefined()
}

// mapping wraps map, which goja gives a result of the array's length in
// one allocation when the array is one of its own.
func (g *guards) mapping(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if n, quiet := g.quietLength(o); quiet && n < g.loop || g.scriptOverDense(o, call.Argument(0)) {
			g.reserve(n * valueBytes)
			return orig(call)
		}
		return g.slowMap(orig, o, call)
	}
}

// slowMap is goja's generic map.
func (g *guards) slowMap(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	l := lengthOf(o)
	cb := g.callback(orig, call)
	fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, o}}
	a := g.speciesCreate(o, l)
	for k := int64(0); k < l; k++ {
		g.tick(k)
		if v := o.Get(key(k)); v != nil {
			fc.Arguments[0], fc.Arguments[1] = v, g.vm.ToValue(k)
			define(a, k, cb(fc))
		}
	}
	return a
}

// slowFilter is goja's generic filter, whose callback check differs
// (ToObject, then "is not a function").
func (g *guards) slowFilter(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	l := lengthOf(o)
	cb := g.callback(orig, call)
	a := g.speciesCreate(o, 0)
	fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, o}}
	to := int64(0)
	for k := int64(0); k < l; k++ {
		g.tick(k)
		if v := o.Get(key(k)); v != nil {
			fc.Arguments[0], fc.Arguments[1] = v, g.vm.ToValue(k)
			if cb(fc).ToBoolean() {
				define(a, to, v)
				to++
			}
		}
	}
	return a
}

// slowReduce is goja's reduce (right: reduceRight).
func (g *guards) slowReduce(right bool) slowPath {
	return func(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
		l := lengthOf(o)
		cb := g.callback(orig, call)
		fc := goja.FunctionCall{This: goja.Undefined(), Arguments: []goja.Value{nil, nil, nil, o}}
		k, step, end := int64(0), int64(1), l
		if right {
			k, step, end = l-1, -1, -1
		}
		i := int64(0)
		if len(call.Arguments) >= 2 {
			fc.Arguments[0] = call.Argument(1)
		} else {
			for ; k != end; k += step {
				g.tick(i)
				i++
				if v := o.Get(key(k)); v != nil {
					fc.Arguments[0] = v
					break
				}
			}
			if fc.Arguments[0] == nil {
				panic(g.vm.NewTypeError("No initial value"))
			}
			k += step
		}
		for ; k != end; k += step {
			g.tick(i)
			i++
			if v := o.Get(key(k)); v != nil {
				fc.Arguments[1], fc.Arguments[2] = v, g.vm.ToValue(k)
				fc.Arguments[0] = cb(fc)
			}
		}
		return fc.Arguments[0]
	}
}

// slowFind is goja's find, findIndex, findLast and findLastIndex: every
// index is visited, holes as undefined.
func (g *guards) slowFind(index, last bool) slowPath {
	return func(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
		l := lengthOf(o)
		cb := g.callback(orig, call)
		fc := goja.FunctionCall{This: call.Argument(1), Arguments: []goja.Value{nil, nil, o}}
		k, step, end := int64(0), int64(1), l
		if last {
			k, step, end = l-1, -1, -1
		}
		for i := int64(0); k != end; k, i = k+step, i+1 {
			g.tick(i)
			v := nilSafe(o.Get(key(k)))
			idx := g.vm.ToValue(k)
			fc.Arguments[0], fc.Arguments[1] = v, idx
			if cb(fc).ToBoolean() {
				if index {
					return idx
				}
				return v
			}
		}
		if index {
			return g.vm.ToValue(-1)
		}
		return goja.Undefined()
	}
}

// arrayFlat is flat and flatMap. A nested array's length is read only as
// goja reaches it, so goja's own flat takes a quiet array only when a look
// at its dense elements finds fewer than guardLoop to copy in all;
// flatMap's callback makes them, so it always runs here.
func (g *guards) arrayFlat(withMap bool) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			o := g.receiverOf(call.This)
			if withMap {
				l := lengthOf(o)
				cb := g.callback(orig, call)
				this := goja.Value(goja.Undefined())
				if len(call.Arguments) > 1 {
					this = call.Argument(1)
				}
				a := g.speciesCreate(o, 0)
				g.flatten(a, o, l, 0, 1, cb, this, g.cleanProtos(), 0)
				return a
			}
			n, quiet := g.quietLength(o)
			l := n
			if !quiet {
				l = lengthOf(o)
			}
			depth := int64(1)
			if len(call.Arguments) > 0 {
				depth = call.Argument(0).ToInteger()
			}
			if quiet && g.flatSmall(o, n, depth) {
				return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{g.vm.ToValue(depth)}})
			}
			a := g.speciesCreate(o, 0)
			g.flatten(a, o, l, 0, depth, nil, nil, g.cleanProtos(), 0)
			return a
		}
	}
}

// flatSmall reports whether flat of o (quiet, of length n) to depth copies
// fewer than guardLoop elements, reading nothing observable to know.
func (g *guards) flatSmall(o *goja.Object, n, depth int64) bool {
	if n >= g.loop {
		return false
	}
	if depth < 1 {
		return true
	}
	if depth > 1 {
		return false
	}
	if _, dense := denseArray(o); !dense {
		return false
	}
	total := n
	for k := int64(0); k < n; k++ {
		e, ok := o.Get(key(k)).(*goja.Object)
		if !ok {
			continue
		}
		if isProxy(e) {
			return false
		}
		if e.ClassName() != "Array" {
			continue
		}
		m, quiet := g.quietLength(e)
		if !quiet {
			return false
		}
		if total += m; total >= g.loop {
			return false
		}
	}
	return true
}

// flatten is goja's flattenIntoArray. Its recursion (goja's recurses in
// Go, without end for an array that holds itself) ends with goja's own
// stack overflow past MaxCallStackSize levels. protos: cleanProtos, read
// once for the call.
func (g *guards) flatten(target, source *goja.Object, sourceLen, start, depth int64, mapper nativeFunc, this goja.Value, protos bool, level int) int64 {
	if level > MaxCallStackSize {
		g.overflow()
	}
	e := &elems{g: g, o: source, clean: protos && g.arrayOverProtos(source)}
	t := start
	for s := int64(0); s < sourceLen; s++ {
		g.tick(s)
		element, ok := e.hasGet(s)
		if !ok {
			continue
		}
		if mapper != nil {
			element = mapper(goja.FunctionCall{This: this, Arguments: []goja.Value{element, g.vm.ToValue(s), source}})
		}
		if eo, isObj := element.(*goja.Object); isObj && depth > 0 && g.isArrayValue(eo) {
			t = g.flatten(target, eo, lengthOf(eo), t, depth-1, nil, nil, protos, level+1)
			continue
		}
		if t >= maxSafeInt-1 {
			panic(g.vm.NewTypeError("Invalid array length"))
		}
		define(target, t, element)
		t++
	}
	return t
}

// overflow ends the call with goja's uncatchable stack overflow.
func (g *guards) overflow() {
	_, err := g.recurse(goja.Undefined())
	if err == nil {
		err = fmt.Errorf("no stack overflow")
		g.s.breakRun()
	}
	panic(err)
}

// sortCompare is goja's arraySortCtx.sortCompare.
func (g *guards) sortCompare(compare nativeFunc, x, y goja.Value) int {
	switch {
	case x == nil && y == nil:
		return 0
	case x == nil:
		return 1
	case y == nil:
		return -1
	case goja.IsUndefined(x) && goja.IsUndefined(y):
		return 0
	case goja.IsUndefined(x):
		return 1
	case goja.IsUndefined(y):
		return -1
	}
	if compare != nil {
		f := compare(goja.FunctionCall{This: goja.Undefined(), Arguments: []goja.Value{x, y}}).ToFloat()
		switch {
		case f > 0:
			return 1
		case f < 0, math.Signbit(f):
			return -1
		}
		return 0
	}
	return g.toStr(x).CompareTo(g.toStr(y))
}

// sortValues sorts values as goja's sort.Stable over its array does,
// with a look at the interrupt every few comparisons.
func (g *guards) sortValues(values []goja.Value, compare nativeFunc) {
	s := &valueSort{g: g, values: values, compare: compare}
	sort.Stable(s)
}

type valueSort struct {
	g       *guards
	values  []goja.Value
	compare nativeFunc
	calls   int64
}

func (s *valueSort) Len() int { return len(s.values) }
func (s *valueSort) Less(i, j int) bool {
	s.g.tick(s.calls)
	s.calls++
	return s.g.sortCompare(s.compare, s.values[i], s.values[j]) < 0
}
func (s *valueSort) Swap(i, j int) { s.values[i], s.values[j] = s.values[j], s.values[i] }

// comparator is sort's and toSorted's check of their argument.
func (g *guards) comparator(arg goja.Value) nativeFunc {
	if goja.IsUndefined(arg) {
		return nil
	}
	if f, ok := callable(arg); ok {
		return f
	}
	panic(g.vm.NewTypeError("The comparison function must be either a function or undefined"))
}

// arraySort is Array.prototype.sort: goja sorts a dense array in place
// (a plain JavaScript comparator keeps that interruptible), and anything
// else through a list it gathers from the whole length.
func (g *guards) arraySort(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if n, dense := denseArray(o); dense && n < g.dense && isScriptFunction(call.Argument(0)) {
			return orig(call)
		}
		if g.small(o, g.loop, false, false) {
			return orig(call)
		}
		compare := g.comparator(call.Argument(0))
		e := g.elems(o)
		l := lengthOf(o)
		var values []goja.Value
		for i := int64(0); i < l; i++ {
			g.tick(i)
			if v, ok := e.hasGet(i); ok {
				values = append(values, v)
				if len(values)%guardStride == 0 {
					g.grant(guardStride*valueBytes, int64(cap(values))*valueBytes)
				}
			}
		}
		g.sortValues(values, compare)
		for i, v := range values {
			g.tick(int64(i))
			e.set(int64(i), v)
		}
		for i := int64(len(values)); i < l; i++ {
			g.tick(i)
			e.del(i)
		}
		return o
	}
}

// isScriptFunction reports whether v is a function written in JavaScript
// (whose every call runs an instruction goja can interrupt).
func isScriptFunction(v goja.Value) bool {
	o, ok := v.(*goja.Object)
	if !ok || !arrayLayout.ok {
		return false
	}
	impl := reflect.ValueOf(o).Elem().FieldByIndex(arrayLayout.self)
	if impl.IsNil() {
		return false
	}
	switch impl.Elem().Type().String() {
	case "*goja.funcObject", "*goja.arrowFuncObject", "*goja.methodFuncObject":
		return true
	}
	return false
}

// slowReverse is goja's generic reverse.
func (g *guards) slowReverse(orig nativeFunc, o *goja.Object, _ goja.FunctionCall) goja.Value {
	e := g.elems(o)
	l := lengthOf(o)
	for lower := int64(0); lower != l/2; lower++ {
		g.tick(lower)
		upper := l - lower - 1
		lv, lok := e.hasGet(lower)
		uv, uok := e.hasGet(upper)
		switch {
		case lok && uok:
			e.set(lower, uv)
			e.set(upper, lv)
		case uok:
			e.set(lower, uv)
			e.del(upper)
		case lok:
			e.del(lower)
			e.set(upper, lv)
		}
	}
	return o
}

// arrayCopyWithin is Array.prototype.copyWithin.
func (g *guards) arrayCopyWithin(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if g.small(o, g.loop, true, false) {
			return orig(call)
		}
		e := g.elems(o)
		l := lengthOf(o)
		to := relIndex(call.Argument(0).ToInteger(), l)
		from, final := relArgs(call.Argument(1), call.Argument(2), l)
		count := min(final-from, l-to)
		dir := int64(1)
		if from < to && to < from+count {
			dir = -1
			from, to = from+count-1, to+count-1
		}
		for i := int64(0); count > 0; i, count = i+1, count-1 {
			g.tick(i)
			if v, ok := e.hasGet(from); ok {
				e.set(to, v)
			} else {
				e.del(to)
			}
			from += dir
			to += dir
		}
		return o
	}
}

// slowShift is goja's generic shift.
func (g *guards) slowShift(orig nativeFunc, o *goja.Object, _ goja.FunctionCall) goja.Value {
	e := g.elems(o)
	l := lengthOf(o)
	if l == 0 {
		throwing(o.Set("length", 0))
		return goja.Undefined()
	}
	first := nilSafe(e.get(0))
	for i := int64(1); i < l; i++ {
		g.tick(i)
		if v, ok := e.hasGet(i); ok {
			e.set(i-1, v)
		} else {
			e.del(i - 1)
		}
	}
	e.del(l - 1)
	throwing(o.Set("length", l-1))
	return first
}

// slowUnshift is goja's generic unshift.
func (g *guards) slowUnshift(orig nativeFunc, o *goja.Object, call goja.FunctionCall) goja.Value {
	e := g.elems(o)
	l := lengthOf(o)
	argc := int64(len(call.Arguments))
	if argc > 0 {
		if l+argc >= maxSafeInt {
			panic(g.vm.NewTypeError("Invalid array length"))
		}
		for k := l - 1; k >= 0; k-- {
			g.tick(l - 1 - k)
			if v, ok := e.hasGet(k); ok {
				e.set(k+argc, v)
			} else {
				e.del(k + argc)
			}
		}
		for k, arg := range call.Arguments {
			e.set(int64(k), arg)
		}
	}
	n := g.vm.ToValue(l + argc)
	throwing(o.Set("length", n))
	return n
}

// copying wraps a method whose dense path allocates the whole result at
// once and whose generic path defines an element at a time.
func (g *guards) copying(orig nativeFunc, slow slowPath) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if n, ok := denseArray(o); ok && n < g.dense {
			g.reserve(n * valueBytes)
			return orig(call)
		}
		if n, quiet := g.quietLength(o); quiet && n < g.slowLoop {
			return orig(call)
		}
		return slow(orig, o, call)
	}
}

// slowToReversed is goja's generic toReversed.
func (g *guards) slowToReversed(orig nativeFunc, o *goja.Object, _ goja.FunctionCall) goja.Value {
	l := lengthOf(o)
	a := g.newArrayLength(l)
	for k := int64(0); k < l; k++ {
		g.tick(k)
		define(a, k, nilSafe(o.Get(key(l-k-1))))
	}
	return a
}

// arrayToSorted is Array.prototype.toSorted: goja gathers the whole
// length into one list first.
func (g *guards) arrayToSorted(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		compare := g.comparator(call.Argument(0))
		o := g.receiverOf(call.This)
		if n, ok := denseArray(o); ok && n < g.dense && (compare == nil && n < g.loop || isScriptFunction(call.Argument(0))) {
			g.reserve(n * valueBytes)
			return orig(call)
		}
		if n, quiet := g.quietLength(o); quiet && n < g.loop {
			g.reserve(n * valueBytes)
			return orig(call)
		}
		l := lengthOf(o)
		if l >= math.MaxUint32 {
			panic(g.rangeError("Invalid array length"))
		}
		g.reserve(l * valueBytes)
		values := make([]goja.Value, 0, l)
		for i := int64(0); i < l; i++ {
			g.tick(i)
			values = append(values, nilSafe(o.Get(key(i))))
		}
		g.sortValues(values, compare)
		items := make([]any, len(values))
		for i, v := range values {
			items[i] = v
		}
		return g.vm.NewArray(items...)
	}
}

// rangeError is a RangeError with message text.
func (g *guards) rangeError(text string) *goja.Object {
	e, err := g.vm.New(g.rangeErrorOf(), g.vm.ToValue(text))
	throwing(err)
	return e
}

// arrayToSpliced is Array.prototype.toSpliced.
func (g *guards) arrayToSpliced(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		if n, ok := denseArray(o); ok && n < g.dense {
			g.reserve((n + int64(len(call.Arguments))) * valueBytes)
			return orig(call)
		}
		if n, quiet := g.quietLength(o); quiet && n < g.slowLoop {
			return orig(call)
		}
		l := lengthOf(o)
		start := relIndex(call.Argument(0).ToInteger(), l)
		var skip int64
		if len(call.Arguments) == 1 {
			skip = l - start
		} else if len(call.Arguments) > 1 {
			skip = min(max(call.Argument(1).ToInteger(), 0), l-start)
		}
		items := int64(max(len(call.Arguments)-2, 0))
		newLength := l - skip + items
		if newLength >= maxSafeInt {
			panic(g.vm.NewTypeError("Invalid array length"))
		}
		a := g.newArrayLength(newLength)
		i, from := int64(0), start+skip
		for ; i < start; i++ {
			g.tick(i)
			define(a, i, nilSafe(o.Get(key(i))))
		}
		for _, item := range call.Arguments[min(2, len(call.Arguments)):] {
			define(a, i, nilSafe(item))
			i++
		}
		for ; i < newLength; i, from = i+1, from+1 {
			g.tick(i)
			define(a, i, nilSafe(o.Get(key(from))))
		}
		return a
	}
}

// arrayWith is Array.prototype.with, which reads its index before the
// length.
func (g *guards) arrayWith(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		o := g.receiverOf(call.This)
		rel := call.Argument(0).ToInteger()
		args := []goja.Value{g.vm.ToValue(rel), call.Argument(1)}
		if n, ok := denseArray(o); ok && n < g.dense {
			g.reserve(n * valueBytes)
			return orig(goja.FunctionCall{This: call.This, Arguments: args})
		}
		if n, quiet := g.quietLength(o); quiet && n < g.slowLoop {
			return orig(goja.FunctionCall{This: call.This, Arguments: args})
		}
		l := lengthOf(o)
		index := rel
		if rel < 0 {
			index = l + rel
		}
		if index >= l || index < 0 {
			panic(g.rangeError("Invalid index " + call.Argument(0).String()))
		}
		a := g.newArrayLength(l)
		for k := int64(0); k < l; k++ {
			g.tick(k)
			v := call.Argument(1)
			if k != index {
				v = nilSafe(o.Get(key(k)))
			}
			define(a, k, v)
		}
		return a
	}
}

// arrayFrom is Array.from: over an array-like, goja allocates the result
// of the whole length at once, then reads each index in one call.
// Iterables are goja's (their iterators' next is guarded); an array-like
// that is large, or read through a trap or an accessor, is copied here.
func (g *guards) arrayFrom(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		mapArg := call.Argument(1)
		var mapFn nativeFunc
		if !goja.IsUndefined(mapArg) {
			f, ok := callable(mapArg)
			if !ok {
				return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{goja.Undefined(), mapArg}})
			}
			mapFn = f
		}
		items, ok := call.Argument(0).(*goja.Object)
		if !ok {
			return orig(call)
		}
		iterate, stand, l, _ := g.fromItems(items)
		if iterate {
			return orig(call)
		}
		if stand != nil {
			return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{stand, mapArg, call.Argument(2)}})
		}
		if l < g.slowLoop {
			stand := g.arrayLikeStandIn(items, l)
			return orig(goja.FunctionCall{This: call.This, Arguments: []goja.Value{stand, mapArg, call.Argument(2)}})
		}
		var arr *goja.Object
		if c, ok := call.This.(*goja.Object); ok && c != g.arrayCtor {
			if ctor, ok := goja.AssertConstructor(c); ok {
				a, err := ctor(nil, g.vm.ToValue(l))
				throwing(err)
				arr = a
			}
		}
		if arr == nil {
			arr = g.vm.NewArray()
		}
		t := call.Argument(2)
		for k := int64(0); k < l; k++ {
			g.tick(k)
			item := nilSafe(items.Get(key(k)))
			if mapFn != nil {
				item = mapFn(goja.FunctionCall{This: t, Arguments: []goja.Value{item, g.vm.ToValue(k)}})
			}
			define(arr, k, item)
		}
		throwing(arr.Set("length", l))
		return arr
	}
}

// fromItems reads of items what goja's Array.from and %TypedArray%.from
// read before they build: GetMethod(items, @@iterator), then, without one,
// its length. iterate: a method was found without running code, and goja
// may take items as they are. standIn: reading the method ran code and
// found one, so goja must take its iterator from the stand-in instead of
// reading the method again. Otherwise n is its length, quiet when reading
// that ran no code either (goja may then read items itself).
func (g *guards) fromItems(items *goja.Object) (iterate bool, standIn *goja.Object, n int64, quiet bool) {
	method, known := g.quietSymbol(items, goja.SymIterator)
	if known && method {
		return true, nil, 0, false
	}
	if !known {
		if m := g.toMethod(items.GetSymbol(goja.SymIterator)); m != nil {
			return false, g.iterableStandIn(items, m), 0, false
		}
	}
	if known {
		n, quiet = g.quietLength(items)
	}
	if !quiet {
		n = lengthOf(items)
	}
	return false, nil, n, quiet
}

// arrayLikeView is the array-like goja's Array.from reads in place of one
// whose length was read already: its indices are the original's.
type arrayLikeView struct {
	o      *goja.Object
	length goja.Value
}

func (v *arrayLikeView) Get(k string) goja.Value {
	if k == "length" {
		return v.length
	}
	if _, err := strconv.ParseUint(k, 10, 64); err != nil {
		return nil
	}
	return v.o.Get(k)
}
func (v *arrayLikeView) Set(string, goja.Value) bool { return false }
func (v *arrayLikeView) Has(string) bool             { return false }
func (v *arrayLikeView) Delete(string) bool          { return false }
func (v *arrayLikeView) Keys() []string              { return nil }
