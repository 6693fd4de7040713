package capnweb_test

// The Go half of the named test values of interop/values.mjs: the same names, built from Go
// values. goSendValues is what a Go peer passes (a mix of Go types, so the encoder meets ints,
// typed slices, structs and ordered Objects); goReceivedValues is what a Go peer must decode
// from any sender, JS or Go. The two JS tables and these two must agree name by name.

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"sort"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
)

// The string_unicode value of values.mjs, byte for byte.
const unicodeTestString = "h\u00e9llo w\u00f6rld \u2713 \U0001F600 \u65e5\u672c\u8a9e \u2028\u2029 <>&\"\\\n\t\x00 \x7f"

func bigInt(s string) *big.Int {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("bad test bigint " + s)
	}
	return n
}

func nestedValue(depth int) any {
	if depth == 0 {
		return "bottom"
	}
	return []any{nestedValue(depth - 1)}
}

// objectTypes is object_types as a struct, to exercise struct encoding.
type objectTypes struct {
	Bytes []byte         `json:"bytes"`
	When  time.Time      `json:"when"`
	Big   *big.Int       `json:"big"`
	Buf   capnweb.Bytes  `json:"buf"`
	Skip  string         `json:"-"`
	Empty map[string]any `json:"empty,omitempty"`
}

// goSendValues builds a fresh copy of every named value as a Go peer passes it.
func goSendValues() map[string]any {
	return map[string]any{
		"string_ascii":           "hello",
		"string_empty":           "",
		"string_unicode":         unicodeTestString,
		"int":                    42,
		"negative":               int64(-7),
		"float":                  3.25,
		"max_safe":               int64(9007199254740991),
		"tiny":                   5e-324,
		"huge":                   math.MaxFloat64,
		"negzero":                math.Copysign(0, -1),
		"nan":                    math.NaN(),
		"inf":                    math.Inf(1),
		"ninf":                   math.Inf(-1),
		"bool_true":              true,
		"bool_false":             false,
		"null":                   nil,
		"undefined":              jsvalue.Undefined,
		"bigint":                 bigInt("12345678901234567890"),
		"bigint_negative":        bigInt("-98765432109876543210"),
		"bigint_zero":            big.NewInt(0),
		"date":                   time.UnixMilli(1749342170815),
		"date_epoch":             time.UnixMilli(0),
		"date_before_epoch":      time.UnixMilli(-86400000),
		"bytes":                  []byte{0, 1, 2, 250, 255},
		"bytes_empty":            []byte{},
		"arraybuffer":            capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: []byte{9, 8, 7}},
		"array_empty":            []any{},
		"array_nested":           []any{1, []any{2, []any{uint8(3), []int{}}}, "x", [][]string{{}}},
		"array_mixed":            []any{nil, jsvalue.Undefined, true, "s", float32(1.5), big.NewInt(2), []time.Time{time.UnixMilli(0)}},
		"object_empty":           map[string]any{},
		"object_nested":          map[string]any{"a": map[string]any{"b": map[string][]int{"c": {1, 2}}}, "key with space": 1, "\u00fcn\u00efcode": "v", "": "empty key"},
		"object_undefined_field": jsvalue.Object{{Key: "u", Value: jsvalue.Undefined}, {Key: "n", Value: nil}},
		"object_types": objectTypes{
			Bytes: []byte{1}, When: time.UnixMilli(5), Big: big.NewInt(7),
			Buf: capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: []byte{2, 3}}, Skip: "not sent",
		},
		"error":       capnweb.NewError("Error", "plain error"),
		"error_code":  capnweb.NewError("Error", "error with a code", jsvalue.Member{Key: "code", Value: "E_CODE"}, jsvalue.Member{Key: "count", Value: 5}),
		"error_typed": capnweb.NewError("TypeError", "typed error", jsvalue.Member{Key: "code", Value: "E_TYPED"}),
		"deep":        nestedValue(100),
	}
}

func errorValue(name, message string, props ...jsvalue.Member) *capnweb.Error {
	return &capnweb.Error{Name: name, Message: message, Props: jsvalue.Object(props)}
}

