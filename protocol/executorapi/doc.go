// Package executorapi binds the executor contract's ExecutorApi RPC surface
// to a capnweb session: Server exposes any protocol.Executor to capnweb
// clients, and the conversions here are shared with backends/remote, the
// client that turns a remote executor server back into a protocol.Executor.
//
// The surface, exactly as the contract declares it:
//
//	protocolVersion(): number
//	execute(code, providers, options, dispatch | null, outboundMode, outbound?): ExecuteResultMessage
//	invokeHandle(executionId, handleName, request): OutboundResponseMessage
//	closeHandles(executionId): undefined
//
// Two extensions ride on it, which servers that do not know them ignore:
// traceparent and tracestate members in execute's options, and the same
// two in an options object after invokeHandle's request.
//
// dispatch and outbound cross as live capnweb stubs, so provider code never
// leaves the caller's process. Faults cross as errors with a code property
// from the taxonomy; user errors and provider rejections keep their shape.
// Every value that arrives is checked: a wrong shape is a TypeError naming
// the member, an unknown outbound mode is PROTOCOL_MISMATCH.
package executorapi
