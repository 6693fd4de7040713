package protocol

import (
	"context"
	"time"
)

// ExecuteRequest is one execution. Code is the only field a request must
// set; every other field left at its zero value reads as absent, and a field
// that is set wins over the executor's construction-time default.
type ExecuteRequest struct {
	// Code is an async arrow expression, optionally preceded by static
	// import declarations of module-map entries.
	Code string
	// Providers declares the tool proxies the entry module generates.
	Providers []ProviderDescriptor
	// Dispatch receives every tool call. Nil means the request carries no
	// tools, and every tool call gets the not-found envelope.
	Dispatch DispatchFunc
	// Modules is the module map the program may import from. Nil is absent.
	Modules ModuleMap
	// Timeout bounds the run: absent (the zero value), a number of
	// milliseconds, or null (lift to the largest supported bound).
	Timeout Timeout
	// CountHostWaits restores the plain wall clock when true. Nil is absent.
	CountHostWaits *bool
	// Outbound decides where sandbox fetch goes. The zero value is absent,
	// which maps to the native mode.
	Outbound Outbound
	// RetainHandles asks the executor to keep the isolate alive when the
	// run resolves to a fetch handler. It has no construction-time default.
	RetainHandles bool
}

// ExecuteResult is the result envelope of one execution.
type ExecuteResult struct {
	// ResultJSON is the run's value as the JSON text the isolate produced
	// with the dispatch codec (binary values tagged). Empty means the run
	// produced no value (undefined, a failure, or a handle grant); decode it
	// with ParseForDispatch.
	ResultJSON string
	// Error is the failure text when HasError is true: a declared failure, an
	// engine error or whatever user code threw, as it reads.
	Error string
	// HasError tells an empty error text apart from no error.
	HasError bool
	// Failure is what ended the run when HasError is true, as its executor
	// knows it: decide by it, never by Error's text. Go-only, except as the
	// result message's optional failure member (an extension).
	Failure FailureKind
	// Logs are the captured console lines, in the order they were written.
	Logs []LogLine
	// ExecutionID is present only when retainHandles was honoured.
	ExecutionID string
	// Handles lists the handle names InvokeHandle accepts for ExecutionID.
	Handles []string

	// RunClock is the time the run spent on its run clock, and
	// OutboundRequests how many requests its fetch sent, for an operator's
	// metrics. Go-only: neither crosses the wire, and an executor that does
	// not measure them (the remote backend) leaves them zero.
	RunClock         time.Duration
	OutboundRequests int
	// QueueWait is how long the execution waited for room in its
	// executor, for an operator's metrics. Go-only, like RunClock.
	QueueWait time.Duration
	// CPUWait is how long the run's work waited for a CPU behind other
	// runs of its own executor process while it was ready to run (part of
	// its run clock), for an operator's metrics. Go-only, like RunClock.
	CPUWait time.Duration
	// Usage is what the execution used, when its executor measures it. It
	// crosses the wire as the result message's optional usage member (an
	// extension).
	Usage *Usage
	// NativeRequests are the requests the executor performed itself (the
	// native mode), at most MaxTracedRequests of them, for its spans.
	// Go-only, like RunClock.
	NativeRequests []NativeRequest
}

// MaxTracedRequests bounds the native requests one result lists for
// tracing; the count in OutboundRequests goes on past it.
const MaxTracedRequests = 64

// NativeRequest is one request an executor performed itself, as a span
// records it: never its query, headers or body.
type NativeRequest struct {
	Method string
	Host   string
	// Status is the response's; 0 when the request failed.
	Status   int
	Start    time.Time
	Duration time.Duration
}

// LogLevel is the console method a captured line came from.
type LogLevel string

// The three console levels the sandbox captures.
const (
	LogLevelLog   LogLevel = "log"
	LogLevelWarn  LogLevel = "warn"
	LogLevelError LogLevel = "error"
)

// LogLine is one captured console call: its arguments stringified and
// joined with single spaces.
type LogLine struct {
	Level LogLevel `json:"level"`
	Text  string   `json:"text"`
}

// ProviderDescriptor names a provider and the tools its generated proxy
// forwards to the dispatch function.
type ProviderDescriptor struct {
	Name  string   `json:"name"`
	Tools []string `json:"tools"`
	// PositionalArgs makes the generated proxy pass call arguments as an
	// argument list instead of a single argument.
	PositionalArgs bool `json:"positionalArgs,omitempty"`
	// Prelude is source that runs after every proxy is declared.
	Prelude string `json:"prelude,omitempty"`
	// ProxySource replaces the generated proxy for this provider.
	ProxySource string `json:"proxySource,omitempty"`
}

// DispatchFunc sends one tool call to the host. argsJSON follows the
// dispatch grammar (an array is an argument list, the empty string an empty
// list, anything else a single argument); the answer is the envelope JSON,
// {"result":…} or {"error":…}.
type DispatchFunc func(ctx context.Context, provider, tool, argsJSON string) (string, error)

// OutboundFunc receives every outbound request of a run in the stub mode,
// as the serialized exchange.
type OutboundFunc func(ctx context.Context, req OutboundRequest) (OutboundResponse, error)

// Header is one header line, name first. Order and repetition are kept.
type Header [2]string

// OutboundRequest is the serialized request of the outbound exchange and of
// InvokeHandle. A nil Body is the wire's null; an empty non-nil Body is an
// empty ArrayBuffer.
type OutboundRequest struct {
	Method  string
	URL     string
	Headers []Header
	Body    []byte
}

// OutboundResponse is the serialized response of the outbound exchange and
// of InvokeHandle. The body always crosses as an ArrayBuffer; nil reads as
// empty.
type OutboundResponse struct {
	Status     int
	StatusText string
	Headers    []Header
	Body       []byte
}

// OutboundMode is the outbound setting's name on the wire.
type OutboundMode string

// The three outbound modes.
const (
	// OutboundNative: the executor performs requests itself, unless its
	// operator vetoed native mode (then there is no network at all).
	OutboundNative OutboundMode = "native"
	// OutboundStub: every request goes to the caller's OutboundFunc.
	OutboundStub OutboundMode = "stub"
	// OutboundDisabled: no network; fetch rejects with OutboundDisabledError.
	OutboundDisabled OutboundMode = "disabled"
)

// Valid reports whether m is one of the three modes the contract defines.
func (m OutboundMode) Valid() bool {
	switch m {
	case OutboundNative, OutboundStub, OutboundDisabled:
		return true
	}
	return false
}

// Outbound is the request's tri-state outbound setting: absent (the zero
// value, native), a function (stub) or null (disabled).
type Outbound struct {
	fn       OutboundFunc
	disabled bool
}

// OutboundVia routes every request of the run to fn (the stub mode). A nil
// fn is the same as leaving the setting absent.
func OutboundVia(fn OutboundFunc) Outbound { return Outbound{fn: fn} }

// NoOutbound is the null setting: the run has no network at all.
func NoOutbound() Outbound { return Outbound{disabled: true} }

// Mode maps the setting onto its wire mode.
func (o Outbound) Mode() OutboundMode {
	switch {
	case o.disabled:
		return OutboundDisabled
	case o.fn != nil:
		return OutboundStub
	default:
		return OutboundNative
	}
}

// Func is the caller's outbound function in the stub mode, nil otherwise.
func (o Outbound) Func() OutboundFunc {
	if o.disabled {
		return nil
	}
	return o.fn
}
