package protocol

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

type dispatchVector struct {
	Name     string `json:"name"`
	JS       string `json:"js"`
	JSON     string `json:"json"`
	Reparsed string `json:"reparsed"`
}

func loadVectors(t *testing.T) []dispatchVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "dispatch-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []dispatchVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 40 {
		t.Fatalf("only %d vectors", len(vs))
	}
	return vs
}

// vectorValues builds, in Go, the value each vector's js expression builds
// in JavaScript.
var vectorValues = map[string]any{
	"contract: argument list":                                 []any{"ada", 3},
	"contract: single argument object":                        jsvalue.Object{{Key: "customer", Value: "ada"}},
	"contract: result envelope":                               jsvalue.Object{{Key: "result", Value: jsvalue.Object{{Key: "id", Value: "o1"}, {Key: "total", Value: 42}}}},
	"contract: error envelope":                                jsvalue.Object{{Key: "error", Value: "No such customer."}},
	"contract: completed envelope":                            jsvalue.Object{{Key: "error", Value: CompletedText}},
	"contract: Uint8Array result":                             jsvalue.Object{{Key: "result", Value: []byte{1, 2, 3, 255}}},
	"contract: Uint16Array result":                            jsvalue.Object{{Key: "result", Value: ArrayBufferView{1, 0, 2, 0}}},
	"null":                                                    nil,
	"true":                                                    true,
	"false":                                                   false,
	"empty string":                                            "",
	"negative zero":                                           math.Copysign(0, -1),
	"negative zero in an array":                               []float64{math.Copysign(0, -1), 0},
	"NaN and infinities are null":                             []any{math.NaN(), math.Inf(1), math.Inf(-1)},
	"numbers: exponent boundaries":                            []any{1e21, 1e20, 1e-7, 1e-6, 1.5e-7, 0.000001234},
	"numbers: shortest digits":                                []any{0.1, addFloats(0.2, 0.1), 1.0 / 3, 123456789012345680000.0, int64(1) << 53, int64(1)<<53 + 2},
	"numbers: extremes":                                       []any{5e-324, math.MaxFloat64, 2.2250738585072014e-308, 1e300, 1.23e-18},
	"numbers: integers":                                       []any{100, -1.5, uint64(math.MaxUint64), int32(math.MinInt32), uint32(math.MaxUint32), int64(1e15), 123e18},
	"string: short escapes":                                   "\"\\/\b\f\n\r\t",
	"string: control characters":                              "\x00\x01\x1f\x7f",
	"string: no HTML escaping":                                "<script>&amp;</script>",
	"string: line and paragraph separators raw":               "a\u2028b\u2029c",
	"string: non-ASCII raw":                                   "ünïcødé 日本 €",
	"string: surrogate pair raw":                              "😀",
	"string: lone high surrogate":                             "\xed\xa0\x80",
	"string: lone low surrogate between letters":              "a\xed\xb0\x80b",
	"string: reversed pair stays two lone surrogates":         "\xed\xb8\x80\xed\xa0\xbd",
	"string: high surrogate then a pair":                      "\xed\xa0\x80😀",
	"string: quote inside an argument list":                   []string{`say "hi"`, `back\slash`},
	"array: undefined, function and symbol elements are null": []any{jsvalue.Undefined, func() {}, jsvalue.Undefined},
	"array: holes are null":                                   []any{1, jsvalue.Undefined, 3},
	"object: undefined and function members dropped":          jsvalue.Object{{Key: "a", Value: jsvalue.Undefined}, {Key: "b", Value: func() {}}, {Key: "c", Value: 1}},
	"object: every member dropped":                            jsvalue.Object{{Key: "a", Value: jsvalue.Undefined}},
	"envelope: undefined result":                              jsvalue.Object{{Key: "result", Value: jsvalue.Undefined}},
	"object: array-index keys first, the rest in insertion order": jsvalue.Object{
		{Key: "b", Value: 1}, {Key: "a", Value: 2}, {Key: "2", Value: 3}, {Key: "1", Value: 4}, {Key: "01", Value: 5}, {Key: "4294967295", Value: 6}, {Key: "4294967294", Value: 7}, {Key: "-1", Value: 8}, {Key: "1.5", Value: 9}},
	"object: keys needing escapes":        jsvalue.Object{{Key: `a"b`, Value: 1}, {Key: "\n", Value: 2}, {Key: "\u2028", Value: 3}},
	"nesting: empty containers":           []any{[]any{}, jsvalue.Object{}, []any{[]any{}}, map[string]any{"a": map[string]any{}}},
	"nesting: deep mix":                   jsvalue.Object{{Key: "list", Value: []any{1, "two", []any{3, map[string]any{"four": nil}}}}, {Key: "ok", Value: false}},
	"binary: empty and one byte":          []any{[]byte{}, []byte{0}},
	"binary: three bytes need no padding": []byte{0, 1, 2},
	"binary: every base64 character": []byte{0, 16, 131, 16, 81, 135, 32, 146, 139, 48, 211, 143, 65, 20, 147, 81, 85, 151,
		97, 150, 155, 113, 215, 159, 130, 24, 163, 146, 89, 167, 162, 154, 171, 178, 219, 175, 195, 28, 179, 211, 93, 183,
		227, 158, 187, 243, 223, 191},
	"binary: ArrayBuffer under the Uint8Array tag":               []byte{250, 251},
	"binary: subarray encodes only its own bytes":                []byte{9, 8, 7, 6}[1:3],
	"binary: DataView over part of a buffer":                     ArrayBufferView{2, 3},
	"binary: Float64Array little-endian":                         ArrayBufferView{0, 0, 0, 0, 0, 0, 0xf0, 0x3f},
	"binary: Uint8ClampedArray is another view":                  ArrayBufferView{255},
	"binary: tag lookalike with an unknown kind stays an object": jsvalue.Object{{Key: BinaryTag, Value: "Float32Array"}, {Key: "data", Value: "AA=="}},
	"binary: tag lookalike with a third key stays an object":     jsvalue.Object{{Key: BinaryTag, Value: "Uint8Array"}, {Key: "data", Value: "AA=="}, {Key: "more", Value: 1}},
	"toJSON: Date": time.Unix(0, 0).UTC().Format("2006-01-02T15:04:05.000Z"),
	"toJSON: custom": struct {
		Custom bool `json:"custom"`
	}{true},
}

