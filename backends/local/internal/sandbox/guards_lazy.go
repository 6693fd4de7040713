package sandbox

import (
	"reflect"
	"runtime"
	"sync"
	"unsafe"
	"weak"

	"github.com/dop251/goja"
	"github.com/dop251/goja/unistring"
)

// Lazy method guards. goja builds most built-in prototypes (Array's,
// String's, the typed arrays', Function's, Object's statics, the global
// functions) from templates shared by every runtime, one property at a
// time, when a property is first touched; guarding a method up front
// makes goja build it in every prepared runtime, most of which never
// touch it. So for the methods on those templates the guards wrap the
// template instead: once per process, each guarded property's factory is
// replaced by one that builds goja's method and then, in a runtime whose
// guards asked for it, puts the guard in its place (swapNative) before
// anything can call it. goja's API offers no hook of this kind; the
// templates are found by reflection on one runtime's objects, and when
// their layout is not the one known the guards are installed up front as
// before.

// templateProp is one guarded property of one goja template, keyed by
// name or (sym not nil) by a symbol.
type templateProp struct {
	tmpl unsafe.Pointer // *goja.objectTemplate
	name string
	sym  *goja.Symbol
}

// lazyTemplates is what patchTemplates found and patched.
var lazyTemplates struct {
	ok bool
	// patched are the template properties whose factory calls
	// materialized.
	patched map[templateProp]bool
	// self locates an object's implementation; tmplType is goja's
	// template type, props and symProps the index of its factories by
	// name and by symbol (symProps nil: symbols are not deferred).
	self, props, symProps []int
	tmplType              reflect.Type
	// valueOfProp reads the function out of what a factory returns
	// (goja's valueProperty), or nil.
	valueOfProp []int
}

// lazyGuards maps a runtime to its guards, for the patched factories. Its
// keys and values are weak: a runtime and its guards go together.
var lazyGuards sync.Map // weak.Pointer[goja.Runtime] -> weak.Pointer[guards]

// register makes g the guards the patched factories find for its runtime.
func (g *guards) register() {
	key := weak.Make(g.vm)
	lazyGuards.Store(key, weak.Make(g))
	runtime.AddCleanup(g.vm, func(k weak.Pointer[goja.Runtime]) { lazyGuards.Delete(k) }, key)
}

// guardsOf is the guards registered for r, or nil.
func guardsOf(r *goja.Runtime) *guards {
	v, ok := lazyGuards.Load(weak.Make(r))
	if !ok {
		return nil
	}
	return v.(weak.Pointer[guards]).Value()
}

// deferMethod records wrap as the guard of obj[name] when obj is a
// templated object whose property name goja has not built yet and whose
// factory is patched, and reports whether it did.
func (g *guards) deferMethod(obj *goja.Object, name string, wrap func(orig nativeFunc) nativeFunc) bool {
	return g.deferBuild(obj, name, func(v goja.Value) {
		fn := functionOfProp(v)
		if fn == nil {
			panic(errNotBuiltin(name))
		}
		f, ok := fn.Export().(nativeFunc)
		if !ok || !swapNative(fn, g.contained(wrap(f))) {
			panic(errNotBuiltin(name))
		}
	})
}

// deferGlobal is deferMethod for a family of built-ins reachable only
// through the global constructor name (and what the host builds with it):
// install runs with goja's constructor when goja builds the global, which
// any read or write of it does first.
func (g *guards) deferGlobal(name string, install func(ctor *goja.Object) error) error {
	if g.deferBuild(g.vm.GlobalObject(), name, func(v goja.Value) {
		ctor := functionOfProp(v)
		if ctor == nil {
			panic(errNotBuiltin(name))
		}
		throwing(install(ctor))
	}) {
		return nil
	}
	return install(g.global(name))
}

// deferBuild records build to run when goja builds obj[name], when obj is
// a templated object whose property name goja has not built yet and whose
// factory is patched, and reports whether it did.
func (g *guards) deferBuild(obj *goja.Object, name string, build func(goja.Value)) bool {
	return g.deferKey(func() (templateProp, bool, bool) { return templateOf(obj, name) }, build)
}

// deferSymbol is deferBuild for the property of obj keyed by sym. goja
// builds all of an object's templated symbol properties together, when the
// first of them is touched.
func (g *guards) deferSymbol(obj *goja.Object, sym *goja.Symbol, build func(goja.Value)) bool {
	return g.deferKey(func() (templateProp, bool, bool) { return templateOfSym(obj, sym) }, build)
}

// deferKey is deferBuild for the template property find locates.
func (g *guards) deferKey(find func() (key templateProp, built, ok bool), build func(goja.Value)) bool {
	if g.recording != nil {
		if key, _, ok := find(); ok {
			g.recording[key] = true
		}
		return false
	}
	if !lazyTemplates.ok {
		return false
	}
	key, built, ok := find()
	if !ok || built || !lazyTemplates.patched[key] {
		return false
	}
	if g.pending == nil {
		g.pending = map[templateProp]func(goja.Value){}
	}
	g.pending[key] = build
	return true
}

