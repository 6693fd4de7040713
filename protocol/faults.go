package protocol

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Code is a fault code from the contract's taxonomy. A fault is the
// infrastructure breaking under an execution; it reaches the calling
// application as a thrown error with a code property.
type Code string

// The fault taxonomy. A code exists only while a consumer can meet it on a
// thrown error.
const (
	// CodeQueueOverflow: execute rejects because the pool's queue is at its
	// bound. Retryable.
	CodeQueueOverflow Code = "QUEUE_OVERFLOW"
	// CodeWorkerCrashed: the worker under the execution died or never
	// started. Retryable.
	CodeWorkerCrashed Code = "WORKER_CRASHED"
	// CodeProtocolMismatch: the versions disagree at the handshake, or an
	// unknown outbound mode arrived on the wire.
	CodeProtocolMismatch Code = "PROTOCOL_MISMATCH"
	// CodeConnectionRejected: connect failed on the socket or the handshake.
	CodeConnectionRejected Code = "CONNECTION_REJECTED"
	// CodeConnectionBroken: the transport under a call died (WebSocket, IPC
	// or a disposed executor).
	CodeConnectionBroken Code = "CONNECTION_BROKEN"
	// CodeResponseTooLarge: the server measured the result envelope or a
	// handle response above its response limit.
	CodeResponseTooLarge Code = "RESPONSE_TOO_LARGE"
	// CodeHandlesClosed: the named execution holds no handles.
	CodeHandlesClosed Code = "HANDLES_CLOSED"
	// CodeInternal: an invariant of the executor itself broke.
	CodeInternal Code = "INTERNAL"
)

// Coded is implemented by every error that carries a fault code.
type Coded interface {
	error
	FaultCode() Code
}

// CodeOf returns the fault code carried by err or anything it wraps, or ""
// when it carries none.
func CodeOf(err error) Code {
	var c Coded
	if errors.As(err, &c) {
		return c.FaultCode()
	}
	return ""
}

// Retryable reports whether a call that failed with c may simply be tried
// again: QUEUE_OVERFLOW and WORKER_CRASHED, where nothing of the execution
// ran to completion and a later attempt can succeed.
func (c Code) Retryable() bool {
	return c == CodeQueueOverflow || c == CodeWorkerCrashed
}

// Known reports whether c is one of the taxonomy's eight codes.
func (c Code) Known() bool {
	switch c {
	case CodeQueueOverflow, CodeWorkerCrashed, CodeProtocolMismatch, CodeConnectionRejected,
		CodeConnectionBroken, CodeResponseTooLarge, CodeHandlesClosed, CodeInternal:
		return true
	}
	return false
}

// Fault is a thrown failure carrying a code from the taxonomy: what the
// calling application meets when the infrastructure breaks under an
// execution. Branch on it with errors.As or CodeOf.
type Fault struct {
	Code    Code
	Message string
	// Props are the other own properties the thrown value carried across
	// the wire, kept as they arrived; nil when there were none.
	Props map[string]any
	// Err is the cause: for a fault rebuilt by Rehydrate, the typed
	// declared failure the message was composed by, when there is one.
	Err error
}

// NewFault is a fault with code and message.
func NewFault(code Code, message string) *Fault { return &Fault{Code: code, Message: message} }

// Faultf is a fault wrapping err: its message is err's text, and errors.Is
// and errors.As reach err through it.
func Faultf(code Code, err error) *Fault {
	return &Fault{Code: code, Message: err.Error(), Err: err}
}

func (f *Fault) Error() string {
	if f.Message == "" && f.Err != nil {
		return f.Err.Error()
	}
	return f.Message
}

// FaultCode returns f.Code.
func (f *Fault) FaultCode() Code { return f.Code }

// Unwrap returns f.Err.
func (f *Fault) Unwrap() error { return f.Err }

// RemoteError is a thrown error that crossed the wire with no code from the
// taxonomy: a throw from user code or a rejection from a provider. It keeps
// the message, the code it carried (if any, unknown to this build) and its
// other own properties as they arrived. It does not implement Coded.
type RemoteError struct {
	Message string
	Code    string         // the code property as it arrived, "" when absent
	Props   map[string]any // the other own properties, nil when none
}

func (e *RemoteError) Error() string { return e.Message }

