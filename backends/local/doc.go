// Package local is the in-process executor of the contract: it runs each
// program in a fresh goja runtime (package sandbox) inside a pool of worker
// processes, and enforces every bound from outside the runtime as well as
// inside it.
//
// # Use
//
//	func main() {
//		local.RunWorkerIfRequested() // first line: a worker never returns from it
//		ex, err := local.New(local.Options{MaxWorkers: 8})
//		...
//		defer ex.Close()
//		res, err := ex.ExecuteWith(ctx, &protocol.ExecuteRequest{Code: "async () => 1"}, protocol.Policy{Tenant: "acme"})
//	}
//
// A worker is this same binary re-executed (Options.WorkerCommand names
// another): the pool starts it with a marker in its environment, and
// RunWorkerIfRequested then serves jobs over stdin and stdout and exits
// instead of returning. The two sides speak length-prefixed JSON frames
// (jobs, host calls and their answers, results), each about one run; a
// frame the parent cannot read kills that worker. Tool calls and stub-mode
// outbound requests cross the pipe, and the parent calls the request's
// functions with a context that ends with the execution.
//
// # Sharing
//
// Code-mode programs spend most of their life waiting on their tools, so a
// waiting run must not cost a process. A worker process belongs to one
// tenant (Policy.Tenant) and hosts up to Options.RunsPerWorker of
// its executions at once, each in its own fresh runtime; one of them
// executes JavaScript at a time (a CPU gate), so the CPU and heap the
// process spends belong to the run that holds the gate. A tenant holds its
// Share.CPUSlots processes (by default one per CPU but one; while it is the
// group's only tenant it may borrow up to one per CPU, at a lower
// priority); a free
// process goes to the waiting tenant holding none, else to the one that
// used the least run-clock time per weight lately. The pool grows from
// MinWorkers to MaxWorkers and shrinks back when tenants go idle.
//
// # Bounds
//
// Every bound is per run:
//
//   - run clock: the sandbox's own clock reports the timeout, and waiting
//     for the gate never counts on it. The parent reads which run holds a
//     worker's gate, and until when, from a page of memory the two share;
//     past that deadline plus Options.KillGrace it kills the worker, which
//     stops Go code goja's interrupt cannot reach.
//   - memory: the gate charges what a run allocates to it, a collection
//     tells how much of that is live, and past its limit the run alone is
//     cancelled with the memory text. Process-wide layers hold regardless:
//     RLIMIT_AS and a GC target at Options.WorkerMemoryMB, and the parent's
//     RSS poll.
//   - queue: at most Options.QueueBound executions of a tenant wait for
//     room, each at most Options.QueueTimeout; past either the caller gets
//     QUEUE_OVERFLOW with a retry hint.
//
// Only where the process itself must die (Go code past a deadline, an
// allocation the address space refuses) do a run's siblings fail with it,
// with WORKER_CRASHED (retryable) and a text that does not blame them.
//
// # Faults
//
// A worker that dies under an execution, or never starts, fails it with
// WORKER_CRASHED (retryable), unless a bound of the execution's own killed
// it. After Close every call fails with CONNECTION_BROKEN, and so do
// executions Close cut short. A cancelled context ends the run and Execute
// returns the context's cause at once; the run keeps its place until its
// worker let go of it.
//
// # Execution handles
//
// A request with RetainHandles whose run settles to a fetch handler keeps
// its isolate (sandbox.RunRetained) in its worker, beside the worker's
// other runs: the result has no value, an ExecutionID of 128 random bits
// and Handles ["fetch"]. InvokeHandle serves invocations one at a time in
// arrival order, each under a fresh bound of the execution's timeout; a
// handler's throw, a non-Response answer and another handle name
// (HandleNotFoundError) reject and the handles keep serving. CloseHandles,
// Options.HandlesIdleTimeout, a bound ending an invocation (its text is the
// rejection), the memory limit between invocations (reported to the next
// invocation), a worker crash and Close end them; later calls fail with
// HANDLES_CLOSED. A retained execution takes a place in its tenant's worker
// until it closes, and never another tenant's.
//
// docs/local-executor.md maps each bound to the layer that enforces it.
package local
