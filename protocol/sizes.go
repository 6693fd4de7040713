package protocol

import (
	"encoding/base64"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// Wire sizes.
//
// PayloadLimit and ConsoleCaptureLimit are measured in the bytes a part
// costs on the wire, not in characters or in the size of the value in
// memory: a string is charged its JSON form (quotes and escapes included,
// so a control character costs six bytes), and bytes are charged their
// base64 form. Measured that way a run at every bound at once still yields a
// result message far under the smallest message ceiling in the path
// (1 MiB): the result message carries each charged part once more inside a
// JSON string, which at most doubles it.

// LogLineWireSize is the bytes one captured line costs on the wire:
// {"level":"…","text":"…"} as JSON.stringify writes it, plus one byte for
// the comma that separates it from the next line. ConsoleCaptureLimit
// charges this, so an empty line costs 26 bytes.
func LogLineWireSize(l LogLine) int {
	// {"level": + , "text": + } + separator
	return len(`{"level":`) + jsvalue.StringSize(string(l.Level)) + len(`,"text":`) + jsvalue.StringSize(l.Text) + len(`}`) + 1
}

// RunAnswerWireSize is what the run's answer costs: the result's JSON text
// as a JSON string when the run produced a value, or the thrown message as
// a JSON string when it failed. PayloadLimit bounds it.
func RunAnswerWireSize(r *ExecuteResult) int {
	if r.HasError {
		return jsvalue.StringSize(r.Error)
	}
	if r.ResultJSON == "" {
		return 0
	}
	return jsvalue.StringSize(r.ResultJSON)
}

// ToolCallWireSize is what one tool call costs: the provider name, the tool
// name and the arguments' JSON text, each as a JSON string. PayloadLimit
// bounds it.
func ToolCallWireSize(provider, tool, argsJSON string) int {
	return jsvalue.StringSize(provider) + jsvalue.StringSize(tool) + jsvalue.StringSize(argsJSON)
}

// headersWireSize charges each header line its name and value as JSON
// strings.
func headersWireSize(hs []Header) int {
	n := 0
	for _, h := range hs {
		n += jsvalue.StringSize(h[0]) + jsvalue.StringSize(h[1])
	}
	return n
}

// OutboundRequestWireSize is what one outbound request costs: the URL and
// the headers as JSON strings, and the body as base64. PayloadLimit bounds
// it.
func OutboundRequestWireSize(req OutboundRequest) int {
	return jsvalue.StringSize(req.URL) + headersWireSize(req.Headers) + base64.StdEncoding.EncodedLen(len(req.Body))
}

// HandleAnswerWireSize is what one handle answer costs: the status text and
// the headers as JSON strings, and the body as base64. PayloadLimit bounds
// it.
func HandleAnswerWireSize(resp OutboundResponse) int {
	return jsvalue.StringSize(resp.StatusText) + headersWireSize(resp.Headers) + base64.StdEncoding.EncodedLen(len(resp.Body))
}
