package protocol

import (
	"errors"
	"strconv"
)

// The executor's own declared failures and faults beyond the contract's
// quoted ones: each composes its text in the contract's grammar (what
// failed and why, then what remains possible), and a test pins each word
// for word.

// SourceTooLargeError: the program, a module or a provider's source is
// past the sandbox's bound on one source. It arrives in the envelope.
//
//	The <what> is <size> bytes, past the sandbox's <limit>-byte bound on one source. Send less code, and move what is shared into the module map.
type SourceTooLargeError struct {
	What  string // "program", `module "a"`, `provider "store"`
	Size  int
	Limit int
}

// NewSourceTooLargeError composes the text for what, of size bytes, past
// limit.
func NewSourceTooLargeError(what string, size, limit int) *SourceTooLargeError {
	return &SourceTooLargeError{What: what, Size: size, Limit: limit}
}

func (e *SourceTooLargeError) Error() string {
	return "The " + e.What + " is " + strconv.Itoa(e.Size) + " bytes, past the sandbox's " +
		strconv.Itoa(e.Limit) + "-byte bound on one source. Send less code, and move what is shared into the module map."
}

// SourceNestingError: a source nests brackets deeper than the sandbox
// parses. It arrives in the envelope.
//
//	The <what> nests brackets more than <limit> deep (line <line>), past what the sandbox parses. Flatten that code and run it again.
type SourceNestingError struct {
	What  string
	Limit int
	Line  int // the line where the nesting passed the limit
}

// NewSourceNestingError composes the text for what, nesting past limit at
// line.
func NewSourceNestingError(what string, limit, line int) *SourceNestingError {
	return &SourceNestingError{What: what, Limit: limit, Line: line}
}

func (e *SourceNestingError) Error() string {
	return "The " + e.What + " nests brackets more than " + strconv.Itoa(e.Limit) +
		" deep (line " + strconv.Itoa(e.Line) + "), past what the sandbox parses. Flatten that code and run it again."
}

// HostCallBacklogError: a tool call or outbound request past the bound on
// host calls one execution may have waiting at once. The program's call
// rejects with it.
//
//	Too many host calls in flight: at most <limit> may wait at once. Await some before starting more.
type HostCallBacklogError struct {
	Limit int
}

// NewHostCallBacklogError composes the text for a bound of limit calls.
func NewHostCallBacklogError(limit int) *HostCallBacklogError {
	return &HostCallBacklogError{Limit: limit}
}

func (e *HostCallBacklogError) Error() string {
	return "Too many host calls in flight: at most " + strconv.Itoa(e.Limit) + " may wait at once. Await some before starting more."
}

// HostAnswerTooLargeError: the host's answer to a tool call or outbound
// request is too large for the executor to carry to its sandbox. The
// program's call rejects with it.
//
//	The host's answer is too large to deliver to the sandbox. Ask the tool for less at once.
type HostAnswerTooLargeError struct{}

// NewHostAnswerTooLargeError composes the text.
func NewHostAnswerTooLargeError() *HostAnswerTooLargeError { return &HostAnswerTooLargeError{} }

func (*HostAnswerTooLargeError) Error() string {
	return "The host's answer is too large to deliver to the sandbox. Ask the tool for less at once."
}

// NotAResponseError: a retained fetch handler answered with something other
// than a Response. The invocation rejects with it; the handles stay open.
//
//	The fetch handler answered with something other than a Response. Return a Response, for example new Response(body, {status: 200}).
type NotAResponseError struct{}

// NewNotAResponseError composes the text.
func NewNotAResponseError() *NotAResponseError { return &NotAResponseError{} }

func (*NotAResponseError) Error() string {
	return "The fetch handler answered with something other than a Response. Return a Response, for example new Response(body, {status: 200})."
}

// NetworkErrorResponseError: a retained fetch handler answered with
// Response.error(), which has no HTTP form on the wire. The invocation
// rejects with it; the handles stay open.
//
//	The fetch handler answered with Response.error(), a network error, not an HTTP response. Return a Response with a status from 200 to 599.
type NetworkErrorResponseError struct{}

// NewNetworkErrorResponseError composes the text.
func NewNetworkErrorResponseError() *NetworkErrorResponseError { return &NetworkErrorResponseError{} }

func (*NetworkErrorResponseError) Error() string {
	return "The fetch handler answered with Response.error(), a network error, not an HTTP response. Return a Response with a status from 200 to 599."
}

// DeliveryPart names what an executor could not deliver to its worker
// process.
type DeliveryPart string

// The parts DeliveryTooLargeError names.
const (
	DeliveryExecution     DeliveryPart = "execution" // code, providers and modules
	DeliveryHandleRequest DeliveryPart = "handle request"
)

func (p DeliveryPart) advice() string {
	if p == DeliveryHandleRequest {
		return "Send a smaller body."
	}
	return "Send less code, and fewer or smaller modules."
}

// DeliveryTooLargeError: an execution or a handle request is too large for
// the pipe between the executor and its worker process, so nothing ran. It
// is a fault, thrown to the calling application with CodeInternal: no wire
// of the contract carries a message this large, so only an in-process
// caller meets it.
//
//	The <part> is <size> bytes, past the <limit>-byte bound on one message to the executor's worker process, so it was not delivered. <advice>
type DeliveryTooLargeError struct {
	Part  DeliveryPart
	Size  int
	Limit int
}

