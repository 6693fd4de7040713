package protocol

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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
// Errors are *JSONSyntaxError or, for a malformed binary envelope,
// *BinaryEnvelopeError. ParseForDispatch never panics on any input.
func ParseForDispatch(text string) (any, error) { return parse(text, false) }

// ParseForDispatchOrdered is ParseForDispatch with objects returned as
// Object, members in document order (repeated keys merged in place, last
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

// JSONSyntaxError is a document ParseForDispatch cannot read.
type JSONSyntaxError struct {
	Offset int    // byte offset of the problem
	Msg    string // what is wrong there
}

func (e *JSONSyntaxError) Error() string {
	return fmt.Sprintf("protocol: invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// BinaryEnvelopeError is a binary envelope whose data is not base64.
type BinaryEnvelopeError struct {
	Offset int // byte offset of the envelope
}

func (e *BinaryEnvelopeError) Error() string {
	return fmt.Sprintf("protocol: the binary envelope at byte %d carries data that is not base64", e.Offset)
}

type parser struct {
	s       string
	i       int
	ordered bool
}

func parse(text string, ordered bool) (any, error) {
	p := &parser{s: text, ordered: ordered}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.s) {
		return nil, p.fail("unexpected text after the value")
	}
	return v, nil
}

func (p *parser) fail(msg string) error { return &JSONSyntaxError{Offset: p.i, Msg: msg} }

func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, p.fail(fmt.Sprintf("nested deeper than %d levels", maxDepth))
	}
	if p.i >= len(p.s) {
		return nil, p.fail("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(word string) error {
	if len(p.s)-p.i < len(word) || p.s[p.i:p.i+len(word)] != word {
		return p.fail("invalid literal")
	}
	p.i += len(word)
	return nil
}

func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

func (p *parser) number() (any, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if p.digits() == 0 {
		return nil, p.fail("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, p.fail("invalid number: no digits after the decimal point")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, p.fail("invalid number: no digits in the exponent")
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, &JSONSyntaxError{Offset: start, Msg: "invalid number"}
	}
	return f, nil
}

func hexValue(s string) (rune, bool) {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendWTF8 appends a lone surrogate in its three-byte WTF-8 form.
func appendWTF8(b []byte, r rune) []byte {
	return append(b, 0xed, byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes and valid UTF-8.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.i++
	}
	buf := []byte(p.s[start:p.i])
	for {
		if p.i >= len(p.s) {
			return "", p.fail("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail("raw control character in string")
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				buf = append(buf, "\uFFFD"...)
			} else {
				buf = append(buf, p.s[p.i:p.i+size]...)
			}
			p.i += size
		case c != '\\':
			buf = append(buf, c)
			p.i++
		default:
			if p.i+1 >= len(p.s) {
				return "", p.fail("unterminated escape")
			}
			esc := p.s[p.i+1]
			p.i += 2
			switch esc {
			case '"', '\\', '/':
				buf = append(buf, esc)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				switch {
				case r >= 0xd800 && r < 0xdc00:
					// A high surrogate pairs with an escaped low one
					// directly after it; otherwise it stands alone.
					if p.i+6 <= len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
						if lo, ok := hexValue(p.s[p.i+2 : p.i+6]); ok && lo >= 0xdc00 && lo < 0xe000 {
							p.i += 6
							buf = utf8.AppendRune(buf, utf16.DecodeRune(r, lo))
							continue
						}
					}
					buf = appendWTF8(buf, r)
				case r >= 0xdc00 && r < 0xe000:
					buf = appendWTF8(buf, r)
				default:
					buf = utf8.AppendRune(buf, r)
				}
			default:
				p.i -= 2
				return "", p.fail(fmt.Sprintf("invalid escape \\%c", esc))
			}
		}
	}
}

func (p *parser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.fail("short \\u escape")
	}
	r, ok := hexValue(p.s[p.i : p.i+4])
	if !ok {
		return 0, p.fail("invalid \\u escape")
	}
	p.i += 4
	return r, nil
}

func (p *parser) array(depth int) (any, error) {
	p.i++ // [
	list := []any{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return list, nil
	}
	for {
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		p.space()
		if p.i >= len(p.s) {
			return nil, p.fail("unterminated array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return list, nil
		default:
			return nil, p.fail("expected , or ] in array")
		}
	}
}

func (p *parser) object(depth int) (any, error) {
	start := p.i
	p.i++ // {
	var members Object
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return p.finishObject(members, start)
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.fail("expected a string key in object")
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.fail("expected : after object key")
		}
		p.i++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		members = append(members, Member{Key: key, Value: v})
		p.space()
		if p.i >= len(p.s) {
			return nil, p.fail("unterminated object")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return p.finishObject(members, start)
		default:
			return nil, p.fail("expected , or } in object")
		}
	}
}

// finishObject merges repeated keys as JavaScript does, turns a binary
// envelope into bytes, and builds the object form the caller asked for.
func (p *parser) finishObject(members Object, start int) (any, error) {
	merged := members
	if len(members) > 1 {
		merged = mergeRepeated(members)
	}
	if len(merged) == 2 {
		if b, ok, err := decodeBinaryEnvelope(merged); ok {
			if err != nil {
				return nil, &BinaryEnvelopeError{Offset: start}
			}
			return b, nil
		}
	}
	if p.ordered {
		if merged == nil {
			return Object{}, nil
		}
		return merged, nil
	}
	m := make(map[string]any, len(merged))
	for _, mem := range merged {
		m[mem.Key] = mem.Value
	}
	return m, nil
}

// mergeRepeated keeps each key once, at its first position, with its last
// value.
func mergeRepeated(o Object) Object {
	seen := make(map[string]int, len(o))
	out := make(Object, 0, len(o))
	for _, m := range o {
		if i, ok := seen[m.Key]; ok {
			out[i].Value = m.Value
			continue
		}
		seen[m.Key] = len(out)
		out = append(out, m)
	}
	return out
}

// decodeBinaryEnvelope reports whether the two members o form a binary
// envelope and, if so, decodes its data.
func decodeBinaryEnvelope(o Object) ([]byte, bool, error) {
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
