// Package sandbox runs one program of the executor contract in a fresh goja
// runtime: the entry module, the module map, the provider proxies, the
// console, the event loop with its run clock, and the payload bounds. It runs
// in whatever process calls it; backends/local calls it inside a worker
// process, which adds the bounds only a process boundary can hold (memory,
// and Go code that goja's interrupt cannot stop).
//
// # One run
//
// Run takes a Job (everything a run needs, JSON-serializable so it crosses a
// pipe) and a Host (what the run reaches outside: tool dispatch and the stub
// outbound function) and returns the result envelope. Declared failures and
// whatever the program throws arrive in the envelope's Error; Run never
// panics, and returns an error only when the sandbox itself broke (a Go
// panic in a host function or in the Host): an INTERNAL fault, with no
// envelope, for the calling application rather than the program. In
// order, it:
//
//  1. validates the provider names (protocol.ValidateProviders) and
//     normalizes the module map (protocol.NormalizeModuleMap), reporting
//     their texts;
//  2. bounds every source (program, modules, preludes, proxy sources) to
//     MaxSourceBytes and MaxNesting before any parser sees it;
//  3. builds the entry module and compiles it (cached by content);
//  4. walks the static import graph and reports ModuleNotFoundError before
//     anything runs;
//  5. makes a fresh runtime, installs the scope, evaluates the entry, invokes
//     its arrow and runs the event loop until the arrow settles, the run
//     clock passes the bound, or ctx ends.
//
// # The entry module
//
// The program's leading import lines are lifted a line at a time, whole
// (trailing code included; a brace left open on an import line takes the
// lines up to its close). The rest is the arrow body, wrapped and never
// rewritten:
//
//	<import lines>
//	const <provider> = <generated proxy or (proxySource)>;   one per provider
//	<each prelude>
//	export default ((
//	<body>
//	)
//	);
//
// An entry without imports is compiled by goja directly; one with imports, or
// one goja cannot parse (import(), for await, async generators), goes through
// esbuild's Go API, which turns ES modules into CommonJS and lowers what goja
// lacks. A syntax error reads as the engine words it with its place in that
// module, "Unexpected token ')' [executor.js:4:1]" for an empty body. A
// proxySource that is one expression becomes the provider's binding, as
// above; any other proxySource is taken as statements that declare the
// provider's name themselves.
//
// The entry scope holds exactly the contract's names: __dispatch,
// __stringifyForDispatch, __parseForDispatch, __BINARY_TAG,
// __encodeBinaryValue, __decodeBinaryValue, __encodeBase64 and
// __decodeBase64, with the codec's semantics of protocol/testdata/codec.js
// (base64 and the JSON reader are native for speed and for lone surrogates,
// which goja's JSON.parse loses). An entry compiled through esbuild also sees
// the CommonJS names require, module and exports of its wrapper.
//
// # Modules
//
// js entries (and plain source strings) are ES modules compiled through
// esbuild; cjs entries run as Node wraps them; text gives its string, json
// its parsed value, data an ArrayBuffer of its bytes, each as the default
// export. Modules may import each other, cycles included, and are evaluated
// once per run. A dynamic import() of a name the map lacks rejects with
// ModuleNotFoundError's text, which the program can catch.
//
// # Providers and dispatch
//
// The generated proxy answers every string property but then and toJSON
// with an async tool function (own properties, a prelude's additions, win);
// then, toJSON and symbols answer undefined so a proxy can be returned or
// awaited. Arguments are packed by the dispatch grammar: positionalArgs
// sends the argument list; otherwise the first argument alone (an array
// wrapped in a one-element list, so it is not read as a list), and no
// argument is the empty string. Without a dispatch every call answers
// ToolNotFoundError's text; after the run settled, CompletedText; a call
// past PayloadLimit (provider, tool and arguments as JSON strings) rejects
// with PayloadTooLargeError's text without reaching the host.
//
// # Console
//
// The whole Console Standard namespace exists. log, warn and error are
// captured as LogLines, arguments formatted the way Node's console writes
// them on one line (strings raw, other values inspected) and joined with
// single spaces; every other method is a silent no-op. Each line is charged
// protocol.LogLineWireSize against ConsoleCaptureLimit; the line that meets
// the bound is dropped whole and one warn line with ConsoleCaptureMessage
// takes the place of the rest.
//
// # Event loop and run clock
//
// goja is single-threaded, so the run owns a small loop on Run's goroutine:
// Host calls run on their own goroutines and their answers are queued back;
// promise jobs, queueMicrotask, setTimeout/setInterval callbacks and the
// settlement all run on the loop. The run clock follows the contract's
// table: it stops while the only work in flight is a host call (unless
// CountHostWaits), guest compute counts even while a call is open, and a
// timer delay counts only while no call is open. Past the bound the runtime
// is interrupted and the envelope carries ExecutionTimeoutError's text. A
// run that waits on nothing and never settles runs into the bound too.
// Cancelling ctx interrupts the run; a protocol error given as
// context.Cause(ctx) (MemoryLimitError from a watchdog) becomes the text.
// An exception thrown by a timer or queueMicrotask callback, which nothing
// can catch, ends the run with its message, as it ends a Node process. At
// most MaxConcurrentHostCalls tool calls are at the host at once; later ones
// wait their turn in order (still on a stopped clock).
//
// # Retained handles
//
// RunRetained runs a job like Run. When Job.RetainHandles is set and the
// arrow settles to a fetch handler (a function, or an object whose fetch is
// callable; bootstrap.js checks before serializing), the envelope carries
// no value and Handles [HandleFetch], and the session is handed to a
// *Retained: its loop (the run's, loop.go) goes on running on a goroutine of
// its own, so module state, timers and host calls survive. Retained.Invoke builds a Request
// (webplatform.Platform.Request), calls the handler and reads its settled
// answer back (Platform.Response), one invocation at a time in arrival
// order, each under a fresh run clock of the job's bound with its
// CountHostWaits. A throw, a non-Response answer, an answer past
// PayloadLimit or a request that cannot be a Request rejects that
// invocation (Invocation.HasErr) and the session keeps serving. An
// invocation past its bound, the run's context ending (the worker's memory
// watchdog between invocations) or Close ends the session
// (Invocation.Ended, with the bound's text). After the grant, console
// output and exceptions thrown by timers are discarded, and tool calls get
// CompletedText.
//
// # Hazards closed here
//
// Source maps are never read (parser.WithDisableSourceMaps on every parse
// and on the runtime, for eval and new Function too). MaxCallStackSize
// turns runaway recursion, also through builtins, into StackOverflowText
// instead of a fatal Go stack overflow; goja lets no JavaScript catch it.
// Host functions are plain native functions with their own names, their Go
// panics become plain Errors, and errors they throw carry only text; goja's
// GoError constructor is removed. A runtime is never reused.
//
// goja checks its interrupt between instructions only, so a built-in that
// loops or allocates in one Go call would run past the bound and the memory
// limit. install wraps those built-ins first (guards.go and guards_*.go):
// a result whose size follows from the arguments is asked of the Host's
// MemoryBudget before it is allocated (without one, an allocation larger
// than the job's limit ends the run with the memory text), and a loop past
// guardLoop elements runs in Go, reading what goja's would in the same
// order, and stops at the interrupt (session.halted). What no wrapper
// reaches (syntax such as + and object spread on huge values, a
// backtracking regex, BigInt arithmetic) the worker process around the
// sandbox still bounds.
//
// The web platform (fetch with the outbound setting, Request, Response,
// Headers, URL, AbortController, TextEncoder, crypto, structuredClone and
// the declared absences) comes from backends/local/internal/webplatform, installed
// with the session as its event loop.
package sandbox
