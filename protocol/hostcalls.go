package protocol

import "strconv"

// MaxWaitingHostCalls bounds the host calls of one execution (tool calls,
// and requests to the caller's outbound function) that wait for their turn
// behind those at the host; one more is refused with HostCallBacklogError.
const MaxWaitingHostCalls = 4096

// HostCallBacklogError: the program started a host call while as many of
// its host calls as the executor lets wait were already in flight. The call
// rejects; the program may catch it.
//
//	Too many host calls in flight: at most <bound> may wait at once. Await some before starting more.
type HostCallBacklogError struct {
	Bound int // host calls of one execution that may be in flight at once
}

// NewHostCallBacklogError composes the text for a bound of bound calls.
func NewHostCallBacklogError(bound int) *HostCallBacklogError {
	return &HostCallBacklogError{Bound: bound}
}

func (e *HostCallBacklogError) Error() string {
	return "Too many host calls in flight: at most " + strconv.Itoa(e.Bound) + " may wait at once. Await some before starting more."
}
