package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/supolka/codemode-gateway/jsvalue"
)

func runNode(t *testing.T, mode string, input any) []byte {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nodeBinary(t), filepath.Join("testdata", "check-vectors.mjs"), mode)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v", mode, err)
	}
	return out
}

// TestNumberFormattingMatchesJavaScript formats random doubles (random bit
// patterns, so every exponent range, and random short decimals) in Go and
// in Node and compares.
func TestNumberFormattingMatchesJavaScript(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var fs []float64
	for range 4000 {
		fs = append(fs, math.Float64frombits(r.Uint64()))
	}
	for range 2000 {
		// Short decimals around every plain/exponential boundary.
		fs = append(fs, float64(r.IntN(100000))*math.Pow(10, float64(r.IntN(50)-25)))
	}
	fs = append(fs, 0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), 1e21, 1e-7, 999999999999999999999.0,
		0.000001, 0.0000001, math.SmallestNonzeroFloat64, math.MaxFloat64, 1<<53+1, 4.35, 0.1, 5e-7)
	hexes := make([]string, len(fs))
	for i, f := range fs {
		hexes[i] = fmt.Sprintf("%016x", math.Float64bits(f))
	}
	var js [][2]string
	if err := json.Unmarshal(runNode(t, "--numbers", hexes), &js); err != nil {
		t.Fatal(err)
	}
	if len(js) != len(fs) {
		t.Fatalf("node answered %d numbers for %d", len(js), len(fs))
	}
	for i, f := range fs {
		if got := jsvalue.FormatNumber(f); got != js[i][0] {
			t.Errorf("jsvalue.FormatNumber(%016x) = %q, String() in JavaScript = %q", math.Float64bits(f), got, js[i][0])
		}
		got, err := StringifyForDispatch(f)
		if err != nil {
			t.Fatal(err)
		}
		if got != js[i][1] {
			t.Errorf("StringifyForDispatch(%016x) = %q, JSON.stringify = %q", math.Float64bits(f), got, js[i][1])
		}
	}
}

// goStringOf builds the Go string ParseForDispatch gives for a JavaScript
// string: pairs combined into UTF-8, lone surrogates in WTF-8.
func goStringOf(units []uint16) string {
	var b []byte
	for i := 0; i < len(units); i++ {
		u := rune(units[i])
		if utf16.IsSurrogate(u) {
			if u < 0xdc00 && i+1 < len(units) && units[i+1] >= 0xdc00 && units[i+1] < 0xe000 {
				b = append(b, string(utf16.DecodeRune(u, rune(units[i+1])))...)
				i++
				continue
			}
			b = append(b, 0xed, byte(0x80|(u>>6)&0x3f), byte(0x80|u&0x3f)) // WTF-8
			continue
		}
		b = append(b, string(u)...)
	}
	return string(b)
}

// TestStringQuotingMatchesJavaScript quotes random UTF-16 strings, biased
// towards the characters that need care, in Go and in Node.
func TestStringQuotingMatchesJavaScript(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []uint16{0, 1, 8, 9, 10, 12, 13, 0x1f, 0x20, '"', '\\', '/', '<', '>', '&', 0x7f, 0x80, 0xff,
		0x2028, 0x2029, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xd83d, 0xde00, 0xfeff, 0xfffd, 0xffff}
	var all [][]uint16
	for range 2000 {
		n := r.IntN(12)
		units := make([]uint16, n)
		for i := range units {
			if r.IntN(3) == 0 {
				units[i] = uint16(r.IntN(0x10000))
			} else {
				units[i] = special[r.IntN(len(special))]
			}
		}
		all = append(all, units)
	}
	var js []string
	if err := json.Unmarshal(runNode(t, "--strings", all), &js); err != nil {
		t.Fatal(err)
	}
	for i, units := range all {
		s := goStringOf(units)
		got, err := StringifyForDispatch(s)
		if err != nil {
			t.Fatal(err)
		}
		if got != js[i] {
			t.Errorf("units %x: Go wrote %q, JavaScript %q", units, got, js[i])
		}
		if n := jsvalue.StringSize(s); n != len(got) {
			t.Errorf("jsonStringLen = %d, written %d", n, len(got))
		}
		back, err := ParseForDispatch(js[i])
		if err != nil {
			t.Fatal(err)
		}
		if back != s {
			t.Errorf("units %x: parsed back to %q, want %q", units, back, s)
		}
	}
}

