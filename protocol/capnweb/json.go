package capnweb

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/supolka/codemode-gateway/protocol"
)

// jsonParser is a strict JSON parser (RFC 8259, as JSON.parse accepts)
// producing nil, bool, string, json.Number, []any and rawObject. It
// bounds nesting so that hostile input cannot exhaust the stack, and it
// is faster than encoding/json for the small messages RPC sends.
type jsonParser struct {
	data     []byte
	pos      int
	maxDepth int
	stack    []any // scratch for array elements, copied out exactly sized
}

type jsonError struct {
	msg string
	pos int
}

var errJSONTooDeep = &jsonError{msg: "nesting too deep"}

func (e *jsonError) Error() string { return fmt.Sprintf("%s at offset %d", e.msg, e.pos) }

// parseJSON parses one JSON text; nesting beyond maxDepth is an error.
func parseJSON(data []byte, maxDepth int) (any, error) {
	return parseJSONScratch(data, maxDepth, nil)
}

// scratchKeepMax bounds the array scratch kept between parses.
const scratchKeepMax = 1024

// parseJSONScratch is parseJSON reusing *scratch (when not nil) as the
// parser's array scratch, so that a reader parsing one message after
// another does not grow a new one each time. The scratch holds no values
// afterwards.
func parseJSONScratch(data []byte, maxDepth int, scratch *[]any) (any, error) {
	p := &jsonParser{data: data, maxDepth: maxDepth}
	if scratch != nil {
		p.stack = (*scratch)[:0]
		defer func() {
			if cap(p.stack) > scratchKeepMax {
				*scratch = nil
				return
			}
			clear(p.stack[:cap(p.stack)])
			*scratch = p.stack[:0]
		}()
	}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.pos != len(p.data) {
		return nil, p.fail("unexpected data after the JSON value")
	}
	return v, nil
}

func (p *jsonParser) fail(msg string) error { return &jsonError{msg: msg, pos: p.pos} }

func (p *jsonParser) space() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.pos >= len(p.data) {
		return nil, p.fail("unexpected end of JSON")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
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
	}
	return nil, p.fail("unexpected character")
}

func (p *jsonParser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.fail("invalid literal")
	}
	p.pos += len(word)
	return nil
}

func (p *jsonParser) array(depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, errJSONTooDeep
	}
	p.pos++ // [
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return []any{}, nil
	}
	base := len(p.stack)
	for {
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		p.stack = append(p.stack, v)
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of JSON in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			out := make([]any, len(p.stack)-base)
			copy(out, p.stack[base:])
			clear(p.stack[base:])
			p.stack = p.stack[:base]
			return out, nil
		default:
			return nil, p.fail("expected , or ] in array")
		}
	}
}

// rawObject is a parsed JSON object with its keys in text order; a
// repeated key keeps its first position and its last value, as
// JSON.parse does.
type rawObject []Field

func (p *jsonParser) object(depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, errJSONTooDeep
	}
	p.pos++ // {
	out := rawObject{}
	var index map[string]int // for large objects only
	p.space()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return out, nil
	}
	for {
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("expected a string key in object")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("expected : in object")
		}
		p.pos++
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		at := -1
		if index != nil {
			if i, ok := index[k]; ok {
				at = i
			}
		} else {
			for i := range out {
				if out[i].Key == k {
					at = i
					break
				}
			}
		}
		if at >= 0 {
			out[at].Value = v
		} else {
			out = append(out, Field{Key: k, Value: v})
			if index != nil {
				index[k] = len(out) - 1
			} else if len(out) > 16 {
				index = make(map[string]int, len(out)*2)
				for i, f := range out {
					index[f.Key] = i
				}
			}
		}
		p.space()
		if p.pos >= len(p.data) {
			return nil, p.fail("unexpected end of JSON in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return out, nil
		default:
			return nil, p.fail("expected , or } in object")
		}
	}
}

func (p *jsonParser) number() (any, error) {
	start := p.pos
	d := p.data
	if p.pos < len(d) && d[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
	case p.pos < len(d) && d[p.pos] >= '1' && d[p.pos] <= '9':
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
	default:
		return nil, p.fail("invalid number")
	}
	if p.pos < len(d) && d[p.pos] == '.' {
		p.pos++
		n := p.pos
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
		if p.pos == n {
			return nil, p.fail("invalid number")
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		n := p.pos
		for p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			p.pos++
		}
		if p.pos == n {
			return nil, p.fail("invalid number")
		}
	}
	return json.Number(d[start:p.pos]), nil
}

// str parses a string. Lone surrogate escapes and bytes that are not
// UTF-8 become U+FFFD, since a Go string holds UTF-8.
func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	d := p.data
	start := p.pos
	// Fast path: no escapes, ASCII or valid UTF-8.
	for p.pos < len(d) {
		c := d[p.pos]
		if c == '"' {
			s := d[start:p.pos]
			p.pos++
			if utf8.Valid(s) {
				return string(s), nil
			}
			return string([]rune(string(s))), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	buf := append([]byte(nil), d[start:p.pos]...)
	for p.pos < len(d) {
		c := d[p.pos]
		switch {
		case c == '"':
			p.pos++
			if utf8.Valid(buf) {
				return string(buf), nil
			}
			return string([]rune(string(buf))), nil
		case c < 0x20:
			return "", p.fail("control character in string")
		case c != '\\':
			buf = append(buf, c)
			p.pos++
			continue
		}
		p.pos++
		if p.pos >= len(d) {
			break
		}
		e := d[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
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
			r, ok := p.hex4()
			if !ok {
				return "", p.fail("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				save := p.pos
				if p.pos+1 < len(d) && d[p.pos] == '\\' && d[p.pos+1] == 'u' {
					p.pos += 2
					if lo, ok := p.hex4(); ok {
						if dec := utf16.DecodeRune(r, lo); dec != utf8.RuneError {
							r2 = dec
						} else {
							p.pos = save
						}
					} else {
						return "", p.fail("invalid \\u escape")
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.fail("invalid escape in string")
		}
	}
	return "", p.fail("unterminated string")
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(p.data[p.pos:p.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.pos += 4
	return rune(n), true
}

// MarshalJSON writes the object in key order (used in error texts).
func (o rawObject) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range o {
		if i > 0 {
			b = append(b, ',')
		}
		b = protocol.AppendJSONString(b, f.Key)
		b = append(b, ':')
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}
