package jsvalue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseOptions choose how Parse builds the values it reads.
type ParseOptions struct {
	// MaxDepth bounds how deep arrays and objects nest; deeper input fails
	// with an error that matches ErrTooDeep. Zero means DefaultMaxDepth.
	MaxDepth int
	// RawNumbers keeps numbers as json.Number, their text as written,
	// instead of float64.
	RawNumbers bool
	// ReplaceLoneSurrogates turns an escaped lone surrogate (\ud800) into
	// U+FFFD. By default it becomes its three-byte WTF-8 form, which
	// AppendString writes back as the same escape.
	ReplaceLoneSurrogates bool
	// Intern, when set, holds strings the caller expects to read often (a
	// protocol's keywords): one written without escapes is returned as a
	// shared value instead of a new allocation.
	Intern *InternTable
	// BuildObject, when set, makes the value of each object from its
	// members (repeated keys already merged) and the byte offset where it
	// starts; without it an object is its Object.
	BuildObject func(members Object, offset int) (any, error)
}

// DefaultMaxDepth bounds the nesting Parse reads when ParseOptions.MaxDepth
// is zero, so a hostile document fails with an error instead of exhausting
// the stack. encoding/json uses the same bound.
const DefaultMaxDepth = 10000

// InternTable is a fixed set of strings that Parse returns shared.
type InternTable struct {
	boxed  map[string]any
	maxLen int // the longest word: a longer string is not looked up
}

// NewInternTable builds the table of words.
func NewInternTable(words ...string) *InternTable {
	t := &InternTable{boxed: make(map[string]any, len(words))}
	for _, w := range words {
		t.boxed[w] = w
		t.maxLen = max(t.maxLen, len(w))
	}
	return t
}

// ErrTooDeep is matched (errors.Is) by the error of a document nested
// deeper than ParseOptions.MaxDepth.
var ErrTooDeep = errors.New("jsvalue: JSON nested too deep")

// Parse reads one JSON text strictly, as JSON.parse does (RFC 8259: no
// comments, no trailing commas, no leading byte-order mark, no raw control
// characters in strings). It returns nil, bool, float64 (or json.Number),
// string, []any and Object: an object keeps its members in document order,
// and a repeated key keeps its first position and its last value, as in
// JavaScript. Bytes that are not UTF-8 become U+FFFD, as a TextDecoder in
// front of JSON.parse would make them. Errors are *SyntaxError, or what
// ParseOptions.BuildObject returns. It never panics on any input.
func Parse[T string | []byte](src T, opts ParseOptions) (any, error) {
	return parse(src, opts, nil)
}

// ParseScratch is Parse reusing *scratch as the parser's array
// scratch, so that a reader parsing one message after another does not grow
// a new one each time. The scratch holds no values afterwards, and one that
// grew past 1024 slots is not kept.
func ParseScratch(src []byte, opts ParseOptions, scratch *[]any) (any, error) {
	return parse(src, opts, scratch)
}

// scratchKeepMax bounds the array scratch kept between parses.
const scratchKeepMax = 1024

func parse[T string | []byte](src T, opts ParseOptions, scratch *[]any) (any, error) {
	p := &jsonParser[T]{s: src, opts: opts}
	if p.opts.MaxDepth <= 0 {
		p.opts.MaxDepth = DefaultMaxDepth
	}
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
	if p.i < len(p.s) {
		return nil, p.fail("unexpected text after the value")
	}
	return v, nil
}

