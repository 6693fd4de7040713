package webplatform

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// decodeUTF8 is the UTF-8 decoder of the Encoding Standard: each maximal
// ill-formed subsequence becomes one U+FFFD (Go's own decoder would emit one
// per byte), or, with fatal, the first one fails the whole decode. With
// stream, an incomplete sequence at the end is left unconsumed; consumed
// says how many bytes were read.
func decodeUTF8(b []byte, fatal, stream bool) (out string, consumed int, ok bool) {
	if utf8.Valid(b) {
		return string(b), len(b), true
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	i := 0
	for i < len(b) {
		c := b[i]
		if c < 0x80 {
			sb.WriteByte(c)
			i++
			continue
		}
		need, lower, upper := utf8Lead(c)
		if need == 0 {
			if fatal {
				return "", 0, false
			}
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		j := i + 1
		complete := true
		for k := 0; k < need; k++ {
			if j >= len(b) {
				complete = false
				break
			}
			lo, hi := byte(0x80), byte(0xBF)
			if k == 0 {
				lo, hi = lower, upper
			}
			if b[j] < lo || b[j] > hi {
				break
			}
			j++
		}
		if j == i+1+need {
			sb.Write(b[i:j])
			i = j
			continue
		}
		if !complete && stream {
			// The sequence so far is valid and the input ends inside it: keep
			// it for the next chunk.
			return sb.String(), i, true
		}
		if fatal {
			return "", 0, false
		}
		sb.WriteRune(utf8.RuneError)
		i = j
	}
	return sb.String(), len(b), true
}

// utf8Leads are the lead bytes of the Encoding Standard's UTF-8 decoder: how
// many continuation bytes follow, and the range the first of them must lie in
// (the others lie in 0x80–0xBF); the narrow ones shut out overlong forms,
// surrogates and code points above U+10FFFF.
var utf8Leads = [...]struct {
	first, last, need, lower, upper byte
}{
	{0xC2, 0xDF, 1, 0x80, 0xBF},
	{0xE0, 0xE0, 2, 0xA0, 0xBF},
	{0xE1, 0xEC, 2, 0x80, 0xBF},
	{0xED, 0xED, 2, 0x80, 0x9F},
	{0xEE, 0xEF, 2, 0x80, 0xBF},
	{0xF0, 0xF0, 3, 0x90, 0xBF},
	{0xF1, 0xF3, 3, 0x80, 0xBF},
	{0xF4, 0xF4, 3, 0x80, 0x8F},
}

// utf8Lead looks c up in utf8Leads; need is 0 where c starts no sequence.
func utf8Lead(c byte) (need int, lower, upper byte) {
	for _, l := range utf8Leads {
		if c >= l.first && c <= l.last {
			return int(l.need), l.lower, l.upper
		}
	}
	return 0, 0, 0
}

// encodeUTF8Into writes as many whole code points of s as fit in dst and
// returns the UTF-16 code units read and the bytes written, as
// TextEncoder.encodeInto reports them.
func encodeUTF8Into(s string, dst []byte) (read, written int) {
	for _, r := range s {
		n := utf8.RuneLen(r)
		if n < 0 {
			r, n = utf8.RuneError, 3
		}
		if written+n > len(dst) {
			break
		}
		utf8.EncodeRune(dst[written:], r)
		written += n
		if r > 0xFFFF {
			read += 2
		} else {
			read++
		}
	}
	return read, written
}

// latin1Bytes is the byte string of a JS string whose code units are all at
// most 0xFF (the caller checked), given its UTF-8 form.
func latin1Bytes(s string) []byte {
	out := make([]byte, 0, len(s))
	for _, r := range s {
		out = append(out, byte(r))
	}
	return out
}

// latin1String is the JS string whose code units are the bytes of b.
func latin1String(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b) * 2)
	for _, c := range b {
		sb.WriteRune(rune(c))
	}
	return sb.String()
}

