package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// ModuleKind says how an entry of the module map is loaded.
type ModuleKind string

// The kinds a module-map entry may have. An entry given as a plain source
// string is an ES module (KindJS).
const (
	KindJS   ModuleKind = "js"   // an ES module
	KindCJS  ModuleKind = "cjs"  // a CommonJS module (module.exports)
	KindText ModuleKind = "text" // a string, the default export
	KindJSON ModuleKind = "json" // a parsed JSON value, the default export
	KindData ModuleKind = "data" // bytes, an ArrayBuffer as the default export
)

// Valid reports whether k is one of the five kinds.
func (k ModuleKind) Valid() bool {
	switch k {
	case KindJS, KindCJS, KindText, KindJSON, KindData:
		return true
	}
	return false
}

// Module is one entry of the module map. The zero Kind reads as KindJS, as
// a plain source string does.
//
// In JSON (the wire's module pairs, and anywhere a ModuleMap is encoded) a
// module is the contract's source value: an ES module is its source string;
// every other kind is an object with exactly one member named by the kind:
//
//	"export const x = 1"           js
//	{"cjs": "module.exports = 1"}  cjs
//	{"text": "hello"}              text
//	{"json": {"a": [1, 2]}}        json: the value itself, not its text
//	{"data": "AQID/w=="}           data: the bytes in standard base64
//
// {"js": "…"} reads as js too. Data is written in standard base64 with
// padding and read with or without it, because JSON has no bytes; capnweb
// carries bytes natively, and a capnweb binding converts its bytes value to
// and from Data directly. Anything else fails with
// *UnsupportedModuleKindError.
type Module struct {
	Kind ModuleKind
	// Source is the text of js, cjs and text entries, and the JSON text of
	// json entries.
	Source string
	// Data is the content of data entries.
	Data []byte
}

// ModuleMap maps the names a program imports to module entries. Its JSON
// form is an object from names to Module's JSON form.
type ModuleMap map[string]Module

// NormalizeModuleName is the name a module-map key and an import specifier
// are compared by: the name with one leading "./" removed, nothing else
// changed. "./greeter" and "greeter" are the same module; "greeter" and
// "greeter.js" are two different ones, as two different specifiers are in
// JavaScript; "../greeter" and "/greeter" are kept as given. The sandbox
// normalizes both sides, so `import './greeter'` finds a map entry keyed
// "greeter" and the other way round.
func NormalizeModuleName(name string) string {
	return strings.TrimPrefix(name, "./")
}

// NormalizeModuleMap returns m keyed by normalized names, with the zero
// Kind made KindJS. Two keys that normalize to the same name fail with
// *ModuleKeyCollisionError naming both; an entry whose kind is not one of
// the five fails with *UnsupportedModuleKindError. Keys are checked in
// sorted order, so the failure reported for a given map is always the same.
// A nil map stays nil.
func NormalizeModuleMap(m ModuleMap) (ModuleMap, error) {
	if m == nil {
		return nil, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(ModuleMap, len(m))
	origin := make(map[string]string, len(m))
	for _, k := range keys {
		mod := m[k]
		if mod.Kind == "" {
			mod.Kind = KindJS
		}
		if !mod.Kind.Valid() {
			return nil, NewUnsupportedModuleKindError(k, string(mod.Kind))
		}
		n := NormalizeModuleName(k)
		if prev, dup := origin[n]; dup {
			return nil, NewModuleKeyCollisionError(n, []string{prev, k})
		}
		origin[n] = k
		out[n] = mod
	}
	return out, nil
}

// Names returns the map's keys, sorted.
func (m ModuleMap) Names() []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// MarshalJSON writes the contract's source value; see Module.
func (m Module) MarshalJSON() ([]byte, error) {
	kind := m.Kind
	if kind == "" {
		kind = KindJS
	}
	var b []byte
	switch kind {
	case KindJS:
		return jsvalue.AppendString(nil, m.Source), nil
	case KindCJS, KindText:
		b = append(b, `{"`...)
		b = append(b, kind...)
		b = append(b, `":`...)
		b = jsvalue.AppendString(b, m.Source)
	case KindJSON:
		if !json.Valid([]byte(m.Source)) {
			return nil, fmt.Errorf("protocol: json module source is not JSON text")
		}
		b = append(b, `{"json":`...)
		b = append(b, strings.TrimSpace(m.Source)...)
	case KindData:
		b = append(b, `{"data":"`...)
		b = base64.StdEncoding.AppendEncode(b, m.Data)
		b = append(b, '"')
	default:
		return nil, NewUnsupportedModuleKindError("", string(kind))
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads the contract's source value; see Module. A failure
// of the shape is *UnsupportedModuleKindError with an empty Name (the
// enclosing map or pair fills it in).
func (m *Module) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return NewUnsupportedModuleKindError("", "nothing")
	}
	switch b[0] {
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*m = Module{Kind: KindJS, Source: s}
		return nil
	case '{':
	default:
		return NewUnsupportedModuleKindError("", jsonTypeName(b))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	if len(obj) != 1 {
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		kind := strings.Join(keys, "+")
		if kind == "" {
			kind = "{}"
		}
		return NewUnsupportedModuleKindError("", kind)
	}
	for k, raw := range obj {
		kind := ModuleKind(k)
		switch kind {
		case KindJS, KindCJS, KindText:
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("protocol: a %s module's source must be a string", kind)
			}
			*m = Module{Kind: kind, Source: s}
		case KindJSON:
			*m = Module{Kind: KindJSON, Source: string(bytes.TrimSpace(raw))}
		case KindData:
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return errors.New("protocol: a data module's content must be a base64 string")
			}
			d, err := decodeBase64(s)
			if err != nil {
				return errors.New("protocol: a data module's content is not standard base64")
			}
			*m = Module{Kind: KindData, Data: d}
		default:
			return NewUnsupportedModuleKindError("", k)
		}
	}
	return nil
}

