package protocol

import "errors"

// FailureKind is what ended a failed run, as the executor that ran it
// knows it. The layers above decide by it (which outcome to count, whether
// an invocation closed the handles), never by the failure's text: that
// text is the model's to read, and a program can throw one that reads
// word for word like a bound's.
type FailureKind string

// The kinds of failure. The zero value is FailureNone.
const (
	// FailureNone: the run did not fail, or its executor did not say what
	// ended it (a remote server that does not send the kind).
	FailureNone FailureKind = ""
	// FailureThrown: the program failed on its own account, not at a
	// bound: what it threw or rejected with, or what JavaScript or the
	// executor refused in it (a syntax error, a module the map lacks, the
	// call stack bound, an option it cannot honour).
	FailureThrown FailureKind = "thrown"
	// FailureTimeout: the run bound passed (ExecutionTimeoutError).
	FailureTimeout FailureKind = "timeout"
	// FailureMemory: the memory limit was reached (MemoryLimitError).
	FailureMemory FailureKind = "memory"
	// FailurePayload: the run's answer went past PayloadLimit
	// (PayloadTooLargeError for PartRunAnswer).
	FailurePayload FailureKind = "payload"
)

// Known reports whether k is one of the kinds above other than
// FailureNone.
func (k FailureKind) Known() bool {
	switch k {
	case FailureThrown, FailureTimeout, FailureMemory, FailurePayload:
		return true
	}
	return false
}

// EndsHandles reports whether an invocation of a retained execution that
// failed with k closed the execution's handles: a run bound did.
func (k FailureKind) EndsHandles() bool {
	return k == FailureTimeout || k == FailureMemory
}

// FailureOf is the kind of failure err is: FailureTimeout for an
// *ExecutionTimeoutError in its chain, FailureMemory for a
// *MemoryLimitError, FailurePayload for a *PayloadTooLargeError,
// FailureThrown for any other error, FailureNone for nil. It reads the
// types, never the text: an error that crossed a wire as text is
// FailureThrown.
func FailureOf(err error) FailureKind {
	var (
		timeout *ExecutionTimeoutError
		memory  *MemoryLimitError
		payload *PayloadTooLargeError
	)
	switch {
	case err == nil:
		return FailureNone
	case errors.As(err, &timeout):
		return FailureTimeout
	case errors.As(err, &memory):
		return FailureMemory
	case errors.As(err, &payload):
		return FailurePayload
	}
	return FailureThrown
}
