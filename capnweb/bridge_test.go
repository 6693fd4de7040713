package capnweb

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"testing"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// A gateway passes a client's callback on to a backend session: the stub
// of one session becomes an export of another, and calls are forwarded.
// A promise of one session is an argument in another.
func TestStubsAcrossSessions(t *testing.T) {
	var kept sync.Map
	backend, toBackend := pair(t, testMain(&kept), nil)
	gateway, client := pair(t, Methods{
		"forward": func(ctx context.Context, args []any) (any, error) {
			return toBackend.Main().Call(ctx, "callOnce", args[0])
		},
		"forwardKeep": func(ctx context.Context, args []any) (any, error) {
			return toBackend.Main().Call(ctx, "keep", "g", args[0])
		},
		"fireKept": func(ctx context.Context, args []any) (any, error) {
			return toBackend.Main().Call(ctx, "fireKept", "g", args[0])
		},
		"addLater": func(ctx context.Context, args []any) (any, error) {
			// A promise of the backend session in a reply to the client:
			// it crosses as ["promise",-N] and is resolved later.
			return map[string]any{"sum": toBackend.Main().Invoke("add", 20, 22)}, nil
		},
	}, nil)
	ctx := ctx10(t)
	cb := Func(func(ctx context.Context, args []any) (any, error) { return fmt.Sprint(args[0], "!"), nil })
	v, err := client.Main().Call(ctx, "forward", cb)
	if err != nil || v != "callback said: hello!" {
		t.Fatalf("forward = %v %v", v, err)
	}
	if v, err := client.Main().Call(ctx, "forwardKeep", cb); err != nil || v != "kept" {
		t.Fatalf("forwardKeep = %v %v", v, err)
	}
	if v, err := client.Main().Call(ctx, "fireKept", "late"); err != nil || v != "late!" {
		t.Fatalf("fireKept = %v %v", v, err)
	}
	v, err = client.Main().Call(ctx, "addLater")
	if err != nil || mustJSON(v) != `{"sum":42}` {
		t.Fatalf("addLater = %v %v", v, err)
	}
	for _, s := range []*Session{backend, toBackend, gateway, client} {
		waitStats(t, s, Stats{Imports: 1, Exports: 1})
	}
}

type reflected struct{}

func (r *reflected) ProtocolVersion() int     { return 1 }
func (r *reflected) Add(a, b float64) float64 { return a + b }
func (r *reflected) Greet(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", NewError("TypeError", "no name", jsvalue.Member{Key: "code", Value: "E_NAME"})
	}
	return "hi " + name, nil
}
func (r *reflected) Sum(first int, rest ...any) float64 {
	s := float64(first)
	for _, x := range rest {
		s += x.(float64)
	}
	return s
}
func (r *reflected) Call(ctx context.Context, cb *Stub) (any, error) { return cb.Call(ctx, "", 5) }

func TestTargetFromMethods(t *testing.T) {
	target, err := TargetFromMethods(&reflected{})
	if err != nil {
		t.Fatal(err)
	}
	_, c := pair(t, target, nil)
	ctx := ctx10(t)
	check := func(method string, want any, args ...any) {
		t.Helper()
		v, err := c.Main().Call(ctx, method, args...)
		if err != nil || v != want {
			t.Fatalf("%s = %v %v, want %v", method, v, err, want)
		}
	}
	check("protocolVersion", 1.0)
	check("add", 5.0, 2, 3)
	check("greet", "hi ada", "ada")
	check("sum", 10.0, 1, 2, 3, 4)
	check("call", 6.0, Func(func(ctx context.Context, args []any) (any, error) { return args[0].(float64) + 1, nil }))
	_, err = c.Main().Call(ctx, "greet", "")
	var je *Error
	if e, ok := err.(*Error); ok {
		je = e
	}
	if je == nil || je.Code() != "E_NAME" {
		t.Fatalf("greet('') = %v", err)
	}
	if _, err := c.Main().Call(ctx, "add", "x", 1); err == nil {
		t.Fatal("a string for a float parameter was accepted")
	}
	if _, err := c.Main().Call(ctx, "constructor"); err == nil {
		t.Fatal("constructor is callable")
	}
}

// A received number becomes an integer parameter only when it is one and
// fits the type; the range is decided on the float, never on a conversion
// Go leaves undefined (1e30 once became math.MinInt64).
func TestConvertArgIntegers(t *testing.T) {
	for _, c := range []struct {
		f    float64
		t    reflect.Type
		want any // the converted value, or the error's text
	}{
		{42, reflect.TypeOf(int(0)), int(42)},
		{-128, reflect.TypeOf(int8(0)), int8(-128)},
		{127, reflect.TypeOf(int8(0)), int8(127)},
		{128, reflect.TypeOf(int8(0)), "128 out of range"},
		{-129, reflect.TypeOf(int8(0)), "-129 out of range"},
		{-9223372036854775808, reflect.TypeOf(int64(0)), int64(math.MinInt64)},
		{9223372036854775808, reflect.TypeOf(int64(0)), "9.223372036854776e+18 out of range"},
		{1e30, reflect.TypeOf(int64(0)), "1e+30 out of range"},
		{-1e30, reflect.TypeOf(int64(0)), "-1e+30 out of range"},
		{255, reflect.TypeOf(uint8(0)), uint8(255)},
		{256, reflect.TypeOf(uint8(0)), "256 out of range"},
		{18446744073709549568, reflect.TypeOf(uint64(0)), uint64(18446744073709549568)},
		{18446744073709551616, reflect.TypeOf(uint64(0)), "1.8446744073709552e+19 out of range"},
		{1e30, reflect.TypeOf(uint(0)), "1e+30 out of range"},
		{-1, reflect.TypeOf(uint32(0)), "-1 is not a non-negative integer"},
		{1.5, reflect.TypeOf(int(0)), "1.5 is not an integer"},
		{math.NaN(), reflect.TypeOf(int(0)), "NaN is not an integer"},
		{math.Inf(1), reflect.TypeOf(uint(0)), "+Inf is not an integer"},
	} {
		v, err := convertArg(c.f, c.t)
		if msg, isErr := c.want.(string); isErr {
			if err == nil || err.Error() != msg {
				t.Errorf("%v as %s: %v, %v; want the error %q", c.f, c.t, v, err, msg)
			}
			continue
		}
		if err != nil || v.Interface() != c.want {
			t.Errorf("%v as %s: %v, %v; want %v", c.f, c.t, v, err, c.want)
		}
	}
}
