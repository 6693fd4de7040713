package protocol

import "errors"

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