func TestStringifyInvalidUTF8(t *testing.T) {
	got, err := StringifyForDispatch("a\xffb\xed\xa0")
	if err != nil {
		t.Fatal(err)
	}
	// \xff is no UTF-8 and \xed\xa0 is a truncated surrogate: each byte
	// that is not UTF-8 becomes U+FFFD.
	if want := "\"a\uFFFDb\uFFFD\uFFFD\""; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestStringifyMapOrder(t *testing.T) {
	got, err := StringifyForDispatch(map[string]any{"b": 1, "a": 2, "10": 3, "9": 4, "01": 5})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"9":4,"10":3,"01":5,"a":2,"b":1}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	// Typed maps through reflection get the same order.
	got, err = StringifyForDispatch(map[string]int{"b": 1, "2": 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"2":2,"b":1}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestStringifyObjectRepeatedKey(t *testing.T) {
	got, err := StringifyForDispatch(jsvalue.Object{{Key: "a", Value: 1}, {Key: "b", Value: 2}, {Key: "a", Value: 3}, {Key: "b", Value: jsvalue.Undefined}})
	if err != nil {
		t.Fatal(err)
	}
	// JavaScript: o.a = 1; o.b = 2; o.a = 3; o.b = undefined.
	if want := `{"a":3}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestStringifyGoTypes(t *testing.T) {
	type level string
	type point struct {
		X int    `json:"x"`
		Y int    `json:"y,omitempty"`
		L level  `json:"l"`
		B []byte `json:"b"`
	}
	var nilMap map[string]any
	var nilPtr *point
	cases := []struct {
		v    any
		want string
	}{
		{point{X: 1, L: "warn", B: []byte{1}}, `{"x":1,"l":"warn","b":"AQ=="}`},
		{&point{X: 2}, `{"x":2,"l":"","b":null}`},
		{nilPtr, `null`},
		{nilMap, `null`},
		{[]byte(nil), `{"__executor_binary_v1__":"Uint8Array","data":""}`},
		{[]int(nil), `null`},
		{[2]int{1, 2}, `[1,2]`},
		{level("log"), `"log"`},
		{json.RawMessage(` { "b" : 1 , "a":[ 1e2 , "\u003c"] } `), `{"b":1,"a":[100,"<"]}`},
		{json.Number("1e21"), `1e+21`},
		{map[int]string{2: "b", 1: "a"}, `{"1":"a","2":"b"}`},
		{[]any{int8(-1), uint16(2), float32(0.1)}, `[-1,2,0.10000000149011612]`},
		{map[string]any{"f": func() {}, "c": make(chan int), "u": jsvalue.Undefined}, `{}`},
	}
	for _, c := range cases {
		got, err := StringifyForDispatch(c.v)
		if err != nil {
			t.Errorf("%T: %v", c.v, err)
			continue
		}
		if got != c.want {
			t.Errorf("%#v: got %s, want %s", c.v, got, c.want)
		}
	}
}

func TestStringifyRefusals(t *testing.T) {
	if _, err := StringifyForDispatch(jsvalue.Undefined); err == nil {
		t.Error("top-level Undefined was written")
	}
	if _, err := StringifyForDispatch(func() {}); err == nil {
		t.Error("top-level function was written")
	}
	if _, err := StringifyForDispatch(complex(1, 2)); err == nil {
		t.Error("complex number was written")
	}
	if _, err := StringifyForDispatch(json.Number("nope")); err == nil {
		t.Error("invalid json.Number was written")
	}
	cyclic := []any{nil}
	cyclic[0] = cyclic
	if _, err := StringifyForDispatch(cyclic); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("cyclic value: %v", err)
	}
}

func TestParseForDispatchValues(t *testing.T) {
	v, err := ParseForDispatch(` {"a":[1,"x",true,false,null,{"b":-0.5e1}],"bin":{"data":"AQID","__executor_binary_v1__":"ArrayBufferView"},"a":7} `)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a":   7.0, // the last of a repeated key wins
		"bin": []byte{1, 2, 3},
	}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got %#v, want %#v", v, want)
	}
	v, err = ParseForDispatch(`[1e400,-1e400,1e-400,"\ud83d\ude00\u00e9\/"]`)
	if err != nil {
		t.Fatal(err)
	}
	list := v.([]any)
	if !math.IsInf(list[0].(float64), 1) || !math.IsInf(list[1].(float64), -1) || list[2].(float64) != 0 || list[3] != "😀é/" {
		t.Errorf("got %#v", list)
	}
	// Raw bytes that are not UTF-8 read as U+FFFD.
	if v, err := ParseForDispatch("\"a\xffb\""); err != nil || v != "a\uFFFDb" {
		t.Errorf("got %q, %v", v, err)
	}
	// Ordered objects keep document order, repeated keys merged in place.
	v, err = ParseForDispatchOrdered(`{"b":1,"a":2,"b":3}`)
	if err != nil {
		t.Fatal(err)
	}
	if want := (jsvalue.Object{{Key: "b", Value: 3.0}, {Key: "a", Value: 2.0}}); !reflect.DeepEqual(v, want) {
		t.Errorf("got %#v, want %#v", v, want)
	}
	if v, err := ParseForDispatchOrdered(`{}`); err != nil || !reflect.DeepEqual(v, jsvalue.Object{}) {
		t.Errorf("empty object: %#v, %v", v, err)
	}
}

func TestParseForDispatchBinaryEnvelopes(t *testing.T) {
	for _, c := range []struct {
		text string
		want []byte
	}{
		{`{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}`, []byte{1, 2, 3, 255}},
		{`{"__executor_binary_v1__":"Uint8Array","data":"AQID/w"}`, []byte{1, 2, 3, 255}},
		{`{"__executor_binary_v1__":"ArrayBufferView","data":"AQACAA=="}`, []byte{1, 0, 2, 0}},
		{`{"__executor_binary_v1__":"Uint8Array","data":""}`, []byte{}},
	} {
		v, err := ParseForDispatch(c.text)
		if err != nil {
			t.Errorf("%s: %v", c.text, err)
			continue
		}
		if b, ok := v.([]byte); !ok || !bytes.Equal(b, c.want) {
			t.Errorf("%s: got %#v, want %v", c.text, v, c.want)
		}
	}
	// Well-shaped envelopes whose data is not base64 fail.
	for _, data := range []string{"A", "AQ=", "A Q==", "AQ\\n==", "AQ-_", "AQID=", "====", "AQ==="} {
		text := `{"__executor_binary_v1__":"Uint8Array","data":"` + data + `"}`
		var be *BinaryEnvelopeError
		if _, err := ParseForDispatch(text); !errors.As(err, &be) {
			t.Errorf("data %q: err %v, want *BinaryEnvelopeError", data, err)
		}
	}
	// Anything not exactly an envelope stays an object.
	for _, text := range []string{
		`{"__executor_binary_v1__":"Float32Array","data":"AA=="}`,
		`{"__executor_binary_v1__":"Uint8Array","data":1}`,
		`{"__executor_binary_v1__":"Uint8Array"}`,
		`{"__executor_binary_v1__":"Uint8Array","data":"AA==","x":1}`,
		`{"__executor_binary_v1__":1,"data":"AA=="}`,
	} {
		v, err := ParseForDispatch(text)
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			t.Errorf("%s: got %#v, want an object", text, v)
		}
	}
}

func TestParseForDispatchRejects(t *testing.T) {
	for _, text := range []string{
		"", " ", "nul", "tru", "01", "1.", ".5", "+1", "-", "1e", "1e+", "0x10", "NaN", "Infinity",
		`"abc`, `"a` + "\n" + `"`, `"\x"`, `"\u12"`, `"\u12g4"`, "'a'", "[1,]", "[1 2]", "{,}", `{"a"}`,
		`{"a":1,}`, `{a:1}`, "[", "{", "]", "1 2", "\ufeff1", "/* */1", "[1]x", `{"a":1`,
	} {
		_, err := ParseForDispatch(text)
		var se *jsvalue.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: err %v, want *jsvalue.SyntaxError", text, err)
		}
	}
	deep := strings.Repeat("[", jsvalue.DefaultMaxDepth+2) + strings.Repeat("]", jsvalue.DefaultMaxDepth+2)
	if _, err := ParseForDispatch(deep); err == nil {
		t.Error("a document nested past the bound parsed")
	}
	ok := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	if _, err := ParseForDispatch(ok); err != nil {
		t.Errorf("100 levels: %v", err)
	}
}

func TestArgsFromJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []any
	}{
		{"", []any{}},
		{`["ada",3]`, []any{"ada", 3.0}},
		{`[]`, []any{}},
		{`{"customer":"ada"}`, []any{map[string]any{"customer": "ada"}}},
		{`"ada"`, []any{"ada"}},
		{`null`, []any{nil}},
		{`[[1]]`, []any{[]any{1.0}}},
	} {
		got, err := ArgsFromJSON(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %#v, want %#v", c.in, got, c.want)
		}
	}
	if _, err := ArgsFromJSON("[1,"); err == nil {
		t.Error("broken arguments parsed")
	}
}

// DispatchSize is the length of StringifyForDispatch's text and fails as it
// fails, including after a value that grew its reused buffer or failed
// half-way through writing.
func TestDispatchSizeIsTheTextsLength(t *testing.T) {
	big := strings.Repeat("é\u2028\x01", 30000) // escapes make its text longer than the string
	values := []any{
		"plain", 1.5, nil, []any{1.0, "two", jsvalue.Undefined}, []byte{1, 2, 3},
		jsvalue.Object{{Key: "b", Value: 1.0}, {Key: "a", Value: []any{big}}},
		ExecuteResultMessage{ResultJSON: `{"n":1}`, Logs: []LogLine{{Level: "log", Text: "hi\n"}}, Usage: &UsageMessage{RunClockMs: 0.25, ToolCalls: 3}}.Object(),
		[]any{"short after a long one"},
		jsvalue.Undefined, func() {}, []any{"half", complex(1, 2)}, "after a failure",
	}
	for i, v := range values {
		text, werr := StringifyForDispatch(v)
		n, err := DispatchSize(v)
		if (werr == nil) != (err == nil) || (werr != nil && err.Error() != werr.Error()) {
			t.Errorf("value %d: DispatchSize failed with %v, StringifyForDispatch with %v", i, err, werr)
			continue
		}
		if werr == nil && n != len(text) {
			t.Errorf("value %d: DispatchSize is %d, the text is %d bytes", i, n, len(text))
		}
	}
}