// goReceivedValues is every named value as a Go peer decodes it after one trip over the wire.
func goReceivedValues() map[string]any {
	return map[string]any{
		"string_ascii":           "hello",
		"string_empty":           "",
		"string_unicode":         unicodeTestString,
		"int":                    42.0,
		"negative":               -7.0,
		"float":                  3.25,
		"max_safe":               9007199254740991.0,
		"tiny":                   5e-324,
		"huge":                   math.MaxFloat64,
		"negzero":                0.0, // -0 travels as 0, as JSON.stringify writes it
		"nan":                    math.NaN(),
		"inf":                    math.Inf(1),
		"ninf":                   math.Inf(-1),
		"bool_true":              true,
		"bool_false":             false,
		"null":                   nil,
		"undefined":              jsvalue.Undefined,
		"bigint":                 bigInt("12345678901234567890"),
		"bigint_negative":        bigInt("-98765432109876543210"),
		"bigint_zero":            big.NewInt(0),
		"date":                   time.UnixMilli(1749342170815).UTC(),
		"date_epoch":             time.UnixMilli(0).UTC(),
		"date_before_epoch":      time.UnixMilli(-86400000).UTC(),
		"bytes":                  []byte{0, 1, 2, 250, 255},
		"bytes_empty":            []byte{},
		"arraybuffer":            capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: []byte{9, 8, 7}},
		"array_empty":            []any{},
		"array_nested":           []any{1.0, []any{2.0, []any{3.0, []any{}}}, "x", []any{[]any{}}},
		"array_mixed":            []any{nil, jsvalue.Undefined, true, "s", 1.5, big.NewInt(2), []any{time.UnixMilli(0).UTC()}},
		"object_empty":           map[string]any{},
		"object_nested":          map[string]any{"a": map[string]any{"b": map[string]any{"c": []any{1.0, 2.0}}}, "key with space": 1.0, "\u00fcn\u00efcode": "v", "": "empty key"},
		"object_undefined_field": map[string]any{"u": jsvalue.Undefined, "n": nil},
		"object_types": map[string]any{
			"bytes": []byte{1}, "when": time.UnixMilli(5).UTC(), "big": big.NewInt(7),
			"buf": capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: []byte{2, 3}},
		},
		"error":       errorValue("Error", "plain error"),
		"error_code":  errorValue("Error", "error with a code", jsvalue.Member{Key: "code", Value: "E_CODE"}, jsvalue.Member{Key: "count", Value: 5.0}),
		"error_typed": errorValue("TypeError", "typed error", jsvalue.Member{Key: "code", Value: "E_TYPED"}),
		"deep":        nestedValue(100),
	}
}

// valueNames lists the table's names in a stable order.
func valueNames() []string {
	var names []string
	for n := range goSendValues() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// goDiff compares a decoded value with the expected one strictly: Go types, NaN, the sign of
// zero, bytes with or without a type marker, error names, messages and own properties. It
// returns "" when they match, else where they differ.
func goDiff(got, want any) string { return goDiffAt("$", got, want) }

func goDiffAt(path string, got, want any) string {
	mismatch := func() string {
		return fmt.Sprintf("%s: got %T %v, want %T %v", path, got, short(got), want, short(want))
	}
	switch w := want.(type) {
	case nil:
		if got != nil {
			return mismatch()
		}
	case jsvalue.UndefinedValue:
		if _, ok := got.(jsvalue.UndefinedValue); !ok {
			return mismatch()
		}
	case bool, string:
		if got != want {
			return mismatch()
		}
	case float64:
		g, ok := got.(float64)
		if !ok {
			return mismatch()
		}
		if math.IsNaN(w) {
			if !math.IsNaN(g) {
				return mismatch()
			}
		} else if g != w || math.Signbit(g) != math.Signbit(w) {
			return mismatch()
		}
	case *big.Int:
		g, ok := got.(*big.Int)
		if !ok || g == nil || g.Cmp(w) != 0 {
			return mismatch()
		}
	case time.Time:
		g, ok := got.(time.Time)
		if !ok || !g.Equal(w) {
			return mismatch()
		}
	case []byte:
		g, ok := got.([]byte)
		if !ok || !bytes.Equal(g, w) {
			return mismatch()
		}
	case capnweb.Bytes:
		g, ok := got.(capnweb.Bytes)
		if !ok || g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			return mismatch()
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return mismatch()
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: got length %d, want %d", path, len(g), len(w))
		}
		for i := range w {
			if d := goDiffAt(fmt.Sprintf("%s[%d]", path, i), g[i], w[i]); d != "" {
				return d
			}
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return mismatch()
		}
		return diffFields(path, g, w)
	case *capnweb.Error:
		g, ok := got.(*capnweb.Error)
		if !ok || g == nil {
			return mismatch()
		}
		if g.Name != w.Name || g.Message != w.Message {
			return fmt.Sprintf("%s: got error %s: %q, want %s: %q", path, g.Name, g.Message, w.Name, w.Message)
		}
		return diffFields(path+".props", g.Props.Map(), w.Props.Map())
	default:
		return fmt.Sprintf("%s: no comparison for expected type %T", path, want)
	}
	return ""
}

func diffFields(path string, got, want map[string]any) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%s: got keys %v, want %v", path, mapKeys(got), mapKeys(want))
	}
	for k, wv := range want {
		gv, ok := got[k]
		if !ok {
			return fmt.Sprintf("%s: got keys %v, want %v", path, mapKeys(got), mapKeys(want))
		}
		if d := goDiffAt(path+"."+k, gv, wv); d != "" {
			return d
		}
	}
	return ""
}

func mapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func short(v any) string {
	s := fmt.Sprintf("%v", v)
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
