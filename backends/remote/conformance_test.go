package remote_test

import (
	"os"
	"sync"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

func TestMain(m *testing.M) {
	// The local backend behind the test server re-executes this binary as
	// its workers.
	local.RunWorkerIfRequested()
	os.Exit(m.Run())
}

// plainWorker is the worker command of the backend behind the server: the
// gateway binary make test built for the tests (CODEMODE_TEST_GATEWAY), a
// plain build as the gateway ships, or else this test binary. A worker
// with the race detector spent 7-18 s of the suite filling the memory
// case's 128 MB, every byte shadowed; the wire is what this test is
// about, and this side of it keeps the detector.
func plainWorker() []string {
	if bin := os.Getenv("CODEMODE_TEST_GATEWAY"); bin != "" {
		return []string{bin}
	}
	return nil
}

// TestConformanceThroughTheWire runs the executor conformance suite against
// the local backend behind an executor server, through the remote backend:
// the same suite the local backend passes directly. Each case dials its own
// connection to the one server.
func TestConformanceThroughTheWire(t *testing.T) {
	backend, err := local.New(local.Options{MaxWorkers: 2, QueueBound: 64, WorkerCommand: plainWorker()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	url, _ := serve(t, backend, executorapi.ServerOptions{})
	var mu sync.Mutex
	executortest.Run(t, func(t *testing.T) protocol.Executor {
		mu.Lock()
		defer mu.Unlock()
		return dial(t, url)
	})
}