// materialized is called by a patched factory once goja has built the
// property of key in g's runtime: v is what the factory made.
func (g *guards) materialized(key templateProp, v goja.Value) {
	build, ok := g.pending[key]
	if !ok {
		return
	}
	delete(g.pending, key)
	build(v)
}

// templateOf is the template property obj[name] comes from, when obj is
// one of goja's templated objects, its template has name, and goja has
// not built (or deleted) that property in obj yet (built is true then).
func templateOf(obj *goja.Object, name string) (key templateProp, built, ok bool) {
	st, l, tmpl, ok := templatedParts(obj)
	if !ok {
		return key, false, false
	}
	k := reflect.ValueOf(unistring.String(name))
	if !tmpl.Elem().FieldByIndex(lazyTemplates.props).MapIndex(k).IsValid() {
		return key, false, false
	}
	built = st.FieldByIndex(l.values).MapIndex(k).IsValid()
	return templateProp{tmpl: tmpl.UnsafePointer(), name: name}, built, true
}

// templateOfSym is templateOf for the property keyed by sym: built is true
// once goja has built obj's symbol properties (all at once).
func templateOfSym(obj *goja.Object, sym *goja.Symbol) (key templateProp, built, ok bool) {
	st, l, tmpl, ok := templatedParts(obj)
	if !ok || lazyTemplates.symProps == nil || l.symValues == nil {
		return key, false, false
	}
	if !tmpl.Elem().FieldByIndex(lazyTemplates.symProps).MapIndex(reflect.ValueOf(sym)).IsValid() {
		return key, false, false
	}
	built = !st.FieldByIndex(l.symValues).IsNil()
	return templateProp{tmpl: tmpl.UnsafePointer(), sym: sym}, built, true
}

// templatedParts is obj's implementation, its layout and its template,
// when obj is one of goja's templated objects.
func templatedParts(obj *goja.Object) (st reflect.Value, l *templatedLayout, tmpl reflect.Value, ok bool) {
	if lazyTemplates.self == nil {
		return st, nil, tmpl, false
	}
	impl := reflect.ValueOf(obj).Elem().FieldByIndex(lazyTemplates.self)
	if impl.IsNil() || impl.Elem().Kind() != reflect.Pointer {
		return st, nil, tmpl, false
	}
	if l = layoutOf(impl.Elem().Type()); l == nil {
		return st, nil, tmpl, false
	}
	st = impl.Elem().Elem()
	tmpl = st.FieldByIndex(l.tmpl)
	return st, l, tmpl, !tmpl.IsNil()
}

// templatedLayout locates the template and the built properties (by name,
// and by symbol: nil when not found) of one of goja's templated object
// types.
type templatedLayout struct{ tmpl, values, symValues []int }

// templatedLayouts caches layoutOf by type (nil: not templated).
var templatedLayouts sync.Map // reflect.Type -> *templatedLayout

// layoutOf is the layout of the templated object type typ (a pointer), or
// nil when typ is not one.
func layoutOf(typ reflect.Type) *templatedLayout {
	if l, ok := templatedLayouts.Load(typ); ok {
		return l.(*templatedLayout)
	}
	var l *templatedLayout
	tmpl, ok := typ.Elem().FieldByName("tmpl")
	values, ok2 := typ.Elem().FieldByName("values")
	if ok && ok2 && tmpl.Type == lazyTemplates.tmplType && values.Type.Kind() == reflect.Map &&
		values.Type.Key() == reflect.TypeOf(unistring.String("")) {
		l = &templatedLayout{tmpl: tmpl.Index, values: values.Index}
		if sv, ok := typ.Elem().FieldByName("symValues"); ok && sv.Type.Kind() == reflect.Pointer {
			l.symValues = sv.Index
		}
	}
	templatedLayouts.Store(typ, l)
	return l
}

