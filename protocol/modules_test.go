package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestNormalizeModuleName(t *testing.T) {
	for in, want := range map[string]string{
		"greeter":     "greeter",
		"./greeter":   "greeter",
		"././greeter": "./greeter",
		"greeter.js":  "greeter.js",
		"../greeter":  "../greeter",
		"/greeter":    "/greeter",
		"./":          "",
		" ./x":        " ./x",
		"lib/./x":     "lib/./x",
	} {
		if got := NormalizeModuleName(in); got != want {
			t.Errorf("NormalizeModuleName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizeModuleMap(t *testing.T) {
	got, err := NormalizeModuleMap(ModuleMap{
		"./greeter":  {Source: "export const a = 1"},
		"greeter.js": {Kind: KindText, Source: "hi"},
		"toString":   {Kind: KindData, Data: []byte{1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ModuleMap{
		"greeter":    {Kind: KindJS, Source: "export const a = 1"},
		"greeter.js": {Kind: KindText, Source: "hi"},
		"toString":   {Kind: KindData, Data: []byte{1}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v", got)
	}
	if m, err := NormalizeModuleMap(nil); m != nil || err != nil {
		t.Errorf("nil map: %v %v", m, err)
	}
}

func TestNormalizeModuleMapCollision(t *testing.T) {
	for range 20 { // map order varies; the report must not
		_, err := NormalizeModuleMap(ModuleMap{"./greeter": {}, "greeter": {}, "other": {}})
		var e *ModuleKeyCollisionError
		if !errors.As(err, &e) {
			t.Fatalf("got %v", err)
		}
		if e.Key != "greeter" || !reflect.DeepEqual(e.Colliding, []string{"./greeter", "greeter"}) {
			t.Fatalf("got %#v", e)
		}
	}
}

func TestNormalizeModuleMapUnsupportedKind(t *testing.T) {
	_, err := NormalizeModuleMap(ModuleMap{"styles": {Kind: "css", Source: "a{}"}})
	var e *UnsupportedModuleKindError
	if !errors.As(err, &e) || e.Name != "styles" || e.Kind != "css" {
		t.Errorf("got %v", err)
	}
}

func TestModuleJSON(t *testing.T) {
	for _, c := range []struct {
		mod  Module
		json string
	}{
		{Module{Kind: KindJS, Source: "export const a = '<b>'"}, `"export const a = '<b>'"`},
		{Module{Kind: KindCJS, Source: "module.exports = 1"}, `{"cjs":"module.exports = 1"}`},
		{Module{Kind: KindText, Source: "line\u2028"}, "{\"text\":\"line\u2028\"}"},
		{Module{Kind: KindJSON, Source: `{"a":[1,2]}`}, `{"json":{"a":[1,2]}}`},
		{Module{Kind: KindJSON, Source: `"just a string"`}, `{"json":"just a string"}`},
		{Module{Kind: KindData, Data: []byte{1, 2, 3, 255}}, `{"data":"AQID/w=="}`},
	} {
		b, err := c.mod.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.json {
			t.Errorf("%#v: wrote %s, want %s", c.mod, b, c.json)
		}
		var back Module
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if c.mod.Kind == KindData && back.Data == nil {
			back.Data = []byte{}
		}
		if !reflect.DeepEqual(back, c.mod) {
			t.Errorf("read back %#v, want %#v", back, c.mod)
		}
	}
	// Reading: {"js": …} and unpadded base64 are accepted.
	var m Module
	if err := json.Unmarshal([]byte(`{"js":"x"}`), &m); err != nil || !reflect.DeepEqual(m, Module{Kind: KindJS, Source: "x"}) {
		t.Errorf("js object: %#v %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"data":"AQID/w"}`), &m); err != nil || string(m.Data) != "\x01\x02\x03\xff" {
		t.Errorf("unpadded data: %#v %v", m, err)
	}
	if _, err := (Module{Kind: KindJSON, Source: "{broken"}).MarshalJSON(); err == nil {
		t.Error("json module with broken source was written")
	}
}

func TestModuleJSONUnsupportedKinds(t *testing.T) {
	for text, kind := range map[string]string{
		`{"css":"a{}"}`:         "css",
		`{"js":"a","text":"b"}`: "js+text",
		`{}`:                    "{}",
		`42`:                    "number",
		`[1]`:                   "array",
		`null`:                  "null",
		`true`:                  "boolean",
	} {
		var p ModulePair
		err := json.Unmarshal([]byte(`["mod",`+text+`]`), &p)
		var e *UnsupportedModuleKindError
		if !errors.As(err, &e) || e.Name != "mod" || e.Kind != kind {
			t.Errorf("%s: got %v", text, err)
		}
		var mm ModuleMap
		err = json.Unmarshal([]byte(`{"mod":`+text+`}`), &mm)
		if !errors.As(err, &e) || e.Name != "mod" || e.Kind != kind {
			t.Errorf("map %s: got %v", text, err)
		}
	}
	for _, text := range []string{`{"data":"not base64!"}`, `{"data":1}`, `{"cjs":1}`} {
		var m Module
		if err := json.Unmarshal([]byte(text), &m); err == nil {
			t.Errorf("%s was read", text)
		}
	}
}

func TestModulePairs(t *testing.T) {
	mm := ModuleMap{"toString": {Source: "a"}, "constructor": {Kind: KindText, Source: "b"}}
	pairs := ModulePairsOf(mm)
	b, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[["constructor",{"text":"b"}],["toString","a"]]`; string(b) != want {
		t.Errorf("wrote %s, want %s", b, want)
	}
	var back []ModulePair
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	m2, err := ModuleMapOf(back)
	if err != nil {
		t.Fatal(err)
	}
	want := ModuleMap{"toString": {Kind: KindJS, Source: "a"}, "constructor": {Kind: KindText, Source: "b"}}
	if !reflect.DeepEqual(m2, want) {
		t.Errorf("got %#v", m2)
	}
	for _, bad := range []string{`["a"]`, `["a","b","c"]`, `[1,"b"]`, `{"a":"b"}`, `"a"`} {
		var p ModulePair
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s was read as a pair", bad)
		}
	}
	_, err = ModuleMapOf([]ModulePair{{Name: "a"}, {Name: "a"}})
	var e *ModuleKeyCollisionError
	if !errors.As(err, &e) {
		t.Errorf("repeated name: %v", err)
	}
	if m, err := ModuleMapOf(nil); m != nil || err != nil {
		t.Errorf("nil pairs: %v %v", m, err)
	}
}
