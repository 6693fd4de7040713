package protocol

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// ParseForDispatch reads JSON text as JavaScript's JSON.parse does and
// decodes binary envelopes. It returns nil, bool, float64, string, []any,
// map[string]any and []byte:
//
//   - an object whose only two members are BinaryTag, with the value
//     "Uint8Array" or "ArrayBufferView", and "data", with a string value,
//     is a binary envelope and becomes []byte; its data must be standard
//     base64 (padding optional), or parsing fails; any other object,
//     including one with an unknown tag value, stays an object;
//   - numbers become float64; one too large for a double becomes ±Inf, as
//     JSON.parse gives Infinity;
//   - a repeated object key keeps its last value, as in JavaScript;
//   - strings: escaped surrogate pairs become their character, and an
//     escaped lone surrogate (\ud800) becomes its three-byte WTF-8 form, so
//     StringifyForDispatch writes it back as the same escape; raw bytes that
//     are not UTF-8 become U+FFFD, as a TextDecoder in front of JSON.parse
//     would have made them;
//   - the grammar is strict JSON (RFC 8259), as JSON.parse is: no comments,
//     no trailing commas, no leading byte-order mark, no raw control
//     characters inside strings; documents nested deeper than 10000 levels
//     fail.
//
// Errors wrap a *jsvalue.SyntaxError or, for a malformed binary envelope,
// are *BinaryEnvelopeError. ParseForDispatch never panics on any input.
func ParseForDispatch(text string) (any, error) { return parse(text, false) }

// ParseForDispatchOrdered is ParseForDispatch with objects returned as
// jsvalue.Object, members in document order (repeated keys merged in place, last
// value kept), so that StringifyForDispatch of the result writes back what
// JSON.stringify would write for the value JSON.parse built.
func ParseForDispatchOrdered(text string) (any, error) { return parse(text, true) }

// ArgsFromJSON reads the argument grammar of a tool call: the empty string
// is an empty argument list, a JSON array is the argument list, and any
// other JSON value is a single argument.
func ArgsFromJSON(argsJSON string) ([]any, error) {
	if argsJSON == "" {
		return []any{}, nil
	}
	v, err := ParseForDispatch(argsJSON)
	if err != nil {
		return nil, err
	}
	if list, ok := v.([]any); ok {
		return list, nil
	}
	return []any{v}, nil
}

// BinaryEnvelopeError is a binary envelope whose data is not base64.
type BinaryEnvelopeError struct {
	Offset int // byte offset of the envelope
}

func (e *BinaryEnvelopeError) Error() string {
	return fmt.Sprintf("protocol: the binary envelope at byte %d carries data that is not base64", e.Offset)
}

// dispatchJSON and orderedJSON read the dispatch grammar: a binary envelope
// becomes bytes, any other object a map or, ordered, a jsvalue.Object.
var (
	dispatchJSON = jsvalue.ParseOptions{BuildObject: func(o jsvalue.Object, start int) (any, error) {
		return finishObject(o, start, false)
	}}
	orderedJSON = jsvalue.ParseOptions{BuildObject: func(o jsvalue.Object, start int) (any, error) {
		return finishObject(o, start, true)
	}}
)

func parse(text string, ordered bool) (any, error) {
	opts := dispatchJSON
	if ordered {
		opts = orderedJSON
	}
	v, err := jsvalue.Parse(text, opts)
	if _, syntax := err.(*jsvalue.SyntaxError); syntax {
		// Named as the codec's, the text a program reads.
		return nil, fmt.Errorf("protocol: %w", err)
	}
	return v, err
}

// finishObject turns a binary envelope into bytes and builds the object
// form the caller asked for. The reader already merged repeated keys as
// JavaScript does.
func finishObject(o jsvalue.Object, start int, ordered bool) (any, error) {
	if len(o) == 2 {
		if b, ok, err := decodeBinaryEnvelope(o); ok {
			if err != nil {
				return nil, &BinaryEnvelopeError{Offset: start}
			}
			return b, nil
		}
	}
	if ordered {
		return o, nil
	}
	m := make(map[string]any, len(o))
	for _, mem := range o {
		m[mem.Key] = mem.Value
	}
	return m, nil
}

// decodeBinaryEnvelope reports whether the two members o form a binary
// envelope and, if so, decodes its data.
func decodeBinaryEnvelope(o jsvalue.Object) ([]byte, bool, error) {
	tag, ok := o.Get(BinaryTag)
	if !ok {
		return nil, false, nil
	}
	data, ok := o.Get("data")
	if !ok {
		return nil, false, nil
	}
	if tag != BinaryKindUint8Array && tag != BinaryKindView {
		return nil, false, nil
	}
	s, ok := data.(string)
	if !ok {
		return nil, false, nil
	}
	b, err := decodeBase64(s)
	return b, true, err
}

var errBase64 = errors.New("protocol: invalid base64")

// decodeBase64 reads standard base64 with or without padding, and nothing
// else: no whitespace, no URL alphabet. Unused low bits of the last
// character are ignored, as atob ignores them.
func decodeBase64(s string) ([]byte, error) {
	body := s
	if len(s)%4 == 0 && len(s) > 0 {
		switch {
		case s[len(s)-2:] == "==":
			body = s[:len(s)-2]
		case s[len(s)-1] == '=':
			body = s[:len(s)-1]
		}
	}
	if len(body)%4 == 1 {
		return nil, errBase64
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			return nil, errBase64
		}
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(body)))
	n, err := base64.RawStdEncoding.Decode(out, []byte(body))
	if err != nil {
		return nil, errBase64
	}
	return out[:n], nil
}
