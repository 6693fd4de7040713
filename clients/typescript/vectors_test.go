// Package tsclient holds the Go side of the TypeScript client's tests: the
// shared vectors it writes from the protocol package, and the run of the
// package's own tests against the real gateway binary.
package tsclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

var update = flag.Bool("update", false, "rewrite test/vectors/protocol.json from the protocol package")

const vectorsPath = "test/vectors/protocol.json"

// failureVector is one declared failure: the TypeScript class, its
// constructor arguments, and the text Go composes for them.
type failureVector struct {
	Class string `json:"class"`
	Args  []any  `json:"args"`
	Text  string `json:"text"`
	Code  string `json:"code,omitempty"`
}

// rehydrateVector is one thrown error as it crosses the wire and what Go's
// Rehydrate makes of it: the class ("passthrough" for an error that keeps
// its own shape) and the fields of the typed failure.
type rehydrateVector struct {
	Message string         `json:"message"`
	Code    string         `json:"code,omitempty"`
	Props   map[string]any `json:"props,omitempty"`
	Class   string         `json:"class"`
	Fields  map[string]any `json:"fields,omitempty"`
}

type matchVector struct {
	Text    string `json:"text"`
	Timeout bool   `json:"timeout"`
	Memory  bool   `json:"memory"`
}

type envelopeVector struct {
	Name     string `json:"name"`
	Value    string `json:"value,omitempty"` // dispatch JSON of the tool's value
	Error    string `json:"error,omitempty"` // or the text it threw
	Envelope string `json:"envelope"`
}

type argsVector struct {
	ArgsJSON string `json:"argsJson"`
	List     string `json:"list"` // the argument list, written again
}

type vectors struct {
	Note       string            `json:"note"`
	Constants  map[string]any    `json:"constants"`
	FaultCodes []protocol.Code   `json:"faultCodes"`
	Failures   []failureVector   `json:"failures"`
	Rehydrate  []rehydrateVector `json:"rehydrate"`
	Matches    []matchVector     `json:"matches"`
	Envelopes  []envelopeVector  `json:"envelopes"`
	Args       []argsVector      `json:"args"`
}