// NewDeliveryTooLargeError composes the text for part, of size bytes, past
// limit.
func NewDeliveryTooLargeError(part DeliveryPart, size, limit int) *DeliveryTooLargeError {
	return &DeliveryTooLargeError{Part: part, Size: size, Limit: limit}
}

func (e *DeliveryTooLargeError) Error() string {
	return "The " + string(e.Part) + " is " + strconv.Itoa(e.Size) + " bytes, past the " + strconv.Itoa(e.Limit) +
		"-byte bound on one message to the executor's worker process, so it was not delivered. " + e.Part.advice()
}

// FaultCode is CodeInternal.
func (*DeliveryTooLargeError) FaultCode() Code { return CodeInternal }

// DrainingError: the gateway is draining for a restart and turned an
// execution away before it started. It carries CodeQueueOverflow, which is
// retryable.
//
//	This gateway is draining for a restart, so the execution was turned away before it started. Retry it; another replica, or this one after the restart, will run it.
type DrainingError struct{}

// NewDrainingError composes the text.
func NewDrainingError() *DrainingError { return &DrainingError{} }

func (*DrainingError) Error() string {
	return "This gateway is draining for a restart, so the execution was turned away before it started. Retry it; another replica, or this one after the restart, will run it."
}

// FaultCode is CodeQueueOverflow.
func (*DrainingError) FaultCode() Code { return CodeQueueOverflow }

// ExecutorDrainingError: an executor server is draining for a restart and
// turned an execution away before it started. It carries
// CodeQueueOverflow, which is retryable: nothing of the execution ran, so
// another executor server (or this one after its restart) may run it.
//
//	This executor server is draining for a restart, so the execution was turned away before it started. Retry it; another executor server, or this one after the restart, will run it.
type ExecutorDrainingError struct{}

// NewExecutorDrainingError composes the text.
func NewExecutorDrainingError() *ExecutorDrainingError { return &ExecutorDrainingError{} }

const executorDrainingText = "This executor server is draining for a restart, so the execution was turned away before it started. Retry it; another executor server, or this one after the restart, will run it."

func (*ExecutorDrainingError) Error() string { return executorDrainingText }

// FaultCode is CodeQueueOverflow.
func (*ExecutorDrainingError) FaultCode() Code { return CodeQueueOverflow }

// NoExecutorError: no executor server behind a gateway could take an
// execution, because each was unreachable, refused the gateway's
// connection or was draining, or the group had none (its name resolved to
// no address). It carries CodeQueueOverflow, which is retryable: nothing
// of the execution ran, and the condition heals once a server is back.
// It is a different code from a refused credential (CONNECTION_REJECTED),
// which a retry cannot fix.
//
//	No executor server behind this gateway could take the execution, so it did not start. Retry it in a few seconds; an executor server that is down or restarting takes executions again once it is back.
type NoExecutorError struct{}

// NewNoExecutorError composes the text.
func NewNoExecutorError() *NoExecutorError { return &NoExecutorError{} }

func (*NoExecutorError) Error() string {
	return "No executor server behind this gateway could take the execution, so it did not start. Retry it in a few seconds; an executor server that is down or restarting takes executions again once it is back."
}

// FaultCode is CodeQueueOverflow.
func (*NoExecutorError) FaultCode() Code { return CodeQueueOverflow }

// HandlesUnreachableError: a call on a retained execution (invokeHandle,
// closeHandles) whose handles live on an executor server behind a gateway
// that could not be reached. It carries CodeQueueOverflow, which is
// retryable: the call never started, so a retry runs it once. Handles
// live on that one server, so unlike an execution the gateway cannot send
// the call elsewhere; a server that restarted meanwhile lost them, and the
// retry reads HANDLES_CLOSED.
//
//	The executor server that holds this execution's handles could not be reached, so the call did not start. Retry it in a few seconds; if that server restarted meanwhile, its handles are gone and the retry reads HANDLES_CLOSED.
type HandlesUnreachableError struct{}

// NewHandlesUnreachableError composes the text.
func NewHandlesUnreachableError() *HandlesUnreachableError { return &HandlesUnreachableError{} }

func (*HandlesUnreachableError) Error() string {
	return "The executor server that holds this execution's handles could not be reached, so the call did not start. Retry it in a few seconds; if that server restarted meanwhile, its handles are gone and the retry reads HANDLES_CLOSED."
}

// FaultCode is CodeQueueOverflow.
func (*HandlesUnreachableError) FaultCode() Code { return CodeQueueOverflow }

// IsExecutorDraining reports whether err is an executor server's draining
// refusal: an *ExecutorDrainingError in this process, or, after it crossed
// the wire, a QUEUE_OVERFLOW fault whose whole text is its text. A caller
// in front of several executor servers sends such a run to another.
func IsExecutorDraining(err error) bool {
	var d *ExecutorDrainingError
	if errors.As(err, &d) {
		return true
	}
	var f *Fault
	return errors.As(err, &f) && f.Code == CodeQueueOverflow && f.Error() == executorDrainingText
}
