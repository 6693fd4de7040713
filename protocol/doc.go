// Package protocol is the executor contract in Go (docs/protocol.md states
// it in prose): the request, result and wire message types,
// the bounds every run is held to, every declared failure with its pinned
// text, the fault-code taxonomy, provider-name validation and the dispatch
// codec. It depends on nothing beyond the standard library and jsvalue
// (JavaScript's values and their JSON), so any Go program can implement or
// call an executor from the two. Both sides of the wire build on it: the
// local goja backend, the remote backend, the executor server and the
// gateway.
//
// # Requests and results
//
// ExecuteRequest and ExecuteResult are the contract's in-language
// declarations; Executor is its interface. A request field left at its zero
// value reads as absent, and a field that is set wins over the executor's
// construction-time default (ResolveTimeout, ResolveCountHostWaits).
// Timeout is tri-state: absent, a number of milliseconds, or null (lift to
// the largest bound the serving side supports, never above
// MaxSupportedTimeout). Outbound is tri-state too: absent (native), a
// function (stub) or null (disabled), and Outbound.Mode names its
// OutboundMode on the wire. What a Go caller adds beside the request and
// never sends (a tenant, its lower memory limit and denied ranges, a hook
// for closed handles) is a Policy, passed to a PolicyExecutor's
// ExecuteWith.
//
// On the wire, execute carries the plain-data fields as ExecuteCallOptions
// (modules as [name, source] pairs, because capnweb deletes object keys
// that name Object.prototype members) and returns an ExecuteResultMessage
// whose resultJson is the JSON text the isolate produced.
// ExecuteRequest.CallOptions, ApplyCallOptions, ResultMessageOf and
// ExecuteResultMessage.Result convert between the two forms.
//
// # Modules
//
// A ModuleMap entry is a Module of one of five kinds (js, cjs, text, json,
// data). NormalizeModuleName removes one leading "./" and nothing else;
// NormalizeModuleMap applies it to every key and reports
// ModuleKeyCollisionError and UnsupportedModuleKindError.
//
// # Bounds
//
// ProtocolVersion, DefaultTimeout, MaxSupportedTimeout, PayloadLimit,
// ConsoleCaptureLimit, DefaultMemoryLimitMB and DefaultHandlesIdleTimeout
// are the contract's constants, each documented with why it has its value.
// PayloadLimit and ConsoleCaptureLimit count the bytes a part costs on the
// wire: RunAnswerWireSize, ToolCallWireSize, OutboundRequestWireSize,
// HandleAnswerWireSize and LogLineWireSize measure them, and
// ConsoleCapture applies the console bound.
//
// # Declared failures and faults
//
// A declared failure is the executor turning something down on purpose; its
// reader is the model whose code ran, and its text says in the first
// sentence what failed and why and in the second what remains possible.
// Every class is a Go type whose constructor composes the text, for
// example NewExecutionTimeoutError(30000).Error() is
//
//	Execution timed out at its 30000 ms bound. Do less work per run and return the part that is already finished.
//
// The classes: ExecutionTimeoutError (MatchesExecutionTimeout recognises
// its text), MemoryLimitError, OutboundDisabledError, ModuleNotFoundError,
// ModuleKeyCollisionError, UnsupportedModuleKindError, the four provider
// name classes, PayloadTooLargeError, CompressionAbsentError,
// BufferGrowthAbsentError, CacheStorageAbsentError, HandleNotFoundError,
// HandlesClosedError, QueueOverflowError, ResponseTooLargeError and
// ToolNotFoundError; and the texts CompletedText, OutsideEnvelopeText and
// ConsoleCaptureMessage.
//
// The texts are the model's to read, and a program can throw one word for
// word. Code that must decide by how a run failed reads its FailureKind
// (ExecuteResult.Failure, FailureOf for an error), never its text; the
// Matches functions serve only a caller that has nothing but the text.
//
// A fault is the infrastructure breaking under an execution. It reaches the
// calling application as an error carrying a Code (see Coded, CodeOf and
// Fault); QUEUE_OVERFLOW and WORKER_CRASHED are Retryable. Only the message,
// the code and the other own properties of a thrown error cross the wire,
// and Rehydrate rebuilds the typed error from them, passing an error with
// no known code through untouched as a RemoteError.
//
// # Provider names
//
// ValidateProviders applies the contract's four rules to every provider
// name, each failing with its own class: the identifier shape
// (InvalidProviderNameError), ECMAScript reserved words
// (KeywordProviderNameError), names the entry scope reserves
// (ReservedProviderNameError, see IsReservedName) and duplicates
// (DuplicateProviderNameError). fetch and Response are deliberately not
// reserved.
//
// # Dispatch codec
//
// Tool calls cross every boundary in one grammar. Arguments are one JSON
// string: an array is an argument list, the empty string an empty list,
// anything else a single argument (ArgsFromJSON). The answer is one JSON
// envelope, {"result":value} or {"error":text}; NewEnvelopeDispatch
// composes the three envelopes around a ToolFunc.
//
// StringifyForDispatch writes JSON byte for byte as JavaScript's
// JSON.stringify does, binary values as {"__executor_binary_v1__":kind,
// "data":base64} envelopes (BinaryTag); ParseForDispatch reads JSON as
// JSON.parse does and turns both binary tags into []byte. The values are
// jsvalue's: jsvalue.Object keeps member order where a Go map has none,
// and jsvalue.Undefined stands for JavaScript's undefined. The same codec
// in JavaScript, checked against
// the same vectors, is testdata/codec.js; testdata/dispatch-vectors.json
// holds the shared vectors and testdata/check-vectors.mjs checks them in
// Node.
package protocol
