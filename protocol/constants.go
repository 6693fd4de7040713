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
// message ceiling in the path (1 MiB, capnweb's default WebSocket limit).
const PayloadLimit = 131072

// ConsoleCaptureLimit bounds the captured console text of one whole run, in
// the bytes the lines cost on the wire, shape included. A run that fills it
// loses the rest of its logging and keeps its result.
const ConsoleCaptureLimit = 65536

// DefaultMemoryLimitMB is the memory limit of one run when the executor's
// configuration sets none.
const DefaultMemoryLimitMB = 128

// DefaultHandlesIdleTimeout is the idle bound in milliseconds: a retained
// execution nobody invokes for this long is closed and its worker returns to
// rotation.
const DefaultHandlesIdleTimeout = 60000
