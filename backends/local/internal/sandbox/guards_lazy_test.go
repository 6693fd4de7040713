package sandbox

import (
	"reflect"
	"strings"
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

// A prepared runtime builds neither Reflect, RangeError nor the string
// iterator. Whatever first reaches one finds its guards in place, and the
// guards that need Reflect or RangeError themselves build goja's own when
// the program has not.
func TestReflectRangeErrorAndStringIteratorAreGuardedLazily(t *testing.T) {
	if !lazyTemplates.ok || lazyTemplates.symProps == nil {
		t.Fatal("goja's templates were not found: the guards are all installed up front")
	}
	const iterNexts = `[Object.getPrototypeOf(''[Symbol.iterator]()).next, Object.getPrototypeOf([][Symbol.iterator]()).next, JSON.stringify, JSON.parse]`
	const reflects = `[Reflect.apply, Reflect.construct, Reflect.ownKeys]`
	routes := []struct {
		name, route, want string
		// guardsOf is a program listing built-ins that must be guarded
		// afterwards ("" when the route took the global away).
		guardsOf string
	}{
		{"read Reflect", `Reflect.has({}, 'x')`, "false", reflects},
		{"describe Reflect", `typeof Object.getOwnPropertyDescriptor(globalThis, 'Reflect').value.apply`, "function", reflects},
		{"delete Reflect", `delete globalThis.Reflect`, "true", ""},
		{"replace Reflect", `globalThis.Reflect = { has: () => true }; 1`, "1", ""},
		{"spread a string", `[...'abc'].length`, "3", iterNexts},
		{"for-of a string", `let n = 0; for (const c of 'ab') n++; n`, "2", iterNexts},
		{"the string's symbols", `Object.getOwnPropertySymbols(String.prototype).length`, "1", iterNexts},
		{"the guards' Reflect.has", `Array.prototype.indexOf.call({ length: 2 ** 18, 5: 'x' }, 'x')`, "5", reflects},
		{"the guards' RangeError", `try { Array.prototype.with.call({ length: 2 ** 16 }, 2 ** 17, 0) } catch (e) { e.name + ': ' + e.message }`,
			"RangeError: Invalid index 131072", `[RangeError.prototype.constructor === RangeError ? Reflect.apply : null]`},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			s := prepareSession(false)
			global := s.vm.GlobalObject()
			stringProto := s.vm.Get("String").(*goja.Object).Get("prototype").(*goja.Object)
			if built(t, global, "Reflect") || built(t, global, "RangeError") {
				t.Fatal("a prepared runtime built Reflect or RangeError")
			}
			if _, b, ok := templateOfSym(stringProto, goja.SymIterator); !ok || b {
				t.Fatalf("a prepared runtime built String.prototype[Symbol.iterator] (templated: %v)", ok)
			}
			v, err := s.vm.RunString(r.route)
			if err != nil {
				t.Fatal(err)
			}
			if v.String() != r.want {
				t.Fatalf("route gave %q, want %q", v.String(), r.want)
			}
			if strings.HasPrefix(r.name, "the guards' ") && !built(t, global, strings.TrimPrefix(strings.TrimSuffix(r.name, ".has"), "the guards' ")) {
				t.Fatal("the guard did not build what it uses")
			}
			if r.guardsOf == "" {
				// The program took the global: the guards captured goja's
				// own Reflect when it was built, before the program's
				// write or delete.
				has, get := s.guards.reflectOps()
				if v, err := has(goja.Undefined(), s.vm.NewObject(), s.vm.ToValue("x")); err != nil || v.ToBoolean() {
					t.Fatalf("the guards' Reflect.has is not goja's: %v, %v", v, err)
				}
				if get == nil {
					t.Fatal("the guards did not capture Reflect.get")
				}
				return
			}
			list, err := s.vm.RunString(r.guardsOf)
			if err != nil {
				t.Fatal(err)
			}
			l := list.(*goja.Object)
			for i := int64(0); i < lengthOf(l); i++ {
				if !guarded(l.Get(key(i))) {
					t.Errorf("built-in %d of %s is not guarded", i, r.guardsOf)
				}
			}
		})
	}
}
