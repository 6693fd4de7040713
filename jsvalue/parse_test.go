package jsvalue

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// Small integers come from shared boxes; every other number is read as
// before, and the shared boxes never change what a document means.
func TestParseNumbersAroundTheSharedRange(t *testing.T) {
	cases := []struct {
		text string
		want float64
	}{
		{"0", 0}, {"7", 7}, {"17", 17}, {"1023", 1023}, {"1024", 1024}, {"99999", 99999},
		{"-1", -1}, {"1.5", 1.5}, {"1e2", 100}, {"10.0", 10}, {"0.5", 0.5},
	}
	for _, c := range cases {
		v, err := Parse(c.text, ParseOptions{})
		if err != nil {
			t.Fatalf("Parse(%s): %v", c.text, err)
		}
		if v != any(c.want) {
			t.Errorf("Parse(%s) = %#v, want %v", c.text, v, c.want)
		}
		raw, err := Parse(c.text, ParseOptions{RawNumbers: true})
		if err != nil {
			t.Fatalf("Parse(%s, raw): %v", c.text, err)
		}
		if raw != any(json.Number(c.text)) {
			t.Errorf("Parse(%s, raw) = %#v, want json.Number(%q)", c.text, raw, c.text)
		}
	}
	v, err := Parse("-0", ParseOptions{})
	if f, ok := v.(float64); err != nil || !ok || f != 0 || !math.Signbit(f) {
		t.Errorf("Parse(-0) = %#v, %v; want negative zero", v, err)
	}
	for _, bad := range []string{"01", "00", "1.", "-", "1e"} {
		if _, err := Parse(bad, ParseOptions{}); err == nil {
			t.Errorf("Parse(%s) accepted an invalid number", bad)
		}
	}
}

func TestBoxFloat64(t *testing.T) {
	for _, f := range []float64{0, 1, 255, 1023, 1024, -1, 0.5, math.Inf(1), math.NaN(), math.Copysign(0, -1)} {
		got, ok := BoxFloat64(f).(float64)
		if !ok || !(got == f || (math.IsNaN(f) && math.IsNaN(got))) || math.Signbit(got) != math.Signbit(f) {
			t.Errorf("BoxFloat64(%v) = %#v", f, BoxFloat64(f))
		}
	}
	if testing.AllocsPerRun(100, func() { _ = BoxFloat64(17) }) != 0 {
		t.Error("BoxFloat64(17) allocates; small integers should share a box")
	}
}

// An interned word is returned equal to its text, escaped or not; words
// outside the table and strings that merely start like one read normally.
func TestParseIntern(t *testing.T) {
	opts := ParseOptions{Intern: NewInternTable("push", "pull")}
	v, err := Parse(`["push","pu\u006cl","pusher","","push\"","pul"]`, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"push", "pull", "pusher", "", `push"`, "pul"}
	got := v.([]any)
	if len(got) != len(want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("element %d = %#v, want %#v", i, got[i], want[i])
		}
	}
	if _, err := Parse(`"push`, opts); err == nil {
		t.Error("an unterminated interned word was accepted")
	}
	doc := []byte(`["push",["pull",17]]`)
	var scratch []any
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ParseScratch(doc, opts, &scratch); err != nil {
			t.Fatal(err)
		}
	})
	// Two arrays, each its elements and its slice header; no string, no number.
	if allocs > 4 {
		t.Errorf("parsing %s allocated %v times, want at most 4", doc, allocs)
	}
}

// fuzzWords is an intern table for the differential fuzzer: interned and
// ordinary strings must read alike.
var fuzzWords = NewInternTable("a", "push", "pull", "1", "")

// FuzzParseAgreesWithEncodingJSON: Parse accepts exactly the texts
// encoding/json finds valid (but for nesting past its bound) and reads them
// to the same values, numbers as float64 and as json.Number; only numbers
// too large for a double differ on purpose (Infinity, as JSON.parse gives,
// where encoding/json refuses).
func FuzzParseAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`["push",["pipeline",0,["add"],[17,25]]]`, `["pull",17]`, `[0,1,1023,1024,-0,-1,01]`, `{"a":1,"a":"a","b":[]}`,
		`"pu\u0073h"`, `"\ud800"`, "\"\xff\"", `1e400`, `[1.5e3,0.0,10]`, `{}`, `[]`, ` 7 `, `[1,]`, `"push`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, raw := range []bool{false, true} {
			got, err := Parse(text, ParseOptions{RawNumbers: raw, ReplaceLoneSurrogates: true, Intern: fuzzWords})
			valid := json.Valid([]byte(text))
			if valid != (err == nil) {
				if errors.Is(err, ErrTooDeep) {
					return
				}
				t.Fatalf("Parse(%q, raw=%v) error %v; encoding/json finds it valid: %v", text, raw, err, valid)
			}
			if !valid {
				return
			}
			// Compared in encoding/json's shapes: what Parse read, written
			// out (Object writes its members in order) and read back.
			decode := func(text string) (any, error) {
				dec := json.NewDecoder(strings.NewReader(text))
				if raw {
					dec.UseNumber()
				}
				var v any
				return v, dec.Decode(&v)
			}
			want, err := decode(text)
			if err != nil {
				return // a number out of a double's range
			}
			written, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("Parse(%q, raw=%v) = %#v, which encoding/json cannot write: %v", text, raw, got, err)
			}
			if g, err := decode(string(written)); err != nil || !reflect.DeepEqual(g, want) {
				t.Fatalf("Parse(%q, raw=%v) = %#v (%v); encoding/json reads %#v", text, raw, g, err, want)
			}
		}
	})
}

// TestParseSeparatorErrors pins the texts for what follows an element of an
// array or an object, from both input types.
func TestParseSeparatorErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{`[1`, "invalid JSON at byte 2: unterminated array"},
		{`[1 `, "invalid JSON at byte 3: unterminated array"},
		{`[1 2]`, "invalid JSON at byte 3: expected , or ] in array"},
		{`[1}`, "invalid JSON at byte 2: expected , or ] in array"},
		{"[1\x00", "invalid JSON at byte 2: expected , or ] in array"},
		{"{\"a\":1\x00", "invalid JSON at byte 6: expected , or } in object"},
		{`{"a":1`, "invalid JSON at byte 6: unterminated object"},
		{`{"a":1 "b":2}`, "invalid JSON at byte 7: expected , or } in object"},
		{`{"a":1]`, "invalid JSON at byte 6: expected , or } in object"},
		{`[{"a":[1,2}]`, "invalid JSON at byte 10: expected , or ] in array"},
	} {
		for _, parse := range []func() (any, error){
			func() (any, error) { return Parse(c.doc, ParseOptions{MaxDepth: 8}) },
			func() (any, error) { return Parse([]byte(c.doc), ParseOptions{MaxDepth: 8}) },
		} {
			v, err := parse()
			if err == nil || err.Error() != c.want {
				t.Errorf("%s: got %v, %v; want %q", c.doc, v, err, c.want)
			}
		}
	}
	for _, doc := range []string{`[1 ,2 ]`, `{"a":1 ,"b":[] }`} {
		if _, err := Parse(doc, ParseOptions{MaxDepth: 8}); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
