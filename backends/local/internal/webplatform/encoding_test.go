package webplatform

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTextEncoding(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"encode", `return [...new TextEncoder().encode('aé€😀')]`, `[97,195,169,226,130,172,240,159,152,128]`},
		{"encode lone surrogate as U+FFFD", `return [...new TextEncoder().encode('\ud800x')]`, `[239,191,189,120]`},
		{"encode default and encoding", `const e = new TextEncoder(); return [e.encode().length, e.encoding, e.encode() instanceof Uint8Array]`, `[0,"utf-8",true]`},
		{"encodeInto stops at a whole code point", `const d = new Uint8Array(5); const r = new TextEncoder().encodeInto('a😀b', d); return [r.read, r.written, [...d]]`,
			`[3,5,[97,240,159,152,128]]`},
		{"encodeInto partial", `const d = new Uint8Array(4); const r = new TextEncoder().encodeInto('a😀', d); return [r.read, r.written]`, `[1,1]`},
		{"decode", `return new TextDecoder().decode(new Uint8Array([104, 105, 0xE2, 0x82, 0xAC]))`, `"hi€"`},
		{"decode views and buffers", `const b = new Uint8Array([0, 65, 66, 67, 0]); return [new TextDecoder().decode(b.subarray(1, 4)), new TextDecoder().decode(new DataView(b.buffer, 1, 2)), new TextDecoder().decode(b.buffer.slice(1, 2))]`,
			`["ABC","AB","A"]`},
		{"replacement per maximal subpart", `return [...new TextDecoder().decode(new Uint8Array([0xE2, 0x82, 0x41, 0xF0, 0x80, 0xFF]))].map(c => c.codePointAt(0))`,
			`[65533,65,65533,65533,65533]`},
		{"truncated at end gives one replacement", `return new TextDecoder().decode(new Uint8Array([0x41, 0xF0, 0x9F, 0x98])).length`, `2`},
		{"fatal throws TypeError", `new TextDecoder('utf-8', {fatal: true}).decode(new Uint8Array([0xC0, 0x80]))`,
			rejected("TypeError", "Failed to execute 'decode' on 'TextDecoder': The encoded data was not valid utf-8.")},
		{"BOM stripped unless ignoreBOM", `const b = new Uint8Array([0xEF, 0xBB, 0xBF, 0x41]); return [new TextDecoder().decode(b), new TextDecoder('utf-8', {ignoreBOM: true}).decode(b).length]`,
			`["A",2]`},
		{"streaming keeps incomplete sequences", `const d = new TextDecoder(); return d.decode(new Uint8Array([0xE2, 0x82]), {stream: true}) + '|' + d.decode(new Uint8Array([0xAC]))`, `"|€"`},
		{"streaming strips the BOM once", `const d = new TextDecoder(); return [d.decode(new Uint8Array([0xEF, 0xBB]), {stream: true}), d.decode(new Uint8Array([0xBF, 0xEF, 0xBB, 0xBF]), {stream: true}).length]`, `["",1]`},
		{"labels", `return [new TextDecoder(' UTF8 ').encoding, new TextDecoder('unicode-1-1-utf-8').encoding]`, `["utf-8","utf-8"]`},
		{"unsupported label is a RangeError", `try { new TextDecoder('shift_jis') } catch (e) { return e instanceof RangeError }`, `true`},
		{"windows-1252 and its labels", `const b = new Uint8Array([0x41, 0x80, 0x9f, 0xe9, 0x81]);
			return [new TextDecoder('latin1').encoding, new TextDecoder('ASCII').encoding, [...new TextDecoder('iso-8859-1').decode(b)].map(c => c.codePointAt(0))]`,
			`["windows-1252","windows-1252",[65,8364,376,233,129]]`},
		{"utf-16le with BOM, pairs and lone surrogates", `const s = new TextDecoder('utf-16le').decode(new Uint8Array([0xff, 0xfe, 0x41, 0, 0x3d, 0xd8, 0x00, 0xde, 0x00, 0xdc, 0x42]));
			return [new TextDecoder('utf-16').encoding, [...s].map(c => c.codePointAt(0))]`, `["utf-16le",[65,128512,65533,65533]]`},
		{"utf-16le streaming", `const d = new TextDecoder('utf-16'); return [d.decode(new Uint8Array([0x41, 0, 0x3d]), {stream: true}), d.decode(new Uint8Array([0xd8, 0x00, 0xde]))]`, `["A","😀"]`},
		{"utf-16le fatal", `new TextDecoder('utf-16le', {fatal: true}).decode(new Uint8Array([0x00, 0xdc]))`,
			rejected("TypeError", "Failed to execute 'decode' on 'TextDecoder': The encoded data was not valid utf-16le.")},
		{"btoa and atob", `return [btoa('hello'), atob('aGVsbG8='), atob(' aGVs bG8 '), atob('aGVsbG8'), btoa('\xff\xfe'), atob('//4=').charCodeAt(0)]`,
			`["aGVsbG8=","hello","hello","hello","//4=",255]`},
		{"btoa outside Latin1", `btoa('€')`, rejected("InvalidCharacterError", "Failed to execute 'btoa': The string to be encoded contains characters outside of the Latin1 range.")},
		{"atob bad length", `atob('abcde')`, rejected("InvalidCharacterError", "Failed to execute 'atob': The string to be decoded is not correctly encoded.")},
		{"atob bad character", `atob('ab-c')`, rejected("InvalidCharacterError", "Failed to execute 'atob': The string to be decoded is not correctly encoded.")},
		{"atob bad padding", `const bad = []; for (const s of ['ab=c', 'a===', 'ab===', '=abc', 'abc==']) { try { atob(s) } catch (e) { bad.push(e.code) } } return bad`, `[5,5,5,5,5]`},
		{"atob keeps padding bits lenient", `return atob('YR==') === 'a' && atob('YS') === 'a'`, `true`},
		{"atob needs an argument", `atob()`, rejected("TypeError", "Failed to execute 'atob': 1 argument required, but only 0 present.")},
		{"atob stringifies its argument", `let u; try { atob(undefined) } catch (e) { u = e.name } return [[...atob(null)].map(c => c.charCodeAt(0)), u]`, `[[158,233,101],"InvalidCharacterError"]`},
	})
}

