package jsvalue

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s quoted as JSON.stringify quotes a string: no HTML
// escaping; U+2028, U+2029 and U+007F raw; control characters as \b \t \n
// \f \r or \u00xx (lowercase hex). Valid UTF-8 is written raw; the
// three-byte WTF-8 form of a lone UTF-16 surrogate (ED A0 80 to ED BF BF),
// which Parse gives one, is written as \udxxx, exactly as JSON.stringify
// writes a lone surrogate (a high and a low one in a row combine into their
// character); any other byte that is not UTF-8 becomes U+FFFD, the
// character a TextDecoder would have produced for it.
func AppendString(dst []byte, s string) []byte {
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
// s[i:], the form Parse gives a lone surrogate.
func surrogateAt(s string, i int) (rune, bool) {
	if i+2 >= len(s) || s[i] != 0xed || s[i+1] < 0xa0 || s[i+1] > 0xbf || s[i+2] < 0x80 || s[i+2] > 0xbf {
		return 0, false
	}
	return 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), true
}

// StringSize is the bytes s costs as a JSON string, len(AppendString(nil,
// s)), counted without writing it.
func StringSize(s string) int {
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
