package sandbox

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// encodeBase64 is encodeBase64Bytes(buffer, offset, length).
func (s *session) encodeBase64(call goja.FunctionCall) goja.Value {
	ab, ok := call.Argument(0).Export().(goja.ArrayBuffer)
	if !ok {
		panic(s.vm.NewTypeError("expected an ArrayBuffer"))
	}
	b := ab.Bytes()
	off, n := call.Argument(1).ToInteger(), call.Argument(2).ToInteger()
	if off < 0 || n < 0 || off > int64(len(b)) || n > int64(len(b))-off {
		panic(s.vm.NewTypeError("byte range outside the buffer"))
	}
	return s.vm.ToValue(base64.StdEncoding.EncodeToString(b[off : off+n]))
}

// decodeBase64 is decodeBase64Buffer(text): an ArrayBuffer of the bytes of
// standard base64 text, padding optional, as the Go codec reads it.
func (s *session) decodeBase64(call goja.FunctionCall) goja.Value {
	text := call.Argument(0).String()
	body := text
	if len(body)%4 == 0 && len(body) > 0 {
		switch {
		case len(body) >= 2 && body[len(body)-2:] == "==":
			body = body[:len(body)-2]
		case body[len(body)-1] == '=':
			body = body[:len(body)-1]
		}
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			panic(s.vm.NewTypeError("invalid base64"))
		}
	}
	if len(body)%4 == 1 {
		panic(s.vm.NewTypeError("invalid base64"))
	}
	// Unused low bits of the last character are ignored, as atob does.
	b, err := base64.RawStdEncoding.DecodeString(body)
	if err != nil {
		panic(s.vm.NewTypeError("invalid base64"))
	}
	return s.vm.ToValue(s.vm.NewArrayBuffer(b))
}

// parseDispatchText is the reader behind __parseForDispatch: the Go codec's
// ParseForDispatchOrdered, its value rebuilt in the runtime.
func (s *session) parseDispatchText(call goja.FunctionCall) goja.Value {
	v, err := protocol.ParseForDispatchOrdered(call.Argument(0).String())
	if err != nil {
		var be *protocol.BinaryEnvelopeError
		if errors.As(err, &be) {
			panic(s.vm.NewTypeError("invalid base64"))
		}
		panic(s.syntaxErrorValue(err.Error()))
	}
	return s.toJS(v)
}

func (s *session) syntaxErrorValue(text string) goja.Value {
	v, err := s.vm.New(s.vm.Get("SyntaxError"), s.vm.ToValue(text))
	if err != nil {
		return s.newError(text)
	}
	return v
}

// toJS builds the runtime value of a decoded dispatch value. Members are
// defined, never assigned, so a "__proto__" key stays an own property as
// JSON.parse makes it.
func (s *session) toJS(v any) goja.Value {
	switch v := v.(type) {
	case nil:
		return goja.Null()
	case bool:
		return s.vm.ToValue(v)
	case float64:
		return s.vm.ToValue(v)
	case string:
		return s.jsString(v)
	case []byte:
		u8, err := s.bytesOf(goja.Undefined(), s.vm.ToValue(s.vm.NewArrayBuffer(v)))
		if err != nil {
			panic(err)
		}
		return u8
	case []any:
		items := make([]any, len(v))
		for i, x := range v {
			items[i] = s.toJS(x)
		}
		return s.vm.NewArray(items...)
	case jsvalue.Object:
		o := s.vm.NewObject()
		for _, m := range v {
			_ = o.DefineDataProperty(m.Key, s.toJS(m.Value), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		}
		return o
	}
	return goja.Undefined()
}

// jsString converts a Go string to a JavaScript one, reading the three-byte
// WTF-8 form of a lone surrogate (what the Go codec makes of an escaped one)
// back into that surrogate.
func (s *session) jsString(str string) goja.Value {
	if strings.IndexByte(str, 0xED) < 0 {
		return s.vm.ToValue(str)
	}
	units := make([]uint16, 0, len(str))
	for i := 0; i < len(str); {
		if str[i] == 0xED && i+2 < len(str) && str[i+1] >= 0xA0 && str[i+1] <= 0xBF && str[i+2]&0xC0 == 0x80 {
			units = append(units, 0xD000|uint16(str[i+1]&0x3F)<<6|uint16(str[i+2]&0x3F))
			i += 3
			continue
		}
		r, size := utf8.DecodeRuneInString(str[i:])
		units = utf16.AppendRune(units, r)
		i += size
	}
	return s.vm.ToValue(goja.StringFromUTF16(units))
}