// Rehydrate rebuilds the error a thrown value stood for from what crossed
// the wire: its message, its code property and its other own properties.
//
// A code from the taxonomy gives a *Fault with that code, the message and
// the props as they arrived. When the message is exactly the text a
// declared failure of that code composes (HANDLES_CLOSED,
// QUEUE_OVERFLOW, RESPONSE_TOO_LARGE), Fault.Err is that failure rebuilt,
// fields included, so errors.As(err, &handlesClosed) works and
// handlesClosed.ExecutionID is the id the text names; a message that is not
// exactly such a text leaves Err nil rather than guess. Every result's
// Error() is message, unchanged.
//
// Any other code, or none, passes through untouched as a *RemoteError that
// keeps the message, the code and the props.
func Rehydrate(message string, code Code, props map[string]any) error {
	if !code.Known() {
		return &RemoteError{Message: message, Code: string(code), Props: props}
	}
	f := &Fault{Code: code, Message: message, Props: props}
	switch code {
	case CodeHandlesClosed:
		if id, ok := strings.CutPrefix(message, handlesClosedPrefix); ok {
			if id, ok = strings.CutSuffix(id, handlesClosedSuffix); ok {
				f.Err = NewHandlesClosedError(id)
			}
		}
	case CodeQueueOverflow:
		f.Err = rehydrateQueueFailure(message)
	case CodeResponseTooLarge:
		if rest, ok := strings.CutPrefix(message, responseTooLargePrefix); ok {
			if rest, ok = strings.CutSuffix(rest, responseTooLargeSuffix); ok {
				if s, l, ok := strings.Cut(rest, responseTooLargeMiddle); ok {
					size, ok1 := canonicalInt(s)
					limit, ok2 := canonicalInt(l)
					if ok1 && ok2 {
						f.Err = NewResponseTooLargeError(size, limit)
					}
				}
			}
		}
	}
	return f
}

// rehydrateQueueFailure rebuilds the QUEUE_OVERFLOW failure whose composed
// text message is, or returns nil when it is none of them exactly.
func rehydrateQueueFailure(message string) error {
	// The refusals that carry no retry hint have one text each.
	for _, err := range []error{NewDrainingError(), NewExecutorDrainingError(), NewNoExecutorError(), NewHandlesUnreachableError()} {
		if message == err.Error() {
			return err
		}
	}
	rest, retry, ok := cutRetrySentence(message)
	if !ok {
		return nil
	}
	if n, ok := strings.CutPrefix(rest, queueOverflowPrefix); ok {
		if n, ok = strings.CutSuffix(n, queueOverflowMiddle); ok {
			if bound, ok := canonicalInt(n); ok {
				return NewQueueOverflowError(bound, retry)
			}
		}
		return nil
	}
	if n, ok := strings.CutPrefix(rest, queueTimeoutPrefix); ok {
		if n, ok = strings.CutSuffix(n, queueTimeoutMiddle); ok {
			if ms, ok := canonicalInt(n); ok && ms > 0 {
				return NewQueueTimeoutError(time.Duration(ms)*time.Millisecond, retry)
			}
		}
		return nil
	}
	if tl, ok := strings.CutPrefix(rest, tenantLimitPrefix); ok {
		if tl, ok = strings.CutSuffix(tl, tenantLimitSuffix); ok {
			if tenant, limit, ok := strings.Cut(tl, tenantLimitMiddle); ok {
				return NewTenantLimitError(tenant, limit, retry)
			}
		}
	}
	return nil
}

// cutRetrySentence splits the retry sentence off the end of a queue or
// tenant-bound text: what comes before it and the wait it names.
func cutRetrySentence(message string) (rest string, retry time.Duration, ok bool) {
	body, ok := strings.CutSuffix(message, retrySuffix)
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndex(body, retryPrefix)
	if i < 0 {
		return "", 0, false
	}
	ms, ok := canonicalInt(body[i+len(retryPrefix):])
	if !ok || ms < 1 {
		return "", 0, false
	}
	return body[:i], time.Duration(ms) * time.Millisecond, true
}

// canonicalInt parses s when it is exactly how strconv.Itoa writes an int,
// so the rebuilt error composes the same text.
func canonicalInt(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	if err != nil || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}
