// Package capnweb is a peer of the capnweb RPC protocol (the wire format of
// the npm library capnweb 0.12.0): one Session type that serves a main
// object to the other side and calls the other side's main object, with
// functions and objects passed by reference in both directions.
//
// It knows nothing about any application protocol built on top of it; what
// it needs to know of one it asks through Options.ErrorProps. Where the
// capnweb protocol document and the JavaScript library disagree, it
// follows the library: the interop tests (interop/) run it against the real
// npm package.
//
// # Sessions and transports
//
// A Session runs over a Transport that carries one JSON text per message.
// NewWebSocketTransport adapts a github.com/coder/websocket connection (one
// text frame per message, no subprotocol); Dial and Accept build a Session
// over a WebSocket in one step; Pipe gives an in-memory pair for tests.
//
//	sess := capnweb.NewSession(transport, capnweb.Methods{
//		"add": func(ctx context.Context, args []any) (any, error) {
//			return args[0].(float64) + args[1].(float64), nil
//		},
//	}, capnweb.Options{})
//	defer sess.Close()
//	sum, err := sess.Main().Call(ctx, "add", 1, 2)
//
// Session.Main is a Stub for the peer's main object. Stub.Call sends a call
// and waits for its result; Stub.Invoke sends it and returns a Promise at
// once, so many calls can be in flight and a Promise can be used in later
// calls (pipelining) before it settles: Promise.Get reads a property of the
// result, Promise.Invoke calls a method on it, and a Promise passed as an
// argument is resolved by the peer before the call is delivered. As in
// JavaScript, the result is requested ("pull") only when the Promise is
// awaited; Promise.Pull requests it at once, for many calls in flight that
// will all be awaited.
//
// # Serving
//
// A Target receives calls. Methods (a map from method name to Handler)
// and TargetFromMethods (the exported methods of a Go value, reached by
// their names with the first letter lower-cased) build one. A Func is a
// callable value: passed as an argument or result it becomes a stub the
// peer can call. Any Target passed as a value is passed by reference too.
//
// Calls to one target (one entry of the export table: the main object, or
// one passed occurrence of a Func or Target) are delivered in arrival
// order (E-order). Like a JavaScript method, which runs alone until its
// first await, a Handler holds its target's turn until it returns or waits
// on an RPC result with the handler's ctx (Promise.Await, Stub.Call); a
// handler or Func that does long work of its own (a slow tool call, an
// HTTP request) calls Detach(ctx) first so that the next call on the same
// target can start. Calls pipelined on a result wait for it, in order; a
// call whose arguments are promises still pending is delivered once they
// settle, and later calls may overtake it, as in JavaScript. The read loop
// never waits for a handler, so a handler may await a callback's result.
// CallSession(ctx) is the session a served call arrived on.
//
// Stubs received as arguments of a served call are released when the
// handler returns, as the JavaScript library does; call Stub.Dup to keep
// one longer and Release the duplicate when done. Stubs received in results
// belong to the caller, who must Release them (Promise.Release releases
// every stub of an awaited result). Stubs a handler returns are handed on:
// they are released when the peer releases the result. A stub that comes
// back to the session that exported it arrives as the original local value
// (the Func or Target), not as a Stub. A Stub of one session passed to
// another session is re-exported there, and calls on it are forwarded.
//
// # Values
//
// Values cross as follows (Go → wire → Go):
//
//	nil                  null                       nil
//	bool, string         as is                      bool, string
//	ints, floats         number, ["nan"], ["inf"],   float64 (−0 is sent as 0,
//	                     ["-inf"]                    as JSON.stringify does)
//	jsvalue.Undefined    ["undefined"]              jsvalue.Undefined
//	*big.Int             ["bigint","123"]           *big.Int
//	time.Time            ["date",ms]                time.Time (UTC; an invalid
//	                     (zero: ["date",null])      date arrives as time.Time{})
//	[]byte               ["bytes",b64]              []byte
//	Bytes{Type: "…"}     ["bytes",b64,"…"]          Bytes (marker kept)
//	*url.URL             ["url",href]               *url.URL
//	Headers              ["headers",[[k,v]…]]       Headers
//	slices, arrays       [[…]] (escaped)            []any
//	map[string]T, struct {…} (sorted keys / fields)  map[string]any
//	jsvalue.Object       {…} in the given order     map[string]any
//	                                                (jsvalue.Object with
//	                                                KeepObjectOrder)
//	*Error, error        ["error",name,msg,…]       *Error
//	Func, Target, func(context.Context, []any) (any, error)
//	                     ["export",-N]              *Stub
//	*Stub                ["import",id] to its own session, else re-exported
//	*Promise             ["pipeline",id,path] to its own session, else
//	                     ["promise",-N] and a later resolve
//
// Integers are JavaScript numbers: beyond 2^53 they lose precision, so
// send a *big.Int for a bigint. Structs encode like encoding/json does
// (exported fields, json tags, omitempty, "-"); map keys are sorted
// (integer-like keys first, as JavaScript enumerates them), so use
// jsvalue.Object when key order matters; of a key it names twice the peer
// keeps the last value, as JSON.parse does, and so does
// jsvalue.Object.Get. Received plain objects lose keys named after
// Object.prototype members and "toJSON", exactly as the JavaScript receiver
// drops them; with Options.KeepObjectOrder they decode to jsvalue.Object in
// wire order. Strings are UTF-8: a lone surrogate escape or invalid UTF-8
// becomes U+FFFD. Sent strings are escaped as JSON.stringify escapes them
// (not <, >, &, U+2028 or U+2029).
//
// A Handler returning an *Error sends it as is (its Props, "code" above
// all, cross as own properties). Any other error is sent as an Error whose
// message is err.Error(), with the own properties Options.ErrorProps gives
// it (an application's fault code, say). A *Thrown sends a non-error value
// as the rejection, as JavaScript's throw "text" does, and a received
// non-error rejection comes back as *Thrown.
//
// # Messages not supported
//
// Streams are refused cleanly: a "pipe" gets a writable end whose writes
// fail, a "stream" is rejected (its expression is not evaluated), and a
// value holding a stream, Blob, Request or Response fails the one call or
// resolution that carries it with a TypeError saying so (stubs it
// introduced are released). The session survives all of these. A received
// "remap" (JavaScript's promise.map) is evaluated; this peer does not send
// one. Map, Set and RegExp tags (unmerged upstream proposals) are unknown
// special values, as in capnweb 0.12.0.
//
// # Session end and limits
//
// When the session ends (Close, Abort, a received abort, the transport
// closing, or a protocol error) every pending call fails with a
// *BrokenError carrying the close code and reason, every served call's
// context is cancelled, both tables are dropped, and the session's
// goroutines exit (handlers must honour their ctx). Close closes with
// 1000; Abort sends an abort and closes with 3000.
//
// Malformed input (bad JSON, unknown messages or tags, unknown ids,
// over-release, a "promise" id imported twice, depth beyond MaxDepth
// (256), bigints longer than MaxBigIntDigits (16384, as in JavaScript),
// messages beyond Options.MaxMessageSize (1 MiB), more than
// Options.MaxExports outstanding entries, binary frames) makes the session
// send an abort naming the problem and close with code 3000; it never
// panics. Over WebSocket, a message beyond the read limit is
// refused by the WebSocket library itself, which closes with 1009.
//
// # Performance
//
// A connection made by Accept writes the messages queued together in one
// system call (see docs/benchmarks.md).
package capnweb