func FuzzAtob(f *testing.F) {
	for _, s := range []string{"", "aGVsbG8=", "aGVsbG8", " a G V s ", "ab==", "abc=", "a", "a===", "YR==", "====", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, ok := forgivingBase64Decode(s)
		if !ok {
			return
		}
		// What decodes re-encodes to the same bits: encoding b and
		// decoding again gives b.
		again, ok := forgivingBase64Decode(base64.StdEncoding.EncodeToString(b))
		if !ok || !bytes.Equal(again, b) {
			t.Fatalf("round trip of %q: %x then %x", s, b, again)
		}
		if back := latin1Bytes(latin1String(b)); !bytes.Equal(back, b) {
			t.Fatalf("latin1 round trip lost bytes")
		}
	})
}

func FuzzDecodeUTF8(f *testing.F) {
	for _, s := range []string{"", "abc", "\xE2\x82", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xC0\x80", "\xED\xA0\x80", "\xFF"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, stream bool) {
		out, n, ok := decodeUTF8(b, false, stream)
		if !ok || !utf8.ValidString(out) || n > len(b) || (!stream && n != len(b)) || (stream && len(b)-n > 3) {
			t.Fatalf("decode(%x, stream=%v) = %q, %d, %v", b, stream, out, n, ok)
		}
		if utf8.Valid(b) && out != string(b) {
			t.Fatalf("valid input changed")
		}
		if _, _, fok := decodeUTF8(b, true, false); fok != utf8.Valid(b) {
			t.Fatalf("fatal decode of %x: ok=%v", b, fok)
		}
	})
}

func FuzzDecodeUTF16LE(f *testing.F) {
	for _, s := range []string{"", "A\x00", "\x3d\xd8\x00\xde", "\x00\xdc", "\x3d\xd8", "\x41"} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, stream bool) {
		out, n, ok := decodeUTF16LE(b, false, stream)
		if !ok || !utf8.ValidString(out) || n > len(b) || (!stream && n != len(b)) || (stream && len(b)-n > 3) {
			t.Fatalf("decode(%x, stream=%v) = %q, %d, %v", b, stream, out, n, ok)
		}
		if _, _, fok := decodeUTF16LE(b, true, false); fok && strings.ContainsRune(out, utf8.RuneError) && !bytes.Contains(b, []byte{0xfd, 0xff}) {
			t.Fatalf("fatal decode of %x passed, yet the lenient one replaced something", b)
		}
	})
}
