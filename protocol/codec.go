package protocol

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// BinaryTag is the key of the envelope a binary value crosses the dispatch
// grammar in, because JSON has no binary type:
//
//	{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}
//
// The tag's value names what was encoded (BinaryKindUint8Array or
// BinaryKindView) and data holds the bytes in standard base64 with padding.
const BinaryTag = "__executor_binary_v1__"

// The two values BinaryTag takes. Decoding turns both into bytes, so a typed
// array other than Uint8Array decays to plain bytes on the way through.
const (
	// BinaryKindUint8Array tags a Uint8Array (a Go []byte). The JavaScript
	// codec also writes an ArrayBuffer under this tag: its bytes, unviewed.
	BinaryKindUint8Array = "Uint8Array"
	// BinaryKindView tags any other ArrayBuffer view: Uint16Array,
	// Float64Array, DataView and the rest (a Go ArrayBufferView). The data
	// is the view's own bytes in memory order (little-endian elements).
	BinaryKindView = "ArrayBufferView"
)

// maxDepth bounds the nesting of values the codec writes and reads, so a
// cyclic Go value or a hostile document fails with an error instead of
// exhausting the stack. encoding/json uses the same bound.
const maxDepth = 10000

// UndefinedValue is the type of Undefined.
type UndefinedValue struct{}

// Undefined is JavaScript's undefined on the Go side of the codec. Like
// JavaScript, StringifyForDispatch drops an object member whose value is
// Undefined, writes null for an Undefined array element, and refuses an
// Undefined top-level value (JSON.stringify returns no text for it). Go
// functions and channels are treated the same way, as JavaScript treats
// functions.
var Undefined UndefinedValue

// Member is one key and value of an Object.
type Member struct {
	Key   string
	Value any
}

// Object is a JSON object whose members keep the order they were given in,
// the way a JavaScript object keeps insertion order. Use it wherever the
// byte-exact output matters; a Go map has no order of its own.
//
// StringifyForDispatch writes an Object the way JavaScript writes the object
// built by assigning its members in order: array-index keys ("0", "1", …,
// up to "4294967294") come first in numeric order, the other keys follow in
// the order given, and a repeated key keeps its first position and its last
// value.
type Object []Member

// MarshalJSON writes the members in their order (repeated keys as given),
// the values with encoding/json; for the byte-exact text JavaScript would
// write, use StringifyForDispatch.
func (o Object) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, m := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, m.Key)
		b = append(b, ':')
		v, err := json.Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// Get returns the value of the last member named key.
func (o Object) Get(key string) (any, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if o[i].Key == key {
			return o[i].Value, true
		}
	}
	return nil, false
}

// ArrayBufferView is bytes that StringifyForDispatch writes under the
// ArrayBufferView binary tag, as JavaScript writes a typed array other than
// Uint8Array (a Uint16Array, a DataView, …). A plain []byte is written under
// the Uint8Array tag. Both decode to []byte.
type ArrayBufferView []byte

// StringifyForDispatch writes v as the JSON text JavaScript's
// JSON.stringify writes for the corresponding JavaScript value, byte for
// byte, with binary values in BinaryTag envelopes. That means:
//
//   - no HTML escaping; U+2028, U+2029 and U+007F written raw; control
//     characters as \b \t \n \f \r or \u00xx (lowercase hex);
//   - numbers as Number.prototype.toString writes them (FormatJSNumber):
//     -0 as 0, NaN and the infinities as null, 1e21 as 1e+21, 1e-7 as 1e-7;
//     Go integers are converted to float64 first, as JavaScript holds them;
//   - nil, and a nil pointer, map or slice other than []byte, as null, as
//     encoding/json writes them; a nil Object as {}; Undefined, functions
//     and channels dropped from objects, null in arrays, and an error at
//     the top level;
//   - []byte under the Uint8Array tag, ArrayBufferView under the
//     ArrayBufferView tag, data in standard base64 with padding;
//   - Object members in JavaScript's property order (see Object); a Go map
//     with string keys in the order JavaScript gives an object built by
//     inserting the keys sorted by byte order, that is array-index keys in
//     numeric order and then the rest sorted;
//   - strings: valid UTF-8 raw; the three-byte WTF-8 encoding of a lone
//     UTF-16 surrogate (ED A0 80 to ED BF BF), which is what
//     ParseForDispatch produces for one, as \udxxx, exactly as JSON.stringify
//     writes a lone surrogate (a high and a low one in a row combine into
//     their character); any other byte that is not UTF-8 as U+FFFD, the
//     character a TextDecoder would have produced for it;
//   - json.RawMessage re-read and written in this canonical form; json.Number
//     as the number it reads as;
//   - anything else (structs, types with a MarshalJSON or MarshalText
//     method, maps with non-string keys) through encoding/json first, then
//     re-read and written in this form; a []byte inside such a value becomes
//     encoding/json's base64 string, not a binary envelope.
//
// Values nested deeper than 10000 levels, cyclic values included, fail.
func StringifyForDispatch(v any) (string, error) {
	e := encoder{}
	ok, err := e.value(v, 0)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errUndefinedTop
	}
	return string(e.buf), nil
}

