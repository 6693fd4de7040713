package protocol

// MaxWaitingHostCalls bounds the host calls of one execution (tool calls,
// and requests to the caller's outbound function) that wait for their turn
// behind those at the host; one more is refused with HostCallBacklogError.
const MaxWaitingHostCalls = 4096