// functionOfProp is the function object a template factory made: goja
// returns a method as a property value holding it.
func functionOfProp(v goja.Value) *goja.Object {
	if o, ok := v.(*goja.Object); ok {
		return o
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || lazyTemplates.valueOfProp == nil {
		return nil
	}
	field := rv.Elem().FieldByIndex(lazyTemplates.valueOfProp)
	inner := readable(field).Interface()
	o, _ := inner.(*goja.Object)
	return o
}

// setFunctionOfProp makes fn the function a template factory's value v
// holds.
func setFunctionOfProp(v goja.Value, fn *goja.Object) {
	rv := reflect.ValueOf(v)
	if _, ok := v.(*goja.Object); ok || rv.Kind() != reflect.Pointer || lazyTemplates.valueOfProp == nil {
		panic(errNotBuiltin("a template's value"))
	}
	readable(rv.Elem().FieldByIndex(lazyTemplates.valueOfProp)).Set(reflect.ValueOf(goja.Value(fn)))
}

// patchTemplates finds the template properties the guards wrap (by
// installing them up front once, recording each) and replaces their
// factories. It runs once, at package initialization, before any runtime
// of this process can read a template.
func patchTemplates() {
	if !nativeLayout.ok {
		return
	}
	vm := goja.New()
	arrayProto := vm.Get("Array").(*goja.Object).Get("prototype").(*goja.Object)
	self, ok := reflect.TypeOf(arrayProto).Elem().FieldByName("self")
	if !ok {
		return
	}
	impl := reflect.ValueOf(arrayProto).Elem().FieldByIndex(self.Index)
	if impl.Kind() != reflect.Interface || impl.IsNil() || impl.Elem().Kind() != reflect.Pointer {
		return
	}
	st := impl.Elem().Type().Elem()
	tmplField, ok := st.FieldByName("tmpl")
	valuesField, ok2 := st.FieldByName("values")
	if !ok || !ok2 || valuesField.Type.Kind() != reflect.Map || valuesField.Type.Key() != reflect.TypeOf(unistring.String("")) {
		return
	}
	tmplType := tmplField.Type
	if tmplType.Kind() != reflect.Pointer || tmplType.Elem().Kind() != reflect.Struct {
		return
	}
	propsField, ok := tmplType.Elem().FieldByName("props")
	factory := reflect.TypeOf((func(*goja.Runtime) goja.Value)(nil))
	if !ok || propsField.Type.Kind() != reflect.Map || propsField.Type.Key() != reflect.TypeOf(unistring.String("")) ||
		!propsField.Type.Elem().ConvertibleTo(factory) {
		return
	}
	// What a method's factory returns: a property value holding the
	// function (the first field of its type that holds a Value).
	join := readable(impl.Elem().Elem().FieldByIndex(tmplField.Index).Elem().FieldByIndex(propsField.Index)).
		MapIndex(reflect.ValueOf(unistring.String("join")))
	if !join.IsValid() {
		return
	}
	made := reflect.ValueOf(join.Convert(factory).Interface().(func(*goja.Runtime) goja.Value)(vm))
	var valueOfProp []int
	if made.Kind() == reflect.Pointer && made.Elem().Kind() == reflect.Struct {
		if f, ok := made.Elem().Type().FieldByName("value"); ok && f.Type == reflect.TypeOf((*goja.Value)(nil)).Elem() {
			valueOfProp = f.Index
		}
	}
	if valueOfProp == nil {
		return
	}
	lazyTemplates.self, lazyTemplates.props, lazyTemplates.tmplType = self.Index, propsField.Index, tmplType
	lazyTemplates.valueOfProp = valueOfProp
	symPropsField, ok := tmplType.Elem().FieldByName("symProps")
	if ok && symPropsField.Type.Kind() == reflect.Map && symPropsField.Type.Key() == reflect.TypeOf((*goja.Symbol)(nil)) &&
		symPropsField.Type.Elem() == propsField.Type.Elem() {
		lazyTemplates.symProps = symPropsField.Index
	}

	// Record which template properties the guards wrap.
	rec := goja.New()
	g := &guards{s: &session{vm: rec}, vm: rec, sources: map[*goja.Object]*goja.Object{}, recording: map[templateProp]bool{}}
	if err := g.install(); err != nil {
		return
	}
	patched := map[templateProp]bool{}
	for key := range g.recording {
		props := readable(reflect.NewAt(tmplType.Elem(), key.tmpl).Elem().FieldByIndex(propsField.Index))
		name := reflect.ValueOf(unistring.String(key.name))
		if key.sym != nil {
			props = readable(reflect.NewAt(tmplType.Elem(), key.tmpl).Elem().FieldByIndex(lazyTemplates.symProps))
			name = reflect.ValueOf(key.sym)
		}
		old := props.MapIndex(name).Convert(factory).Interface().(func(*goja.Runtime) goja.Value)
		key := key
		patch := func(r *goja.Runtime) goja.Value {
			v := old(r)
			if g := guardsOf(r); g != nil {
				g.materialized(key, v)
			}
			return v
		}
		props.SetMapIndex(name, reflect.ValueOf(patch).Convert(propsField.Type.Elem()))
		patched[key] = true
	}
	lazyTemplates.patched = patched
	lazyTemplates.ok = len(patched) > 0
}

func init() { patchTemplates() }

// readable is v (addressable) without the read-only mark reflection puts
// on what it reached through unexported fields.
func readable(v reflect.Value) reflect.Value {
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}
