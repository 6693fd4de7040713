package jsvalue

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// repeatedKeyDocs are objects that name a key more than once, among
// array-index keys that JavaScript enumerates first.
var repeatedKeyDocs = []string{
	`{"a":1,"b":2,"a":3}`,
	`{"z":"first","1":"one","z":"last","0":"zero","1":"uno"}`,
	`{"code":"E_FIRST","message":"m","code":"E_LAST"}`,
	`{"x":null,"x":{"y":1},"4294967295":"not an index","4294967294":"index"}`,
}

// TestRepeatedKeysReadAsJSONParseReadsThem: Node's JSON.parse is the
// reference. For each document, Parse's Object, its Properties, Get and Map
// all give what JSON.parse gives: the last value of a repeated key, at the
// first key's position, with array indices first.
func TestRepeatedKeysReadAsJSONParseReadsThem(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to compare with JSON.parse and is not on PATH: %v", err)
	}
	docs, _ := json.Marshal(repeatedKeyDocs)
	out, err := exec.Command(node, "-e",
		`for (const d of JSON.parse(process.argv[1])) console.log(JSON.stringify(Object.entries(JSON.parse(d))))`,
		string(docs)).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for _, doc := range repeatedKeyDocs {
		var entries [][2]any // JSON.parse's own properties, in enumeration order
		if err := dec.Decode(&entries); err != nil {
			t.Fatalf("%s: reading node's answer: %v", doc, err)
		}
		want := make(Object, len(entries))
		for i, e := range entries {
			want[i] = Member{Key: e[0].(string), Value: plain(e[1])}
		}
		parsed, err := Parse(doc, ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := plain(parsed.(Object).Properties()); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Parse then Properties = %v, JSON.parse %v", doc, got, want)
		}
		// The members as written, repeats kept, read like JSON.parse too.
		written := membersAsWritten(t, doc)
		if got := plain(written.Properties()); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Properties of the members as written = %v, JSON.parse %v", doc, got, want)
		}
		m := written.Map()
		if len(m) != len(want) {
			t.Errorf("%s: Map has %d keys, JSON.parse %d", doc, len(m), len(want))
		}
		for _, w := range want {
			got, ok := written.Get(w.Key)
			if !ok || !reflect.DeepEqual(plain(got), w.Value) {
				t.Errorf("%s: Get(%q) = %v, %v; JSON.parse gives %v", doc, w.Key, got, ok, w.Value)
			}
			if !reflect.DeepEqual(plain(m[w.Key]), w.Value) {
				t.Errorf("%s: Map()[%q] = %v; JSON.parse gives %v", doc, w.Key, m[w.Key], w.Value)
			}
		}
	}
	if _, ok := (Object{{Key: "a", Value: 1}}).Get("b"); ok {
		t.Error("Get found a key the object does not have")
	}
}

// membersAsWritten reads doc's top-level members one by one, a repeated key
// kept as often as it is written: the Object a Go program could build.
func membersAsWritten(t *testing.T, doc string) Object {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	var o Object
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		o = append(o, Member{Key: k.(string), Value: v})
	}
	if len(o) <= len(o.Map()) {
		t.Fatalf("%s repeats no key; the test would prove nothing", doc)
	}
	return o
}

// plain turns every Object in v into a map, the shape encoding/json reads.
func plain(v any) any {
	switch x := v.(type) {
	case Object:
		out := make(Object, len(x))
		for i, m := range x {
			out[i] = Member{Key: m.Key, Value: plain(m.Value)}
		}
		return out
	case map[string]any:
		out := make(Object, 0, len(x))
		for _, k := range SortedKeys(x) {
			out = append(out, Member{Key: k, Value: plain(x[k])})
		}
		return out
	}
	return v
}

func TestSortKeys(t *testing.T) {
	keys := []string{"b", "10", "a", "2", "01", "4294967295", "4294967294", "", "-1", "0"}
	SortKeys(keys)
	want := []string{"0", "2", "10", "4294967294", "", "-1", "01", "4294967295", "a", "b"}
	if !slices.Equal(keys, want) {
		t.Errorf("SortKeys = %q, want %q", keys, want)
	}
}

func TestObjectMarshalJSON(t *testing.T) {
	b, err := Object{{Key: "z", Value: 1}, {Key: "a\u2028", Value: []any{true}}, {Key: "z", Value: nil}}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// Members in their order, repeats as given; the key quoted as
	// JSON.stringify quotes it.
	if want := "{\"z\":1,\"a\u2028\":[true],\"z\":null}"; string(b) != want {
		t.Errorf("MarshalJSON = %s, want %s", b, want)
	}
}

// Scalar reads a boolean, string or number of any named Go type as the
// JavaScript value an encoder writes, and nothing else.
func TestScalarOfNamedTypes(t *testing.T) {
	type level string
	type count uint16
	type ratio float32
	for _, c := range []struct {
		in   any
		want any
	}{{level("warn"), "warn"}, {count(7), float64(7)}, {ratio(0.5), 0.5}, {int8(-3), float64(-3)}, {true, true}} {
		got, ok := Scalar(reflect.ValueOf(c.in))
		if !ok || got != c.want {
			t.Errorf("Scalar(%T %v) = %#v, %v; want %#v", c.in, c.in, got, ok, c.want)
		}
	}
	for _, in := range []any{[]int{1}, map[string]int{}, struct{}{}, new(int)} {
		if got, ok := Scalar(reflect.ValueOf(in)); ok {
			t.Errorf("Scalar(%T) = %#v, true; want false", in, got)
		}
	}
}
