// Package worker is the worker process's side of the local executor: it
// reads jobs from the parent over package wire's frames, hosts many runs of
// one tenant at once, each in a fresh runtime (package sandbox), lets one
// of them execute JavaScript at a time (the CPU gate, which charges the
// heap each allocates to it and cancels a run past its memory limit), and
// applies the limits and the system-call filter that live inside the
// process. The parent's side is package local; a worker is that same
// binary re-executed, which ServeIfRequested turns into a worker.
package worker
