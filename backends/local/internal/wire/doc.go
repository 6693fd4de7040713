// Package wire is the protocol between the gateway and its worker
// processes: the length-prefixed JSON frames each side writes to the other
// (frame.go), the run table they share, in which a worker says of each run
// it hosts whether it is executing, until when it may, and what it used
// (table*.go), and the
// environment marker that makes a process a worker (WorkerEnv). The
// parent's side is package local, the worker's package worker.
package wire

// WorkerEnv marks a process started by the pool as a worker. An environment
// variable rather than an argument, so that any main (a test binary with its
// own flags included) can serve as the worker command.
const (
	WorkerEnv      = "CODEMODE_LOCAL_WORKER"
	WorkerEnvValue = "v2"
)
