package sandbox

import (
	"reflect"
	"testing"

	"github.com/dop251/goja"
)

// guardPC is the code of every guard that took a built-in's place in its
// own function object (guards.contained).
var guardPC = reflect.ValueOf((&guards{}).contained(nil)).Pointer()

// guarded reports whether the built-in function fn runs a guard.
func guarded(fn goja.Value) bool {
	f, ok := fn.(*goja.Object).Export().(nativeFunc)
	return ok && reflect.ValueOf(f).Pointer() == guardPC
}

// built reports whether goja has built obj's templated property name.
func built(t *testing.T, obj *goja.Object, name string) bool {
	t.Helper()
	_, b, ok := templateOf(obj, name)
	if !ok {
		t.Fatalf("%s is not a templated property", name)
	}
	return b
}

// A prepared runtime has not built the families guarded lazily, and
// whatever first reaches one — the program reading, writing, deleting or
// describing the global, a subclass, the host's own code — finds it
// guarded.
func TestLazyGuardsAreInPlaceHoweverAFamilyIsReached(t *testing.T) {
	if !lazyTemplates.ok {
		t.Fatal("goja's templates were not found: the guards are all installed up front")
	}
	routes := map[string]string{
		"read":       `Uint8Array`,
		"typeof":     `typeof Int8Array`,
		"write":      `globalThis.Int16Array = null`,
		"delete":     `delete globalThis.Int32Array`,
		"descriptor": `Object.getOwnPropertyDescriptor(globalThis, 'Float32Array')`,
		"subclass":   `class U extends Float64Array {}; new U(1)`,
		"host":       `new TextEncoder().encode('x')`,
		"globals":    `Object.getOwnPropertyDescriptors(globalThis)`,
	}
	for name, route := range routes {
		t.Run(name, func(t *testing.T) {
			s := prepareSession(false)
			global := s.vm.GlobalObject()
			arrayProto := s.vm.Get("Array").(*goja.Object).Get("prototype").(*goja.Object)
			if built(t, global, "Uint8Array") || built(t, global, "Map") || built(t, arrayProto, "flat") {
				t.Fatal("a prepared runtime built a family the guards wait for")
			}
			if _, err := s.vm.RunString(route); err != nil {
				t.Fatal(err)
			}
			if s.guards.typed == nil {
				t.Fatal("reaching a typed array constructor left the family unguarded")
			}
			v, err := s.vm.RunString(`const p = Object.getPrototypeOf(Uint8Array.prototype); [Uint8Array, p.forEach, p.join, [].flat, 'x'.repeat, Object.getPrototypeOf(new Map().keys()).next]`)
			if err != nil {
				t.Fatal(err)
			}
			list := v.(*goja.Object)
			if _, isGuard := s.guards.sources[list.Get("0").(*goja.Object)]; !isGuard {
				t.Error("Uint8Array is goja's own constructor")
			}
			for i, what := range []string{"", "forEach", "join", "Array.prototype.flat", "String.prototype.repeat", "the Map iterator's next"} {
				if i > 0 && !guarded(list.Get(key(int64(i)))) {
					t.Errorf("%s is not guarded", what)
				}
			}
		})
	}
}