// jsonTypeName names the JSON type of a value that starts b.
func jsonTypeName(b []byte) string {
	switch b[0] {
	case '[':
		return "array"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	case '{':
		return "object"
	case '"':
		return "string"
	}
	return "number"
}

// namedKindError fills the module name into a kind error raised while
// reading the module alone.
func namedKindError(err error, name string) error {
	var k *UnsupportedModuleKindError
	if errors.As(err, &k) && k.Name == "" {
		return NewUnsupportedModuleKindError(name, k.Kind)
	}
	return err
}

// UnmarshalJSON reads an object of names to modules, naming the module in
// any *UnsupportedModuleKindError.
func (m *ModuleMap) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*m = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(ModuleMap, len(raw))
	for name, r := range raw {
		var mod Module
		if err := mod.UnmarshalJSON(r); err != nil {
			return namedKindError(err, name)
		}
		out[name] = mod
	}
	*m = out
	return nil
}

// ModulePair is one [name, source] pair of the wire's module list. Module
// maps cross the wire as pairs because capnweb deletes every own key of a
// plain object that names an Object.prototype member, so a module named
// toString would go missing from an object.
type ModulePair struct {
	Name   string
	Module Module
}

// MarshalJSON writes [name, source].
func (p ModulePair) MarshalJSON() ([]byte, error) {
	src, err := p.Module.MarshalJSON()
	if err != nil {
		return nil, namedKindError(err, p.Name)
	}
	b := jsvalue.AppendString([]byte{'['}, p.Name)
	b = append(b, ',')
	b = append(b, src...)
	return append(b, ']'), nil
}

// UnmarshalJSON reads [name, source]: exactly two elements, the first a
// string.
func (p *ModulePair) UnmarshalJSON(b []byte) error {
	var parts []json.RawMessage
	if err := json.Unmarshal(b, &parts); err != nil || len(parts) != 2 {
		return errors.New("protocol: a module pair is [name, source]")
	}
	var name string
	if err := json.Unmarshal(parts[0], &name); err != nil {
		return errors.New("protocol: a module pair's name must be a string")
	}
	var mod Module
	if err := mod.UnmarshalJSON(parts[1]); err != nil {
		return namedKindError(err, name)
	}
	*p = ModulePair{Name: name, Module: mod}
	return nil
}

// ModulePairsOf lists m as wire pairs, sorted by name. A nil map gives nil.
func ModulePairsOf(m ModuleMap) []ModulePair {
	if m == nil {
		return nil
	}
	pairs := make([]ModulePair, 0, len(m))
	for _, name := range m.Names() {
		pairs = append(pairs, ModulePair{Name: name, Module: m[name]})
	}
	return pairs
}

// ModuleMapOf builds a map from wire pairs. A name given twice fails with
// *ModuleKeyCollisionError, as a map cannot hold both. A nil list gives a
// nil map (absent); an empty one an empty map.
func ModuleMapOf(pairs []ModulePair) (ModuleMap, error) {
	if pairs == nil {
		return nil, nil
	}
	m := make(ModuleMap, len(pairs))
	for _, p := range pairs {
		if _, dup := m[p.Name]; dup {
			return nil, NewModuleKeyCollisionError(p.Name, []string{p.Name, p.Name})
		}
		m[p.Name] = p.Module
	}
	return m, nil
}
