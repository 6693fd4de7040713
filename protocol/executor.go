package protocol

import "context"

// Executor is the contract's Executor interface in Go. The local goja
// backend, the remote backend and the gateway's router all implement it.
//
// Declared failures (a timeout, the memory limit, a syntax error, a provider
// name the rules refuse) come back inside the ExecuteResult with a nil error.
// Faults (the infrastructure breaking under the execution) come back as a
// non-nil error that carries a Code; see Fault.
type Executor interface {
	// Execute runs one program and returns its result envelope.
	Execute(ctx context.Context, req *ExecuteRequest) (*ExecuteResult, error)
	// InvokeHandle calls one handle of a retained execution with a
	// serialized request and returns the serialized response.
	InvokeHandle(ctx context.Context, executionID, handle string, req OutboundRequest) (OutboundResponse, error)
	// CloseHandles releases a retained execution.
	CloseHandles(ctx context.Context, executionID string) error
	// Close disposes the executor; later calls fail with CONNECTION_BROKEN.
	Close() error
}