// forgivingBase64Decode is atob's decoder (the forgiving-base64 decode of
// the Infra Standard). ok is false where atob throws InvalidCharacterError.
func forgivingBase64Decode(s string) ([]byte, bool) {
	clean := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\t', '\n', '\f', '\r', ' ':
		default:
			clean = append(clean, c)
		}
	}
	if len(clean)%4 == 0 {
		switch {
		case len(clean) >= 2 && clean[len(clean)-1] == '=' && clean[len(clean)-2] == '=':
			clean = clean[:len(clean)-2]
		case len(clean) >= 1 && clean[len(clean)-1] == '=':
			clean = clean[:len(clean)-1]
		}
	}
	if len(clean)%4 == 1 {
		return nil, false
	}
	for _, c := range clean {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			return nil, false
		}
	}
	// Go's strict decoder rejects non-zero padding bits; the standard
	// discards them, so clear them first.
	if r := len(clean) % 4; r != 0 {
		last := strings.IndexByte(b64Alphabet, clean[len(clean)-1])
		if r == 2 {
			last &^= 0x0F
		} else {
			last &^= 0x03
		}
		clean[len(clean)-1] = b64Alphabet[last]
	}
	out, err := base64.RawStdEncoding.DecodeString(string(clean))
	if err != nil {
		return nil, false
	}
	return out, true
}

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// Form encoding (application/x-www-form-urlencoded) of the URL Standard.

// parseForm splits s into name/value pairs, '+' read as space and
// percent-escapes decoded as UTF-8 (without BOM, with replacement).
func parseForm(s string) [][2]string {
	var out [][2]string
	for _, seq := range strings.Split(s, "&") {
		if seq == "" {
			continue
		}
		name, value, _ := strings.Cut(seq, "=")
		out = append(out, [2]string{formDecode(name), formDecode(value)})
	}
	return out
}

func formDecode(s string) string {
	b := percentDecode(strings.ReplaceAll(s, "+", " "))
	str, _, _ := decodeUTF8(b, false, false)
	return str
}

// formEncode is the urlencoded byte serializer: alphanumerics and *-._ stay,
// space becomes '+', everything else is percent-encoded as UTF-8.
func formEncode(sb *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '*' || c == '-' || c == '.' || c == '_':
			sb.WriteByte(c)
		case c == ' ':
			sb.WriteByte('+')
		default:
			sb.WriteByte('%')
			sb.WriteByte(upperHex[c>>4])
			sb.WriteByte(upperHex[c&15])
		}
	}
}

func serializeForm(pairs [][2]string) string {
	var sb strings.Builder
	for i, p := range pairs {
		if i > 0 {
			sb.WriteByte('&')
		}
		formEncode(&sb, p[0])
		sb.WriteByte('=')
		formEncode(&sb, p[1])
	}
	return sb.String()
}

// windows1252High maps bytes 0x80 to 0x9F of windows-1252 (the Encoding
// Standard's decoder for "latin1", "ascii" and their other labels); every
// other byte is its own code point.
var windows1252High = [32]rune{
	0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x008D, 0x017D, 0x008F,
	0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178,
}

func decodeWindows1252(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range b {
		if c >= 0x80 && c <= 0x9F {
			sb.WriteRune(windows1252High[c-0x80])
		} else {
			sb.WriteRune(rune(c))
		}
	}
	return sb.String()
}

// decodeUTF16LE decodes little-endian UTF-16 as the Encoding Standard does:
// an unpaired surrogate (or, at the end, an odd byte) is one U+FFFD, or
// fails the decode with fatal. With stream, an odd byte or a high surrogate
// at the end is left unconsumed.
func decodeUTF16LE(b []byte, fatal, stream bool) (out string, consumed int, ok bool) {
	var sb strings.Builder
	sb.Grow(len(b))
	i := 0
	for i+1 < len(b) {
		u := rune(b[i]) | rune(b[i+1])<<8
		switch {
		case u >= 0xD800 && u <= 0xDBFF:
			if i+3 >= len(b) {
				if stream {
					return sb.String(), i, true
				}
				if fatal {
					return "", 0, false
				}
				sb.WriteRune(utf8.RuneError)
				i += 2
				continue
			}
			lo := rune(b[i+2]) | rune(b[i+3])<<8
			if lo >= 0xDC00 && lo <= 0xDFFF {
				sb.WriteRune(0x10000 + (u-0xD800)<<10 + (lo - 0xDC00))
				i += 4
				continue
			}
			if fatal {
				return "", 0, false
			}
			sb.WriteRune(utf8.RuneError)
			i += 2
		case u >= 0xDC00 && u <= 0xDFFF:
			if fatal {
				return "", 0, false
			}
			sb.WriteRune(utf8.RuneError)
			i += 2
		default:
			sb.WriteRune(u)
			i += 2
		}
	}
	if i < len(b) {
		if stream {
			return sb.String(), i, true
		}
		if fatal {
			return "", 0, false
		}
		sb.WriteRune(utf8.RuneError)
		i++
	}
	return sb.String(), i, true
}
