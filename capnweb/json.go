package capnweb

import "github.com/supolka/codemode-gateway/jsvalue"

// Messages are read by the module's one strict JSON reader (jsvalue.Parse),
// with the choices the wire needs: numbers stay json.Number until evaluated
// (ids and property paths are read from their text), lone surrogate escapes
// become U+FFFD (a Go string holds UTF-8), and objects come back as
// jsvalue.Object, members in text order. The wire's keywords are interned:
// a message's type and expression tags are then read without allocating a
// string each.
var messageJSON = jsvalue.ParseOptions{RawNumbers: true, ReplaceLoneSurrogates: true, Intern: wireWords}

var wireWords = jsvalue.NewInternTable(
	"push", "pull", "resolve", "reject", "release", "abort", "stream", "pipe",
	"import", "pipeline", "export", "promise", "remap", "writable",
	"undefined", "nan", "inf", "-inf", "bigint", "date", "bytes", "error",
	"Error", "TypeError", "RangeError", "message", "stack", "code",
)

// parseJSONScratch parses one JSON text reusing *scratch (when not nil) as
// the reader's array scratch (see jsvalue.ParseScratch); nesting beyond
// maxDepth is an error that matches jsvalue.ErrTooDeep.
func parseJSONScratch(data []byte, maxDepth int, scratch *[]any) (any, error) {
	opts := messageJSON
	opts.MaxDepth = maxDepth
	return jsvalue.ParseScratch(data, opts, scratch)
}
