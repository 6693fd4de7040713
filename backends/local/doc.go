// Package local is the in-process executor of the contract: it runs each
// program in a fresh goja runtime (package sandbox) inside a pool of worker
// processes, and enforces every bound from outside the runtime as well as
// inside it.
//
// # Use
//
//	func main() {
//		local.RunWorkerIfRequested() // first line: a worker never returns from it
//		ex, err := local.New(local.Options{PoolSize: 4})
//		...
//		defer ex.Close()
//		res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
//	}
//
// A worker is this same binary re-executed (Options.WorkerCommand names
// another): the pool starts it with a marker in its environment, and
// RunWorkerIfRequested then serves jobs over stdin and stdout and exits
// instead of returning. The two sides speak length-prefixed JSON frames
// (job, host calls and their answers, result); a frame the parent cannot
// read kills that worker. Tool calls and stub-mode outbound requests cross
// the pipe, and the parent calls the request's functions with a context
// that ends with the execution.
//
// # Bounds
//
// Each worker runs one execution at a time, so the process's numbers are
// the execution's numbers. The bounds are layered:
//
//   - run clock: the sandbox's own clock reports the timeout; the parent
//     keeps a copy (while a host call is open it counts only the worker's
//     CPU time) and kills the worker at the deadline plus Options.KillGrace,
//     which stops Go code goja's interrupt cannot reach.
//   - memory: a heap watchdog inside the worker cancels the run with the
//     memory text; RLIMIT_AS refuses one huge allocation (the runtime dies
//     with "out of memory"); debug.SetMemoryLimit keeps RSS near the live
//     heap (below it the worker collects at GOGC=400 unless its environment
//     sets GOGC); the parent polls RSS and kills past the limit. Each reports
//     MemoryLimitError's text.
//   - queue: at most Options.QueueBound executions wait for a worker; the
//     next one fails at once with QUEUE_OVERFLOW.
//
// # Faults
//
// A worker that dies under an execution, or never starts, fails it with
// WORKER_CRASHED (retryable), unless a bound killed it. After Close every
// call fails with CONNECTION_BROKEN, and so do executions Close cut short.
// A cancelled context ends the run and Execute returns the context's cause.
//
// # Execution handles
//
// A request with RetainHandles whose run settles to a fetch handler keeps
// its isolate (sandbox.RunRetained): the result has no value, an
// ExecutionID of 128 random bits and Handles ["fetch"], and the worker is
// pinned to it. InvokeHandle serves invocations one at a time in arrival
// order, each under a fresh bound of the execution's timeout on both
// clocks; a handler's throw, a non-Response answer and another handle name
// (HandleNotFoundError) reject and the handles keep serving. CloseHandles,
// Options.HandlesIdleTimeout, a bound ending an invocation (its text is the
// rejection), the memory limit between invocations (reported to the next
// invocation), a worker crash and Close end them; later calls fail with
// HANDLES_CLOSED. Held handles count against PoolSize, and their worker is
// retired, not reused, when they close.
//
// docs/local-executor.md maps each bound to the layer that enforces it.
package local
