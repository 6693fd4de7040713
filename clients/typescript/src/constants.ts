// The bounds and pinned texts of the executor contract, as the Go protocol
// package declares them (the tests compare every one with Go's).

/** The protocol version this client speaks; the handshake compares it exactly. */
export const PROTOCOL_VERSION = 1

/** The run bound in milliseconds when neither the request nor the executor sets one. */
export const DEFAULT_TIMEOUT = 30000

/** The largest run bound in milliseconds, and what a null timeout lifts to (2^31-1). */
export const MAX_SUPPORTED_TIMEOUT = 2147483647

/** The bound, in wire bytes, on each part a run sends: answer, tool call, outbound request, handle answer. */
export const PAYLOAD_LIMIT = 131072

/** The bound, in wire bytes, on one run's captured console. */
export const CONSOLE_CAPTURE_LIMIT = 65536

/** The envelope key a binary value crosses the dispatch grammar under. */
export const BINARY_TAG = '__executor_binary_v1__'

/** The envelope error of every tool call that arrives after its execution finished. */
export const COMPLETED_TEXT = 'Execution has already completed.'

/** What the generated proxy throws when a dispatch answer is not an envelope object. */
export const OUTSIDE_ENVELOPE_TEXT = 'The dispatch answered outside the result envelope.'

/** The warn line that replaces the rest of a run's logging once its console reaches the capture bound. */
export const CONSOLE_CAPTURE_MESSAGE =
  "Console output stopped at this run's 65536-byte capture bound, so the rest of its logging is dropped. The run goes on, and its result still returns."