// TestDispatchVectorsGo checks StringifyForDispatch on the Go value of
// every vector, and that parsing each vector's JSON and writing it again
// gives the JSON JavaScript gives.
func TestDispatchVectorsGo(t *testing.T) {
	vs := loadVectors(t)
	seen := map[string]bool{}
	for _, v := range vs {
		seen[v.Name] = true
		t.Run(v.Name, func(t *testing.T) {
			goValue, ok := vectorValues[v.Name]
			if !ok {
				t.Fatalf("no Go value for vector %q", v.Name)
			}
			got, err := StringifyForDispatch(goValue)
			if err != nil {
				t.Fatal(err)
			}
			if got != v.JSON {
				t.Errorf("StringifyForDispatch wrote\n  %q\nthe vector says\n  %q", got, v.JSON)
			}
			parsed, err := ParseForDispatchOrdered(v.JSON)
			if err != nil {
				t.Fatal(err)
			}
			again, err := StringifyForDispatch(parsed)
			if err != nil {
				t.Fatal(err)
			}
			want := v.JSON
			if v.Reparsed != "" {
				want = v.Reparsed
			}
			if again != want {
				t.Errorf("parsed and written again:\n  %q\nwant\n  %q", again, want)
			}
			if _, err := ParseForDispatch(v.JSON); err != nil {
				t.Errorf("ParseForDispatch: %v", err)
			}
		})
	}
	for name := range vectorValues {
		if !seen[name] {
			t.Errorf("Go value %q has no vector", name)
		}
	}
}

func nodeBinary(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to check the vectors against JavaScript and is not on PATH: %v", err)
	}
	return node
}

// TestDispatchVectorsJavaScript runs testdata/check-vectors.mjs, which
// evaluates every vector's js in Node with testdata/codec.js and compares
// with its json.
func TestDispatchVectorsJavaScript(t *testing.T) {
	node := nodeBinary(t)
	out, err := exec.Command(node, filepath.Join("testdata", "check-vectors.mjs")).CombinedOutput()
	if err != nil {
		t.Fatalf("JavaScript disagrees with the vectors: %v\n%s", err, out)
	}
	t.Logf("%s", out)

	// The checker itself must be able to fail: one wrong byte in a vector.
	vs := loadVectors(t)
	vs[0].JSON += " "
	bad, _ := json.Marshal(vs)
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(node, filepath.Join("testdata", "check-vectors.mjs"), path).CombinedOutput(); err == nil {
		t.Fatalf("the checker accepted a wrong vector:\n%s", out)
	}
}

// addFloats adds at run time: Go folds 0.2 + 0.1 between constants exactly.
func addFloats(a, b float64) float64 { return a + b }
