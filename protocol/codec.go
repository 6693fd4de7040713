package protocol

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"

	"github.com/supolka/codemode-gateway/jsvalue"
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

// ArrayBufferView is bytes that StringifyForDispatch writes under the
// ArrayBufferView binary tag, as JavaScript writes a typed array other than
// Uint8Array (a Uint16Array, a DataView, …). A plain []byte is written under
// the Uint8Array tag. Both decode to []byte.
type ArrayBufferView []byte

// StringifyForDispatch writes v as the JSON text JavaScript's
// JSON.stringify writes for the corresponding JavaScript value, byte for
// byte, with binary values in BinaryTag envelopes. That means:
//
//   - strings quoted as jsvalue.AppendString quotes them;
//   - numbers as Number.prototype.toString writes them (jsvalue.FormatNumber):
//     -0 as 0, NaN and the infinities as null, 1e21 as 1e+21, 1e-7 as 1e-7;
//     Go integers are converted to float64 first, as JavaScript holds them;
//   - nil, and a nil pointer, map or slice other than []byte, as null, as
//     encoding/json writes them; a nil jsvalue.Object as {};
//     jsvalue.Undefined, functions and channels dropped from objects, null
//     in arrays, and an error at the top level;
//   - []byte under the Uint8Array tag, ArrayBufferView under the
//     ArrayBufferView tag, data in standard base64 with padding;
//   - jsvalue.Object members in JavaScript's property order
//     (jsvalue.Object.Properties); a Go map with string keys in the order
//     JavaScript gives an object built by inserting the keys sorted by byte
//     order (jsvalue.SortKeys);
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
	if err := e.top(v); err != nil {
		return "", err
	}
	return string(e.buf), nil
}

// DispatchSize is the length of StringifyForDispatch(v), and its error,
// without the text: a server that only checks how large a message will be
// writes it into a buffer it reuses.
func DispatchSize(v any) (int, error) {
	e := sizeEncoders.Get().(*encoder)
	defer func() {
		if cap(e.buf) > sizeEncoderKeepMax {
			e.buf = nil
		}
		e.buf = e.buf[:0]
		sizeEncoders.Put(e)
	}()
	if err := e.top(v); err != nil {
		return 0, err
	}
	return len(e.buf), nil
}

// sizeEncoders are DispatchSize's encoders; a buffer that grew past
// sizeEncoderKeepMax for a rare large message is not kept.
var sizeEncoders = sync.Pool{New: func() any { return &encoder{} }}

const sizeEncoderKeepMax = 64 << 10

// top writes v as a whole message: a value JSON cannot write at the top
// (undefined, a function) is an error, not nothing.
func (e *encoder) top(v any) error {
	ok, err := e.value(v, 0)
	if err != nil {
		return err
	}
	if !ok {
		return errUndefinedTop
	}
	return nil
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
	if depth > jsvalue.DefaultMaxDepth {
		return false, fmt.Errorf("protocol: value nested deeper than %d levels (a cycle?)", jsvalue.DefaultMaxDepth)
	}
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case jsvalue.UndefinedValue:
		return false, nil
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		e.buf = jsvalue.AppendString(e.buf, x)
	case float64:
		e.buf = jsvalue.AppendNumber(e.buf, x)
	case int:
		e.buf = jsvalue.AppendNumber(e.buf, float64(x))
	case int64:
		e.buf = jsvalue.AppendNumber(e.buf, float64(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return false, fmt.Errorf("protocol: json.Number %q is not a number", string(x))
		}
		e.buf = jsvalue.AppendNumber(e.buf, f)
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
	case jsvalue.Object:
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
		e.buf = jsvalue.AppendString(e.buf, key(i))
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

func (e *encoder) object(o jsvalue.Object, depth int) error {
	ordered := o.Properties()
	return e.members(len(ordered), func(i int) string { return ordered[i].Key },
		func(i int) any { return ordered[i].Value }, depth)
}

func (e *encoder) stringMap(m map[string]any, depth int) error {
	keys := jsvalue.SortedKeys(m)
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
	if v, ok := jsvalue.Scalar(rv); ok {
		return e.value(v, depth)
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return true, nil
		}
		return e.value(rv.Elem().Interface(), depth+1)
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
		jsvalue.SortKeys(keys)
		return true, e.members(len(keys), func(i int) string { return keys[i] },
			func(i int) any { return rv.MapIndex(reflect.ValueOf(keys[i]).Convert(t.Key())).Interface() }, depth)
	case reflect.Struct:
		return e.viaEncodingJSON(rv.Interface(), depth)
	}
	return false, fmt.Errorf("protocol: a %s has no JSON form", t)
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
