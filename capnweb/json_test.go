package capnweb

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// parseJSON and parseMessage read one text without a scratch to reuse.
func parseJSON(data []byte, maxDepth int) (any, error) { return parseJSONScratch(data, maxDepth, nil) }

func parseMessage(msg []byte, maxDepth int) ([]any, error) {
	return parseMessageScratch(msg, maxDepth, nil)
}

// The parser agrees with encoding/json on valid input and rejects what
// JSON.parse rejects.
func TestParseJSON(t *testing.T) {
	valid := []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5e-7`, `1E+21`, `-12.25`, `""`, `"a\"b\\c\/d\b\f\n\r\t"`,
		`"\u00e9\u2028"`, `"\ud83d\ude00"`, `"héllo"`, `[]`, `[1,[2,[3]]]`, `{}`, `{"a":1,"b":[true,null]}`,
		` [ 1 , 2 ] `, `{"a":1,"a":2}`,
	}
	for _, s := range valid {
		got, err := parseJSON([]byte(s), 100)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		got = plainJSON(got)
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %#v, want %#v", s, got, want)
		}
	}
	invalid := []string{
		``, `[`, `[1,]`, `{"a":1,}`, `{a:1}`, `01`, `1.`, `.5`, `1e`, `+1`, `"abc`, "\"a\x01\"", `"\x"`,
		`"\u12"`, `tru`, `nul`, `[1 2]`, `{"a" 1}`, `1 2`, `NaN`, `Infinity`, `'a'`,
	}
	for _, s := range invalid {
		if _, err := parseJSON([]byte(s), 100); err == nil {
			t.Fatalf("%q was accepted", s)
		}
	}
	// Lone surrogates and invalid UTF-8 become U+FFFD.
	for in, want := range map[string]string{`"\ud800"`: "\ufffd", `"\ud800\u0041"`: "\ufffdA", `"\udc00x"`: "\ufffdx", "\"\xff\"": "\ufffd"} {
		got, err := parseJSON([]byte(in), 10)
		if err != nil || got != want {
			t.Fatalf("%q: got %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := parseJSON([]byte(strings.Repeat("[", 50)+strings.Repeat("]", 50)), 40); err == nil {
		t.Fatal("nesting beyond the bound was accepted")
	}
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`"\ud83d\ude00\u00e9"`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseJSON(data, 1000)
		valid := json.Valid(data)
		var want any
		var werr error
		if valid {
			dec := json.NewDecoder(strings.NewReader(string(data)))
			dec.UseNumber()
			werr = dec.Decode(&want)
		} else {
			werr = errTrailing
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: parser err %v, encoding/json err %v", data, err, werr)
		}
		if err == nil && !reflect.DeepEqual(plainJSON(got), want) {
			t.Fatalf("%q: got %#v, want %#v", data, got, want)
		}
	})
}

var errTrailing = errors.New("trailing")

// plainJSON turns rawObjects into maps, the form encoding/json produces.
func plainJSON(v any) any {
	switch x := v.(type) {
	case jsvalue.Object:
		m := make(map[string]any, len(x))
		for _, f := range x {
			m[f.Key] = plainJSON(f.Value)
		}
		return m
	case []any:
		for i := range x {
			x[i] = plainJSON(x[i])
		}
	}
	return v
}

// Key order survives parsing; a repeated key keeps its first place and
// its last value, as with JSON.parse.
func TestParseJSONKeyOrder(t *testing.T) {
	got, err := parseJSON([]byte(`{"z":1,"a":2,"z":3,"m":4}`), 10)
	if err != nil {
		t.Fatal(err)
	}
	want := jsvalue.Object{{Key: "z", Value: json.Number("3")}, {Key: "a", Value: json.Number("2")}, {Key: "m", Value: json.Number("4")}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
}

// scratchKeptMax is the largest scratch the reader keeps between parses
// (protocol's bound).
const scratchKeptMax = 1024

// A scratch reused across parses (as a session's reader does) gives the
// same results as a fresh parser, survives a failed parse in between, and
// holds no values once a parse is done.
func TestParseJSONScratchReuse(t *testing.T) {
	inputs := []string{
		`["push",["pipeline",0,["add"],[[1,2,3],[4,[5,6]]]]]`,
		`[1,[2,[3,`, // truncated: fails mid-array with values on the scratch
		`["pull",1]`,
		`[[[[["deep"]]]],"x",{"a":[7,8,9]}]`,
		`[` + strings.Repeat(`1,`, 2*scratchKeptMax) + `1]`, // outgrows what is kept
		`["release",1,1]`,
	}
	var scratch []any
	for _, s := range inputs {
		want, wantErr := parseJSON([]byte(s), 100)
		got, err := parseJSONScratch([]byte(s), 100, &scratch)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%.40s: error %v, want %v", s, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%.40s: got %v, want %v", s, got, want)
		}
		if cap(scratch) > scratchKeptMax {
			t.Fatalf("%.40s: kept a scratch of %d slots", s, cap(scratch))
		}
		for i, v := range scratch[:cap(scratch)] {
			if v != nil {
				t.Fatalf("%.40s: scratch slot %d still holds %v", s, i, v)
			}
		}
	}
}

// BenchmarkParseCallMessages reads the three messages a peer sends for one
// call on the main object (push, pull, release), as the read loop does.
func BenchmarkParseCallMessages(b *testing.B) {
	msgs := [][]byte{
		[]byte(`["push",["pipeline",0,["add"],[17,25]]]`),
		[]byte(`["pull",17]`),
		[]byte(`["release",17,1]`),
	}
	var scratch []any
	for b.Loop() {
		for _, m := range msgs {
			if _, err := parseMessageScratch(m, MaxDepth, &scratch); err != nil {
				b.Fatal(err)
			}
		}
	}
}
