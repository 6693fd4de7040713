package capnweb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAbortNeverEchoesInvalidUTF8: a malformed message holding invalid
// UTF-8 (a stray byte, a lone surrogate in WTF-8, a character cut at the
// quoting bound) is quoted back in the abort and the close reason as valid
// UTF-8, each bad sequence a U+FFFD.
func TestAbortNeverEchoesInvalidUTF8(t *testing.T) {
	cut := `["bogus","` + strings.Repeat("a", 189) + "é" // é straddles byte 200
	cases := map[string]struct{ frame, reason string }{
		"stray byte":     {`["bogus","` + "\xff" + `"]`, `bad RPC message: ["bogus","` + "\uFFFD" + `"]`},
		"lone surrogate": {`["bogus","` + "\xed\xa0\x80" + `"]`, `bad RPC message: ["bogus","` + "\uFFFD" + `"]`},
		"cut character":  {cut + `"]`, "bad RPC message: " + cut[:199] + "\uFFFD…"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRaw(t, Methods{})
			r.send(tc.frame)
			abort := r.next()
			want := `["abort",["error","Error","` + strings.ReplaceAll(tc.reason, `"`, `\"`) + `"]]`
			if abort != want || !utf8.ValidString(abort) {
				t.Fatalf("abort\n got: %q\nwant: %q", abort, want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := r.end.ReadMessage(ctx)
			var ce *CloseError
			if !errors.As(err, &ce) || ce.Reason != truncateReason(tc.reason) || !utf8.ValidString(ce.Reason) {
				t.Fatalf("close: %v", err)
			}
		})
	}
}