// SyntaxError is a document the JSON reader cannot read.
type SyntaxError struct {
	Offset  int    // byte offset of the problem
	Msg     string // what is wrong there
	tooDeep bool
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

// Is matches ErrTooDeep for a document nested too deep.
func (e *SyntaxError) Is(target error) bool { return e.tooDeep && target == ErrTooDeep }

type jsonParser[T string | []byte] struct {
	s     T
	i     int
	opts  ParseOptions
	stack []any // scratch for array elements, copied out exactly sized
}

func (p *jsonParser[T]) fail(msg string) error { return &SyntaxError{Offset: p.i, Msg: msg} }

func (p *jsonParser[T]) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value reads the value at p.i, depth levels inside the document (the
// top-level value is at 0).
func (p *jsonParser[T]) value(depth int) (any, error) {
	if depth > p.opts.MaxDepth {
		return nil, &SyntaxError{Offset: p.i, Msg: fmt.Sprintf("nested deeper than %d levels", p.opts.MaxDepth), tooDeep: true}
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
		if v, ok := p.interned(); ok {
			return v, nil
		}
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

func (p *jsonParser[T]) literal(word string) error {
	if len(p.s)-p.i < len(word) || string(p.s[p.i:p.i+len(word)]) != word {
		return p.fail("invalid literal")
	}
	p.i += len(word)
	return nil
}

func (p *jsonParser[T]) digits() int {
	start := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

func (p *jsonParser[T]) number() (any, error) {
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
	if n, ok := smallInteger(p.s[start:p.i]); ok {
		if p.opts.RawNumbers {
			return smallIntegerTexts[n], nil
		}
		return smallIntegers[n], nil
	}
	text := string(p.s[start:p.i])
	if p.opts.RawNumbers {
		return json.Number(text), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, &SyntaxError{Offset: start, Msg: "invalid number"}
	}
	// One too large for a double is ±Inf, as JSON.parse gives Infinity.
	return f, nil
}

// smallIntegers and smallIntegerTexts hold, boxed once, the float64 and
// the json.Number of every integer below smallIntegerLimit: ids, counts
// and small arguments, most of the numbers of a protocol message, are read
// without an allocation.
const smallIntegerLimit = 1024

var (
	smallIntegers     [smallIntegerLimit]any
	smallIntegerTexts [smallIntegerLimit]any
)

func init() {
	for i := range smallIntegerLimit {
		smallIntegers[i] = float64(i)
		smallIntegerTexts[i] = json.Number(strconv.Itoa(i))
	}
}

// BoxFloat64 returns f as an any. A small non-negative integer shares one
// allocation made at start-up; any other value (-0 included) is boxed anew.
func BoxFloat64(f float64) any {
	if f >= 0 && f < smallIntegerLimit && f == float64(int(f)) && !(f == 0 && math.Signbit(f)) {
		return smallIntegers[int(f)]
	}
	return f
}

// smallInteger reads a number literal made only of decimal digits, without
// a leading zero, whose value is below smallIntegerLimit.
func smallInteger[T string | []byte](lit T) (int, bool) {
	if len(lit) == 0 || len(lit) > 4 || (lit[0] == '0' && len(lit) > 1) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n < smallIntegerLimit
}

func hexValue[T string | []byte](s T) (rune, bool) {
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

// appendLoneSurrogate appends an escaped lone surrogate: its three-byte
// WTF-8 form, or U+FFFD when the options say so.
func (p *jsonParser[T]) appendLoneSurrogate(b []byte, r rune) []byte {
	if p.opts.ReplaceLoneSurrogates {
		return append(b, "\uFFFD"...)
	}
	return appendWTF8(b, r)
}

// appendWTF8 appends a lone surrogate in its three-byte WTF-8 form.
func appendWTF8(b []byte, r rune) []byte {
	return append(b, 0xed, byte(0x80|(r>>6)&0x3f), byte(0x80|r&0x3f))
}

// interned reads the string at p.i when it is in the intern table, written
// without escapes; otherwise it leaves p.i alone.
func (p *jsonParser[T]) interned() (any, bool) {
	if p.opts.Intern == nil {
		return nil, false
	}
	// Only as far as the longest word: a long string is read once, by str.
	end := min(len(p.s), p.i+1+p.opts.Intern.maxLen+1)
	for j := p.i + 1; j < end; j++ {
		switch c := p.s[j]; {
		case c == '"':
			v, ok := p.opts.Intern.boxed[string(p.s[p.i+1:j])]
			if ok {
				p.i = j + 1
			}
			return v, ok
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

func (p *jsonParser[T]) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes, ASCII.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := string(p.s[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.i++
	}
	buf := []byte(string(p.s[start:p.i]))
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
			r, size := decodeRune(p.s[p.i:])
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
				if p.i+4 > len(p.s) {
					return "", p.fail("short \\u escape")
				}
				r, ok := hexValue(p.s[p.i : p.i+4])
				if !ok {
					return "", p.fail("invalid \\u escape")
				}
				p.i += 4
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
					buf = p.appendLoneSurrogate(buf, r)
				case r >= 0xdc00 && r < 0xe000:
					buf = p.appendLoneSurrogate(buf, r)
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

// decodeRune is utf8.DecodeRune for either input type.
func decodeRune[T string | []byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.RuneError, 1
}

func (p *jsonParser[T]) array(depth int) (any, error) {
	p.i++ // [
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return []any{}, nil
	}
	base := len(p.stack)
	for {
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		p.stack = append(p.stack, v)
		switch p.separator() {
		case ',':
			p.i++
		case ']':
			p.i++
			out := make([]any, len(p.stack)-base)
			copy(out, p.stack[base:])
			clear(p.stack[base:])
			p.stack = p.stack[:base]
			return out, nil
		default:
			return nil, p.badSeparator(']', "array")
		}
	}
}

// separator returns the byte that follows an element of an array or an
// object, past any space, without reading it; 0 at the end of the input.
// The container's loop switches on it; it stays small enough to be
// inlined, as it runs once per element.
func (p *jsonParser[T]) separator() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

// badSeparator is the error where neither a comma nor close follows an
// element of container. It is kept out of line: the loops that call it are
// the parser's hot path, and it runs once per bad input.
//
//go:noinline
func (p *jsonParser[T]) badSeparator(close byte, container string) error {
	if p.i >= len(p.s) {
		return p.fail("unterminated " + container)
	}
	return p.fail("expected , or " + string(close) + " in " + container)
}

// objectIndexAt is the member count past which an object being read finds
// repeated keys through a map rather than by scanning.
const objectIndexAt = 16

func (p *jsonParser[T]) object(depth int) (any, error) {
	start := p.i
	p.i++ // {
	out := Object{}
	var index map[string]int
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return p.finishObject(out, start)
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
		// A repeated key keeps its first position and its last value.
		at := -1
		if index != nil {
			if i, ok := index[key]; ok {
				at = i
			}
		} else {
			for i := range out {
				if out[i].Key == key {
					at = i
					break
				}
			}
		}
		if at >= 0 {
			out[at].Value = v
		} else {
			out = append(out, Member{Key: key, Value: v})
			if index != nil {
				index[key] = len(out) - 1
			} else if len(out) > objectIndexAt {
				index = make(map[string]int, len(out)*2)
				for i, m := range out {
					index[m.Key] = i
				}
			}
		}
		switch p.separator() {
		case ',':
			p.i++
		case '}':
			p.i++
			return p.finishObject(out, start)
		default:
			return nil, p.badSeparator('}', "object")
		}
	}
}

func (p *jsonParser[T]) finishObject(o Object, start int) (any, error) {
	if p.opts.BuildObject == nil {
		return o, nil
	}
	return p.opts.BuildObject(o, start)
}