var errUndefinedTop = errors.New("protocol: the value is undefined (or a function), which JSON cannot write")

type encoder struct {
	buf []byte
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// value writes v and reports whether it wrote anything: false means v is
// undefined in JavaScript's terms, and nothing was appended.
func (e *encoder) value(v any, depth int) (bool, error) {
	if depth > maxDepth {
		return false, fmt.Errorf("protocol: value nested deeper than %d levels (a cycle?)", maxDepth)
	}
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case UndefinedValue:
		return false, nil
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		e.buf = AppendJSONString(e.buf, x)
	case float64:
		e.buf = AppendJSNumber(e.buf, x)
	case float32:
		e.buf = AppendJSNumber(e.buf, float64(x))
	case int:
		e.buf = AppendJSNumber(e.buf, float64(x))
	case int64:
		e.buf = AppendJSNumber(e.buf, float64(x))
	case int32:
		e.buf = AppendJSNumber(e.buf, float64(x))
	case uint64:
		e.buf = AppendJSNumber(e.buf, float64(x))
	case uint32:
		e.buf = AppendJSNumber(e.buf, float64(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return false, fmt.Errorf("protocol: json.Number %q is not a number", string(x))
		}
		e.buf = AppendJSNumber(e.buf, f)
	case []byte:
		e.binary(BinaryKindUint8Array, x)
	case ArrayBufferView:
		e.binary(BinaryKindView, x)
	case json.RawMessage:
		parsed, err := parse(string(x), true)
		if err != nil {
			return false, err
		}
		return e.value(parsed, depth)
	case Object:
		return true, e.object(x, depth)
	case map[string]any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		return true, e.stringMap(x, depth)
	case []any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		e.buf = append(e.buf, '[')
		for i, el := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.element(el, depth); err != nil {
				return false, err
			}
		}
		e.buf = append(e.buf, ']')
	default:
		return e.reflectValue(reflect.ValueOf(v), depth)
	}
	return true, nil
}

// element writes one array element: JavaScript writes null for one that is
// undefined.
func (e *encoder) element(v any, depth int) error {
	ok, err := e.value(v, depth+1)
	if err == nil && !ok {
		e.buf = append(e.buf, "null"...)
	}
	return err
}

func (e *encoder) binary(kind string, b []byte) {
	e.buf = append(e.buf, `{"`+BinaryTag+`":"`...)
	e.buf = append(e.buf, kind...)
	e.buf = append(e.buf, `","data":"`...)
	e.buf = base64.StdEncoding.AppendEncode(e.buf, b)
	e.buf = append(e.buf, `"}`...)
}

// members writes an object from keys already in JavaScript property order.
func (e *encoder) members(n int, key func(int) string, val func(int) any, depth int) error {
	e.buf = append(e.buf, '{')
	first := true
	for i := range n {
		mark := len(e.buf)
		if !first {
			e.buf = append(e.buf, ',')
		}
		e.buf = AppendJSONString(e.buf, key(i))
		e.buf = append(e.buf, ':')
		ok, err := e.value(val(i), depth+1)
		if err != nil {
			return err
		}
		if !ok {
			e.buf = e.buf[:mark] // an undefined member is dropped whole
			continue
		}
		first = false
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) object(o Object, depth int) error {
	ordered := jsPropertyOrder(o)
	return e.members(len(ordered), func(i int) string { return ordered[i].Key },
		func(i int) any { return ordered[i].Value }, depth)
}

func (e *encoder) stringMap(m map[string]any, depth int) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortKeysJS(keys)
	return e.members(len(keys), func(i int) string { return keys[i] },
		func(i int) any { return m[keys[i]] }, depth)
}

