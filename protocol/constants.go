package protocol

// ProtocolVersion is the version of the executor protocol this build speaks.
// The connecting side calls protocolVersion() before anything else crosses a
// connection and compares it with its own for exact equality.
const ProtocolVersion = 1

// DefaultTimeout is the run bound in milliseconds when neither the request
// nor the executor's configuration sets one: long enough for a program that
// makes a handful of tool calls, short enough that a runaway loop frees its
// worker within a minute.
const DefaultTimeout = 30000

// MaxSupportedTimeout is the largest run bound in milliseconds, and what a
// null timeout lifts to: 2^31-1, the widest delay a 32-bit timer accepts.
// Past it a timer fires almost at once, so a larger bound would become no
// bound at all.
const MaxSupportedTimeout = 2147483647

// PayloadLimit bounds, in the bytes it costs on the wire, each part a run
// sends outward: its answer, one tool call, one outbound request, one handle
// answer. Sized together with ConsoleCaptureLimit so that a run at every
// bound at once still yields a result message far under the smallest
// message ceiling in the path (1 MiB, capnweb's default WebSocket limit):
// with the worst JSON escaping there is, such a message measures under
// 200 KB as a capnweb frame, and under 330 KB even if the answer were
// charged as raw resultJson bytes (TestEveryBoundAtOnceFitsTheSmallestCeiling).
// The sizes are what RunAnswerWireSize, ToolCallWireSize,
// OutboundRequestWireSize and HandleAnswerWireSize measure.
const PayloadLimit = 131072

// ConsoleCaptureLimit bounds the captured console text of one whole run, in
// the bytes the lines cost on the wire, shape included (LogLineWireSize):
// half of PayloadLimit, because logging is a side channel and must not
// crowd out the answer. A run that fills it loses the rest of its logging
// (the line that meets the bound is dropped whole and one warn line with
// ConsoleCaptureMessage takes the place of the rest) and keeps its result.
const ConsoleCaptureLimit = 65536

// DefaultMemoryLimitMB is the memory limit of one run when the executor's
// configuration sets none: room for a program working through a few
// megabytes of JSON with a JavaScript engine's object overhead, while a
// worker per core still fits in an ordinary machine.
const DefaultMemoryLimitMB = 128

// DefaultHandlesIdleTimeout is the idle bound in milliseconds: a retained
// execution nobody invokes for this long is closed and its worker returns to
// rotation. A minute covers the pause between a model's turns, while a held
// execution occupies a worker, so an abandoned one must not hold it long.
const DefaultHandlesIdleTimeout = 60000
