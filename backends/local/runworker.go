package local

import inworker "github.com/supolka/codemode-gateway/backends/local/internal/worker"

// RunWorkerIfRequested turns the process into a pool worker when the pool
// started it as one: it serves jobs on stdin and stdout until the parent
// closes stdin, then exits. In any other process it returns at once. A main
// that embeds this package calls it first, before flags or logging are set
// up, so that the re-executed binary becomes a worker and nothing else.
func RunWorkerIfRequested() { inworker.ServeIfRequested(nil) }
