package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// FuzzParseForDispatch: no input panics or hangs; what parses writes back
// as text that parses to the same value, and writing is idempotent.
func FuzzParseForDispatch(f *testing.F) {
	for _, s := range []string{
		`["ada",3]`, `{"customer":"ada"}`, `{"result":{"id":"o1","total":42}}`, `{"error":"No such customer."}`,
		`{"result":{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}}`,
		`{"__executor_binary_v1__":"ArrayBufferView","data":"AQACAA"}`, `"\ud800\udc00\ud800"`, `-0`, `1e400`,
		`[1e21,1e-7,0.1]`, `{"a":1,"a":2,"1":3}`, `"\u2028<>&"`, "\"\xff\"", `[[[[[]]]]]`, ``, `{"__proto__":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := ParseForDispatchOrdered(text)
		if _, err2 := ParseForDispatch(text); (err == nil) != (err2 == nil) {
			t.Fatalf("ordered and unordered parsing disagree: %v / %v", err, err2)
		}
		if err != nil {
			var se *jsvalue.SyntaxError
			var be *BinaryEnvelopeError
			if !errors.As(err, &se) && !errors.As(err, &be) {
				t.Fatalf("unexpected error type %T", err)
			}
			return
		}
		out, err := StringifyForDispatch(v)
		if err != nil {
			t.Fatalf("parsed value does not write: %v", err)
		}
		v2, err := ParseForDispatchOrdered(out)
		if err != nil {
			t.Fatalf("written text %q does not parse: %v", out, err)
		}
		out2, err := StringifyForDispatch(v2)
		if err != nil || out2 != out {
			t.Fatalf("writing is not idempotent: %q then %q (%v)", out, out2, err)
		}
	})
}

// FuzzStringifyString: every Go string writes as JSON that reads back as
// the string, once bytes that are not UTF-8 are replaced.
func FuzzStringifyString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\x7f", "\u2028", "😀", "\xed\xa0\x80", "\xed\xa0\xbd\xed\xb8\x80", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := StringifyForDispatch(s)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != jsvalue.StringSize(s) {
			t.Fatalf("jsvalue.StringSize %d, written %d", jsvalue.StringSize(s), len(out))
		}
		back, err := ParseForDispatch(out)
		if err != nil {
			t.Fatalf("%q does not parse: %v", out, err)
		}
		again, _ := StringifyForDispatch(back)
		if again != out {
			t.Fatalf("round trip changed %q to %q", out, again)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("valid UTF-8 %q read back as %q", s, back)
		}
	})
}

// FuzzValidateProviders: any names give nil or one of the four classes,
// whose text quotes the name; nil only for names the rules allow.
func FuzzValidateProviders(f *testing.F) {
	for _, s := range []string{"store", "1x", "class", "__dispatch", "fetch", "a\x00", "store\nstore", "", "let\nNaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, names string) {
		ps := providers(strings.Split(names, "\n")...)
		err := ValidateProviders(ps)
		if err == nil {
			seen := map[string]bool{}
			for _, p := range ps {
				if !IsProviderIdentifier(p.Name) || IsECMAScriptReservedWord(p.Name) || IsReservedName(p.Name) || seen[p.Name] {
					t.Fatalf("%q accepted", p.Name)
				}
				seen[p.Name] = true
			}
			return
		}
		var name string
		switch e := err.(type) {
		case *InvalidProviderNameError:
			name = e.Name
		case *KeywordProviderNameError:
			name = e.Name
		case *ReservedProviderNameError:
			name = e.Name
		case *DuplicateProviderNameError:
			name = e.Name
		default:
			t.Fatalf("unexpected error %T", err)
		}
		if !strings.Contains(err.Error(), `"`+name+`"`) {
			t.Fatalf("text does not quote the name: %q", err)
		}
	})
}

// FuzzExecuteCallOptions: any JSON reads or fails cleanly; what reads writes
// back and reads the same.
func FuzzExecuteCallOptions(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"timeout":null}`, `{"timeout":5000,"countHostWaits":true,"retainHandles":true}`,
		`{"modules":[["greeter","export const g = 1"],["d",{"data":"AQ=="}],["j",{"json":{"a":1}}]]}`,
		`{"timeout":-1e400}`, `{"modules":[["a",{"css":1}]]}`, `{"timeout":"x"}`, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var o ExecuteCallOptions
		if err := json.Unmarshal(b, &o); err != nil {
			return
		}
		if _, err := ResolveTimeout(o.Timeout, 0, 0); err != nil {
			var ie *InvalidTimeoutError
			if !errors.As(err, &ie) {
				t.Fatalf("unexpected error %T", err)
			}
		}
		var req ExecuteRequest
		_ = ApplyCallOptions(&req, o)
		out, err := json.Marshal(o)
		if err != nil {
			return // e.g. a json module holding text json.Valid refuses after trimming
		}
		var o2 ExecuteCallOptions
		if err := json.Unmarshal(out, &o2); err != nil {
			t.Fatalf("written options %s do not read: %v", out, err)
		}
		out2, err := json.Marshal(o2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not stable: %s then %s (%v)", out, out2, err)
		}
	})
}

// FuzzNormalizeModuleMap: any map normalizes or fails with one of the two
// classes; a normalized map has only valid kinds and names without a
// leading "./" removed twice.
func FuzzNormalizeModuleMap(f *testing.F) {
	for _, s := range []string{"greeter\n./greeter", "a\nb\nc", "./\n", "x\n././x", "greeter\ngreeter.js"} {
		f.Add(s, "js")
	}
	f.Add("a", "css")
	f.Add("a", "")
	f.Fuzz(func(t *testing.T, names string, kind string) {
		m := ModuleMap{}
		for _, n := range strings.Split(names, "\n") {
			m[n] = Module{Kind: ModuleKind(kind), Source: n}
		}
		out, err := NormalizeModuleMap(m)
		if err != nil {
			var ce *ModuleKeyCollisionError
			var ke *UnsupportedModuleKindError
			if !errors.As(err, &ce) && !errors.As(err, &ke) {
				t.Fatalf("unexpected error %T", err)
			}
			return
		}
		if len(out) != len(m) {
			t.Fatalf("%d entries became %d", len(m), len(out))
		}
		for n, mod := range out {
			if !mod.Kind.Valid() {
				t.Fatalf("kind %q survived", mod.Kind)
			}
			if NormalizeModuleName(mod.Source) != n {
				t.Fatalf("entry %q landed under %q", mod.Source, n)
			}
		}
		again, err := NormalizeModuleMap(out)
		if err == nil && !reflect.DeepEqual(again, normalizeKeysOnce(out)) {
			t.Fatalf("second normalization differs")
		}
	})
}

func normalizeKeysOnce(m ModuleMap) ModuleMap {
	out := ModuleMap{}
	for k, v := range m {
		out[NormalizeModuleName(k)] = v
	}
	return out
}
