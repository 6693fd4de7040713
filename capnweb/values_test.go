package capnweb

import (
	"context"
	"math"
	"math/big"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

func echoMain() Methods {
	return Methods{
		"echo": func(ctx context.Context, args []any) (any, error) { return args[0], nil },
	}
}

// Every value type crosses Go → Go and comes back as the decoder's form.
func TestValuesRoundTrip(t *testing.T) {
	_, c := pair(t, echoMain(), nil)
	u, _ := url.Parse("https://example.com/a?b=1")
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	when := time.UnixMilli(1749342170815).UTC()
	type inner struct {
		A    int    `json:"a"`
		B    string `json:"b,omitempty"`
		Skip int    `json:"-"`
	}
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"null", nil, nil},
		{"true", true, true},
		{"string", "héllo \u2028 \"q\" <>&\x01", "héllo \u2028 \"q\" <>&\x01"},
		{"int", 42, 42.0},
		{"float", 1.5e-7, 1.5e-7},
		{"big float", 1e21, 1e21},
		{"undefined", jsvalue.Undefined, jsvalue.Undefined},
		{"bigint", huge, huge},
		{"date", when, when},
		{"bytes", []byte{1, 2, 3, 250}, []byte{1, 2, 3, 250}},
		{"arraybuffer", Bytes{Type: TypeArrayBuffer, Data: []byte("hi")}, Bytes{Type: TypeArrayBuffer, Data: []byte("hi")}},
		{"uint16array", Bytes{Type: TypeUint16Array, Data: []byte{1, 0, 2, 1}}, Bytes{Type: TypeUint16Array, Data: []byte{1, 0, 2, 1}}},
		{"url", u, u},
		{"headers", Headers{{"content-type", "text/plain"}}, Headers{{"content-type", "text/plain"}}},
		{"array", []any{1, []any{2, []any{3}}, "x"}, []any{1.0, []any{2.0, []any{3.0}}, "x"}},
		{"empty array", []any{}, []any{}},
		{"nested empty", []any{[]any{}}, []any{[]any{}}},
		{"typed slice", []string{"a", "b"}, []any{"a", "b"}},
		{"object", map[string]any{"a": 1, "b": []any{true}}, map[string]any{"a": 1.0, "b": []any{true}}},
		{"ordered", jsvalue.Object{{Key: "z", Value: 1}, {Key: "a", Value: 2}}, map[string]any{"z": 1.0, "a": 2.0}},
		{"struct", inner{A: 3, Skip: 9}, map[string]any{"a": 3.0}},
		{"prototype keys dropped", map[string]any{"constructor": 1, "toString": 2, "toJSON": 3, "__proto__": 4, "ok": 5}, map[string]any{"ok": 5.0}},
		{"error", NewError("RangeError", "as value", jsvalue.Member{Key: "code", Value: "E1"}), NewError("RangeError", "as value", jsvalue.Member{Key: "code", Value: "E1"})},
		{"undefined in object", map[string]any{"u": jsvalue.Undefined}, map[string]any{"u": jsvalue.Undefined}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Main().Call(ctx10(t), "echo", tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !valuesEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func valuesEqual(a, b any) bool {
	switch x := a.(type) {
	case *big.Int:
		y, ok := b.(*big.Int)
		return ok && x.Cmp(y) == 0
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	case *url.URL:
		y, ok := b.(*url.URL)
		return ok && x.String() == y.String()
	}
	return reflect.DeepEqual(a, b)
}

// NaN, ±Infinity and -0 use the special forms (and -0 becomes 0 as with
// JSON.stringify).
func TestValuesSpecialNumbers(t *testing.T) {
	_, c := pair(t, echoMain(), nil)
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)} {
		got, err := c.Main().Call(ctx10(t), "echo", f)
		if err != nil {
			t.Fatal(err)
		}
		g := got.(float64)
		switch {
		case math.IsNaN(f):
			if !math.IsNaN(g) {
				t.Fatalf("NaN came back as %v", g)
			}
		case f == 0:
			if g != 0 || math.Signbit(g) {
				t.Fatalf("-0 came back as %v (signbit %v)", g, math.Signbit(g))
			}
		default:
			if g != f {
				t.Fatalf("%v came back as %v", f, g)
			}
		}
	}
}

// The exact encodings of section 4.1.
func TestEncodeVectors(t *testing.T) {
	cases := []struct {
		in   any
		want string
	}{
		{nil, `null`},
		{jsvalue.Undefined, `["undefined"]`},
		{math.NaN(), `["nan"]`},
		{math.Inf(1), `["inf"]`},
		{math.Inf(-1), `["-inf"]`},
		{math.Copysign(0, -1), `0`},
		{1e21, `1e+21`},
		{1e-7, `1e-7`},
		{1.5e-7, `1.5e-7`},
		{123456789012, `123456789012`},
		{0.1, `0.1`},
		{-2.5, `-2.5`},
		{big.NewInt(-123), `["bigint","-123"]`},
		{time.UnixMilli(1749342170815), `["date",1749342170815]`},
		{time.Time{}, `["date",null]`},
		{[]byte{1, 2, 3, 250}, `["bytes","AQID+g"]`},
		{Bytes{Type: TypeArrayBuffer, Data: []byte("hi")}, `["bytes","aGk","ArrayBuffer"]`},
		{[]any{1, []any{2, []any{3}}, "x"}, `[[1,[[2,[[3]]]],"x"]]`},
		{[]any{}, `[[]]`},
		{[]any{[]any{}}, `[[[[]]]]`},
		{[][]string{{"a", "b"}}, `[[[["a","b"]]]]`},
		{"\u2028<>&\"\\\n\x1f", "\"\u2028<>&\\\"\\\\\\n\\u001f\""},
		{"\xff", "\"\ufffd\""},
		{map[string]any{"b": 1, "a": 2, "10": 3, "2": 4}, `{"2":4,"10":3,"a":2,"b":1}`},
		{&Error{Name: "Error", Message: "boom"}, `["error","Error","boom"]`},
		{&Error{Name: "Error", Message: "x", Stack: "at y"}, `["error","Error","x","at y"]`},
		{&Error{Message: "x", Props: jsvalue.Object{{Key: "code", Value: "HANDLES_CLOSED"}}}, `["error","Error","x",null,{"code":"HANDLES_CLOSED"}]`},
		{Headers{{"accept", "*/*"}}, `["headers",[["accept","*/*"]]]`},
	}
	for _, tc := range cases {
		e := &encoder{maxDepth: MaxDepth}
		if err := e.value(tc.in, 0); err != nil {
			t.Fatalf("%#v: %v", tc.in, err)
		}
		if string(e.buf) != tc.want {
			t.Errorf("%#v\n got %s\nwant %s", tc.in, e.buf, tc.want)
		}
	}
}

// Values a JavaScript receiver would refuse are refused on send, and the
// call fails locally without breaking the session.
func TestEncodeRefusals(t *testing.T) {
	_, c := pair(t, echoMain(), nil)
	deep := any("x")
	for i := 0; i < 300; i++ {
		deep = []any{deep}
	}
	for _, v := range []any{make(chan int), map[int]int{1: 2}, Bytes{Type: "Bogus"}, Bytes{Type: TypeUint32Array, Data: []byte{1}}, deep} {
		if _, err := c.Main().Call(ctx10(t), "echo", v); err == nil {
			t.Fatalf("%T: expected a send error", v)
		}
	}
	if v, err := c.Main().Call(ctx10(t), "echo", "still alive"); err != nil || v != "still alive" {
		t.Fatalf("session broken after refusals: %v %v", v, err)
	}
}

// With KeepObjectOrder, received objects are Objects in wire order, at
// every depth, still without prototype-named keys.
func TestKeepObjectOrder(t *testing.T) {
	a, b := Pipe()
	got := make(chan any, 1)
	srv := NewSession(a, Methods{"take": func(ctx context.Context, args []any) (any, error) {
		got <- args[0]
		return args[0], nil
	}}, Options{KeepObjectOrder: true})
	c := NewSession(b, nil, Options{})
	defer srv.Close()
	defer c.Close()
	in := jsvalue.Object{{Key: "z", Value: 1}, {Key: "toString", Value: 2}, {Key: "a", Value: []any{jsvalue.Object{{Key: "y", Value: true}, {Key: "b", Value: nil}}}}}
	back, err := c.Main().Call(ctx10(t), "take", in)
	if err != nil {
		t.Fatal(err)
	}
	want := jsvalue.Object{{Key: "z", Value: 1.0}, {Key: "a", Value: []any{jsvalue.Object{{Key: "y", Value: true}, {Key: "b", Value: nil}}}}}
	if v := <-got; !reflect.DeepEqual(v, want) {
		t.Fatalf("server got %#v", v)
	}
	// The client decodes to maps (its default), from the ordered echo.
	if mustJSON(back) != `{"a":[{"b":null,"y":true}],"z":1}` {
		t.Fatalf("client got %s", mustJSON(back))
	}
}
