package local

import (
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// TestConformance runs the executor conformance suite against the pool,
// the same suite backends/remote runs through the wire. Its workers are a
// plain build, as shipped (jsWorkerCommand): under the race detector the
// memory bound's case alone took 9.5 s instead of 1.7 s.
func TestConformance(t *testing.T) {
	ex, err := New(Options{PoolSize: 2, QueueBound: 64, WorkerCommand: jsWorkerCommand(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	executortest.Run(t, func(*testing.T) protocol.Executor { return ex })
}