func fv(class string, err error, args ...any) failureVector {
	v := failureVector{Class: class, Args: args, Text: err.Error()}
	if args == nil {
		v.Args = []any{}
	}
	if c := protocol.CodeOf(err); c != "" {
		v.Code = string(c)
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func failureVectors() []failureVector {
	part := func(p protocol.PayloadPart, size, limit int) failureVector {
		return fv("PayloadTooLargeError", protocol.NewPayloadTooLargeError(p, size, limit), string(p), size, limit)
	}
	return []failureVector{
		fv("ExecutionTimeoutError", protocol.NewExecutionTimeoutError(250), 250),
		fv("ExecutionTimeoutError", protocol.NewExecutionTimeoutError(protocol.MaxSupportedTimeout), protocol.MaxSupportedTimeout),
		fv("MemoryLimitError", protocol.NewMemoryLimitError(128), 128),
		fv("OutboundDisabledError", protocol.NewOutboundDisabledError()),
		fv("ModuleNotFoundError", protocol.NewModuleNotFoundError("missing", []string{"greeter", "Zeta", "alpha"}), "missing", []string{"greeter", "Zeta", "alpha"}),
		fv("ModuleNotFoundError", protocol.NewModuleNotFoundError("x", nil), "x", []string{}),
		fv("ModuleKeyCollisionError", protocol.NewModuleKeyCollisionError("greeter", []string{"greeter", "./greeter"}), "greeter", []string{"greeter", "./greeter"}),
		fv("ModuleKeyCollisionError", protocol.NewModuleKeyCollisionError("g", []string{"c", "a", "b"}), "g", []string{"c", "a", "b"}),
		fv("ModuleKeyCollisionError", protocol.NewModuleKeyCollisionError("g", []string{"g", "g"}), "g", []string{"g", "g"}),
		fv("UnsupportedModuleKindError", protocol.NewUnsupportedModuleKindError("m", "wasm"), "m", "wasm"),
		part(protocol.PartRunAnswer, 131073, protocol.PayloadLimit),
		part(protocol.PartToolCall, 200000, protocol.PayloadLimit),
		part(protocol.PartOutboundRequest, 1, 0),
		part(protocol.PartHandleAnswer, 140000, protocol.PayloadLimit),
		fv("CompressionAbsentError", protocol.NewCompressionAbsentError("DecompressionStream"), "DecompressionStream"),
		fv("BufferGrowthAbsentError", protocol.NewBufferGrowthAbsentError("SharedArrayBuffer.prototype.grow"), "SharedArrayBuffer.prototype.grow"),
		fv("CacheStorageAbsentError", protocol.NewCacheStorageAbsentError()),
		fv("HandleNotFoundError", protocol.NewHandleNotFoundError("x1.abc", "other", []string{"fetch", "alarm"}), "x1.abc", "other", []string{"fetch", "alarm"}),
		fv("HandleNotFoundError", protocol.NewHandleNotFoundError("x1.abc", "fetch", nil), "x1.abc", "fetch", []string{}),
		fv("ToolNotFoundError", protocol.NewToolNotFoundError("deleteOrders"), "deleteOrders"),
		fv("InvalidProviderNameError", protocol.NewInvalidProviderNameError("1st"), "1st"),
		fv("KeywordProviderNameError", protocol.NewKeywordProviderNameError("class"), "class"),
		fv("ReservedProviderNameError", protocol.NewReservedProviderNameError("__dispatch"), "__dispatch", protocol.ReservedNameReason("__dispatch")),
		fv("ReservedProviderNameError", protocol.NewReservedProviderNameError("Promise"), "Promise", protocol.ReservedNameReason("Promise")),
		fv("DuplicateProviderNameError", protocol.NewDuplicateProviderNameError("store"), "store"),
		fv("InvalidTimeoutError", protocol.NewInvalidTimeoutError(-1.5), -1.5),
		fv("InvalidTimeoutError", protocol.NewInvalidTimeoutError(0), 0),
		fv("InvalidTimeoutError", protocol.NewInvalidTimeoutError(1e21), 1e21),
		fv("HandlesClosedError", protocol.NewHandlesClosedError(`x1."quoted"`), `x1."quoted"`),
		fv("QueueOverflowError", protocol.NewQueueOverflowError(64, 250*time.Millisecond), 64, 250),
		fv("QueueOverflowError", protocol.NewQueueOverflowError(1, 0), 1, 0),
		fv("QueueTimeoutError", protocol.NewQueueTimeoutError(10*time.Second, 1500*time.Microsecond), 10000, ms(1500*time.Microsecond)),
		fv("TenantLimitError", protocol.NewTenantLimitError("demo", "8 executions in flight", 120*time.Millisecond), "demo", "8 executions in flight", 120),
		fv("ResponseTooLargeError", protocol.NewResponseTooLargeError(2000000, 1048576), 2000000, 1048576),
		fv("SourceTooLargeError", protocol.NewSourceTooLargeError(`module "a"`, 300000, 262144), `module "a"`, 300000, 262144),
		fv("SourceNestingError", protocol.NewSourceNestingError("program", 1000, 3), "program", 1000, 3),
		fv("HostCallBacklogError", protocol.NewHostCallBacklogError(4352), 4352),
		fv("HostAnswerTooLargeError", protocol.NewHostAnswerTooLargeError()),
		fv("NotAResponseError", protocol.NewNotAResponseError()),
		fv("NetworkErrorResponseError", protocol.NewNetworkErrorResponseError()),
		fv("DeliveryTooLargeError", protocol.NewDeliveryTooLargeError(protocol.DeliveryExecution, 70000000, 67108864), string(protocol.DeliveryExecution), 70000000, 67108864),
		fv("DeliveryTooLargeError", protocol.NewDeliveryTooLargeError(protocol.DeliveryHandleRequest, 70000000, 67108864), string(protocol.DeliveryHandleRequest), 70000000, 67108864),
		fv("DrainingError", protocol.NewDrainingError()),
		fv("ExecutorDrainingError", protocol.NewExecutorDrainingError()),
		fv("NoExecutorError", protocol.NewNoExecutorError()),
		fv("HandlesUnreachableError", protocol.NewHandlesUnreachableError()),
	}
}

// rehydrateVectors runs protocol.Rehydrate on each thrown error and
// records what it rebuilt.
func rehydrateVectors(t *testing.T) []rehydrateVector {
	type in struct {
		message string
		code    protocol.Code
		props   map[string]any
	}
	text := func(err error) string { return err.Error() }
	inputs := []in{
		{text(protocol.NewHandlesClosedError("x1.abc")), protocol.CodeHandlesClosed, nil},
		{text(protocol.NewHandlesClosedError("x1.abc")) + " ", protocol.CodeHandlesClosed, nil},
		{text(protocol.NewQueueOverflowError(64, 250*time.Millisecond)), protocol.CodeQueueOverflow, map[string]any{"retryAfterMs": 250.0}},
		{text(protocol.NewQueueTimeoutError(10*time.Second, 40*time.Millisecond)), protocol.CodeQueueOverflow, map[string]any{"retryAfterMs": 40.0}},
		{text(protocol.NewTenantLimitError("demo", "20 executions per second", 50*time.Millisecond)), protocol.CodeQueueOverflow, map[string]any{"retryAfterMs": 50.0}},
		{"The executor's queue is full at its bound of 064 waiting executions, so this one was turned away before it ran. Try it again in 5 ms.", protocol.CodeQueueOverflow, nil},
		{"The executor's queue is full at its bound of 64 waiting executions, so this one was turned away before it ran. Try it again in 0 ms.", protocol.CodeQueueOverflow, nil},
		{text(protocol.NewResponseTooLargeError(2000000, 1048576)), protocol.CodeResponseTooLarge, nil},
		{"The response is big, past the server's response limit of 1 bytes, so it was not delivered. Return less in one result or response, and fetch the rest in another call.", protocol.CodeResponseTooLarge, nil},
		{text(protocol.NewDrainingError()), protocol.CodeQueueOverflow, nil},
		{text(protocol.NewExecutorDrainingError()), protocol.CodeQueueOverflow, nil},
		{text(protocol.NewNoExecutorError()), protocol.CodeQueueOverflow, nil},
		{text(protocol.NewNoExecutorError()) + " ", protocol.CodeQueueOverflow, nil},
		{text(protocol.NewHandlesUnreachableError()), protocol.CodeQueueOverflow, nil},
		{text(protocol.NewHandlesUnreachableError()), protocol.CodeConnectionRejected, nil},
		{"the worker process exited", protocol.CodeWorkerCrashed, map[string]any{"exitCode": 2.0}},
		{"The executor at ws://x speaks protocol 2, and this client speaks 1.", protocol.CodeProtocolMismatch, nil},
		{"boom", protocol.CodeInternal, nil},
		{"No such customer.", "", nil},
		{"a code from elsewhere", "E_CUSTOM", map[string]any{"detail": "kept"}},
	}
	// Near misses of every text a class composes, so the two parsers are
	// compared beyond the exact texts: a character dropped, doubled or
	// swapped for a digit or a space, at positions a seeded source picks.
	rng := rand.New(rand.NewPCG(16, 16))
	for _, exact := range inputs[:5] {
		for range 24 {
			m := []byte(exact.message)
			i := rng.IntN(len(m))
			switch rng.IntN(3) {
			case 0:
				m = append(m[:i:i], m[i+1:]...)
			case 1:
				m = append(m[:i+1:i+1], m[i:]...)
			default:
				m[i] = "0123456789 "[rng.IntN(11)]
			}
			inputs = append(inputs, in{string(m), exact.code, exact.props})
		}
	}
	out := make([]rehydrateVector, 0, len(inputs))
	for _, i := range inputs {
		v := rehydrateVector{Message: i.message, Code: string(i.code), Props: i.props}
		err := protocol.Rehydrate(i.message, i.code, i.props)
		if err.Error() != i.message {
			t.Fatalf("Rehydrate changed the message %q to %q", i.message, err.Error())
		}
		var f *protocol.Fault
		if !errors.As(err, &f) {
			v.Class = "passthrough"
			out = append(out, v)
			continue
		}
		v.Class = "ExecutorFault"
		switch e := f.Err.(type) {
		case *protocol.HandlesClosedError:
			v.Class, v.Fields = "HandlesClosedError", map[string]any{"executionId": e.ExecutionID}
		case *protocol.QueueOverflowError:
			v.Class, v.Fields = "QueueOverflowError", map[string]any{"bound": e.Bound, "retryAfterMs": ms(e.RetryAfter)}
		case *protocol.QueueTimeoutError:
			v.Class, v.Fields = "QueueTimeoutError", map[string]any{"waitedMs": ms(e.Waited), "retryAfterMs": ms(e.RetryAfter)}
		case *protocol.TenantLimitError:
			v.Class, v.Fields = "TenantLimitError", map[string]any{"tenant": e.Tenant, "limit": e.Limit, "retryAfterMs": ms(e.RetryAfter)}
		case *protocol.ResponseTooLargeError:
			v.Class, v.Fields = "ResponseTooLargeError", map[string]any{"size": e.Size, "limit": e.Limit}
		case *protocol.DrainingError:
			v.Class = "DrainingError"
		case *protocol.ExecutorDrainingError:
			v.Class = "ExecutorDrainingError"
		case *protocol.NoExecutorError:
			v.Class = "NoExecutorError"
		case *protocol.HandlesUnreachableError:
			v.Class = "HandlesUnreachableError"
		case nil:
		default:
			t.Fatalf("Rehydrate rebuilt a %T the vectors do not know", e)
		}
		out = append(out, v)
	}
	return out
}

func matchVectors() []matchVector {
	texts := []string{
		protocol.NewExecutionTimeoutError(250).Error(),
		"Execution timed out at its 250 ms bound.",
		"Execution timed out at its 250 ms bound.\nmore",
		"Execution timed out at its 250 ms bound.more",
		"Execution timed out",
		"Execution timed out at its 0250 ms bound.",
		"Execution timed out at its 0 ms bound.",
		"Execution timed out at its -1 ms bound.",
		"Execution timed out at its  ms bound.",
		" Execution timed out at its 250 ms bound.",
		protocol.NewMemoryLimitError(128).Error(),
		"Execution ran out of memory at its 128 MB limit.\tthen",
		"Execution ran out of memory",
		"Execution timed out at its 250 ms bound.\u00a0then",
		"Execution timed out at its 250 ms bound.\u2028then",
		"Execution timed out at its 250 ms bound.\vthen",
		"Execution timed out at its 250 ms bound.\fthen",
		"Execution timed out at its 250 ms bound.\r",
	}
	out := make([]matchVector, len(texts))
	for i, s := range texts {
		out[i] = matchVector{Text: s, Timeout: protocol.MatchesExecutionTimeout(s), Memory: protocol.MatchesMemoryLimit(s)}
	}
	return out
}

// envelopeVectors wraps the value of every shared dispatch vector in the
// result envelope, and a few texts in the error envelope.
func envelopeVectors(t *testing.T) []envelopeVector {
	b, err := os.ReadFile(filepath.Join("..", "..", "protocol", "testdata", "dispatch-vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dispatch []struct {
		Name string `json:"name"`
		JSON string `json:"json"`
	}
	if err := json.Unmarshal(b, &dispatch); err != nil {
		t.Fatal(err)
	}
	var out []envelopeVector
	for _, d := range dispatch {
		v, err := protocol.ParseForDispatchOrdered(d.JSON)
		if err != nil {
			t.Fatal(err)
		}
		env, err := protocol.ResultEnvelope(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, envelopeVector{Name: "result: " + d.Name, Value: d.JSON, Envelope: env})
	}
	for _, text := range []string{"No such customer.", protocol.CompletedText, `say "hi" \ <b>` + "\u2028\x00", protocol.NewToolNotFoundError("x").Error()} {
		out = append(out, envelopeVector{Name: "error: " + text, Error: text, Envelope: protocol.ErrorEnvelope(text)})
	}
	return out
}

func argsVectors(t *testing.T) []argsVector {
	var out []argsVector
	for _, in := range []string{"", `["ada",3]`, `{"customer":"ada"}`, `5`, `[]`, `[[1,2]]`, `null`, `"x"`, `{"__executor_binary_v1__":"Uint8Array","data":"AQI="}`} {
		list, err := protocol.ArgsFromJSON(in)
		if err != nil {
			t.Fatal(err)
		}
		text, err := protocol.StringifyForDispatch(list)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, argsVector{ArgsJSON: in, List: text})
	}
	return out
}

func buildVectors(t *testing.T) []byte {
	v := vectors{
		Note: "Generated from the Go protocol package by `go test ./clients/typescript -run TestVectorsFromGo -update`; do not edit.",
		Constants: map[string]any{
			"PROTOCOL_VERSION":        protocol.ProtocolVersion,
			"DEFAULT_TIMEOUT":         protocol.DefaultTimeout,
			"MAX_SUPPORTED_TIMEOUT":   protocol.MaxSupportedTimeout,
			"PAYLOAD_LIMIT":           protocol.PayloadLimit,
			"CONSOLE_CAPTURE_LIMIT":   protocol.ConsoleCaptureLimit,
			"BINARY_TAG":              protocol.BinaryTag,
			"COMPLETED_TEXT":          protocol.CompletedText,
			"OUTSIDE_ENVELOPE_TEXT":   protocol.OutsideEnvelopeText,
			"CONSOLE_CAPTURE_MESSAGE": protocol.ConsoleCaptureMessage,
			"RETRY_AFTER_PROP":        protocol.RetryAfterProp,
		},
		FaultCodes: []protocol.Code{protocol.CodeQueueOverflow, protocol.CodeWorkerCrashed, protocol.CodeProtocolMismatch,
			protocol.CodeConnectionRejected, protocol.CodeConnectionBroken, protocol.CodeResponseTooLarge,
			protocol.CodeHandlesClosed, protocol.CodeInternal},
		Failures:  failureVectors(),
		Rehydrate: rehydrateVectors(t),
		Matches:   matchVectors(),
		Envelopes: envelopeVectors(t),
		Args:      argsVectors(t),
	}
	for _, c := range v.FaultCodes {
		if !c.Known() {
			t.Fatalf("%s is not a fault code", c)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestVectorsFromGo: the vectors the TypeScript tests read are what the
// protocol package composes today, so the two cannot drift apart.
func TestVectorsFromGo(t *testing.T) {
	want := buildVectors(t)
	if *update {
		if err := os.WriteFile(vectorsPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(vectorsPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with the protocol package: run `go test ./clients/typescript -run TestVectorsFromGo -update`", vectorsPath)
	}
}