func (e *encoder) reflectValue(rv reflect.Value, depth int) (bool, error) {
	if !rv.IsValid() {
		e.buf = append(e.buf, "null"...)
		return true, nil
	}
	t := rv.Type()
	if t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) {
		if (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		return e.viaEncodingJSON(rv.Interface(), depth)
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		return e.value(rv.Elem().Interface(), depth+1)
	case reflect.Bool:
		e.buf = strconv.AppendBool(e.buf, rv.Bool())
	case reflect.String:
		e.buf = AppendJSONString(e.buf, rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.buf = AppendJSNumber(e.buf, float64(rv.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.buf = AppendJSNumber(e.buf, float64(rv.Uint()))
	case reflect.Float32, reflect.Float64:
		e.buf = AppendJSNumber(e.buf, rv.Float())
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return false, nil
	case reflect.Slice:
		if rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			e.binary(BinaryKindUint8Array, rv.Bytes())
			return true, nil
		}
		return true, e.reflectList(rv, depth)
	case reflect.Array:
		return true, e.reflectList(rv, depth)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return e.viaEncodingJSON(rv.Interface(), depth)
		}
		if rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		keys := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			keys = append(keys, k.String())
		}
		sortKeysJS(keys)
		return true, e.members(len(keys), func(i int) string { return keys[i] },
			func(i int) any { return rv.MapIndex(reflect.ValueOf(keys[i]).Convert(t.Key())).Interface() }, depth)
	case reflect.Struct:
		return e.viaEncodingJSON(rv.Interface(), depth)
	default:
		return false, fmt.Errorf("protocol: a %s has no JSON form", t)
	}
	return true, nil
}

func (e *encoder) reflectList(rv reflect.Value, depth int) error {
	e.buf = append(e.buf, '[')
	for i := range rv.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.element(rv.Index(i).Interface(), depth); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

func (e *encoder) viaEncodingJSON(v any, depth int) (bool, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return false, fmt.Errorf("protocol: %w", err)
	}
	parsed, err := parse(string(raw), true)
	if err != nil {
		return false, err
	}
	return e.value(parsed, depth+1)
}

// arrayIndex reports whether key is a canonical array index ("0" to
// "4294967294", no leading zeros), which JavaScript orders before every
// other property key, and returns its value.
func arrayIndex(key string) (uint64, bool) {
	if len(key) == 0 || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= math.MaxUint32-1
}

// jsPropertyOrder returns o's members in the order JavaScript enumerates
// the object built from them: repeated keys merged (first position, last
// value), array indices first in numeric order.
func jsPropertyOrder(o Object) []Member {
	seen := make(map[string]int, len(o))
	merged := make([]Member, 0, len(o))
	hasIndex := false
	for _, m := range o {
		if i, ok := seen[m.Key]; ok {
			merged[i].Value = m.Value
			continue
		}
		seen[m.Key] = len(merged)
		merged = append(merged, m)
		if _, ok := arrayIndex(m.Key); ok {
			hasIndex = true
		}
	}
	if hasIndex {
		sort.SliceStable(merged, func(i, j int) bool {
			a, aok := arrayIndex(merged[i].Key)
			b, bok := arrayIndex(merged[j].Key)
			if aok && bok {
				return a < b
			}
			return aok && !bok
		})
	}
	return merged
}

// sortKeysJS orders distinct keys as JavaScript enumerates an object into
// which they were inserted in byte order.
func sortKeysJS(keys []string) {
	slices.SortFunc(keys, func(x, y string) int {
		a, aok := arrayIndex(x)
		b, bok := arrayIndex(y)
		switch {
		case aok && bok:
			return int(int64(a) - int64(b))
		case aok:
			return -1
		case bok:
			return 1
		}
		return strings.Compare(x, y)
	})
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s quoted as JSON.stringify quotes a string. See
// StringifyForDispatch for how bytes that are not UTF-8 are written.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size != 1 {
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		if hi, ok := surrogateAt(s, i); ok {
			if lo, ok := surrogateAt(s, i+3); ok && hi < 0xdc00 && lo >= 0xdc00 {
				dst = utf8.AppendRune(dst, 0x10000+(hi-0xd800)<<10+(lo-0xdc00))
				i += 6
			} else {
				dst = append(dst, '\\', 'u', 'd', hexDigits[hi>>8&0xf], hexDigits[hi>>4&0xf], hexDigits[hi&0xf])
				i += 3
			}
		} else {
			dst = append(dst, "\uFFFD"...)
			i++
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// surrogateAt decodes the three-byte WTF-8 form of a UTF-16 surrogate at
// s[i:], the form ParseForDispatch gives a lone surrogate.
func surrogateAt(s string, i int) (rune, bool) {
	if i+2 >= len(s) || s[i] != 0xed || s[i+1] < 0xa0 || s[i+1] > 0xbf || s[i+2] < 0x80 || s[i+2] > 0xbf {
		return 0, false
	}
	return 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), true
}

// jsonStringLen is len(appendJSString(nil, s)) without building it.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size != 1 {
			n += size
			i += size
			continue
		}
		if hi, ok := surrogateAt(s, i); ok {
			if lo, ok := surrogateAt(s, i+3); ok && hi < 0xdc00 && lo >= 0xdc00 {
				n += 4
				i += 6
			} else {
				n += 6
				i += 3
			}
		} else {
			n += 3
			i++
		}
	}
	return n
}
