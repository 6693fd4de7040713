package capnweb

import (
	"github.com/supolka/codemode-gateway/protocol"
)

// Messages are read by the module's one strict JSON reader
// (protocol.ParseJSON), with the choices the wire needs: numbers stay
// json.Number until evaluated (ids and property paths are read from their
// text), lone surrogate escapes become U+FFFD (a Go string holds UTF-8),
// and objects come back as protocol.Object, members in text order.
// The wire's keywords are interned: a message's type and expression tags
// are then read without allocating a string each.
var messageJSON = protocol.JSONOptions{RawNumbers: true, ReplaceLoneSurrogates: true, Intern: wireWords}

var wireWords = protocol.NewInternTable(
	"push", "pull", "resolve", "reject", "release", "abort", "stream", "pipe",
	"import", "pipeline", "export", "promise", "remap", "writable",
	"undefined", "nan", "inf", "-inf", "bigint", "date", "bytes", "error",
	"Error", "TypeError", "RangeError", "message", "stack", "code",
)

// parseJSON parses one JSON text; nesting beyond maxDepth is an error that
// matches protocol.ErrJSONTooDeep.
func parseJSON(data []byte, maxDepth int) (any, error) {
	return parseJSONScratch(data, maxDepth, nil)
}

// parseJSONScratch is parseJSON reusing *scratch (when not nil) as the
// reader's array scratch; see protocol.ParseJSONScratch.
func parseJSONScratch(data []byte, maxDepth int, scratch *[]any) (any, error) {
	opts := messageJSON
	opts.MaxDepth = maxDepth
	if scratch == nil {
		return protocol.ParseJSON(data, opts)
	}
	return protocol.ParseJSONScratch(data, opts, scratch)
}
