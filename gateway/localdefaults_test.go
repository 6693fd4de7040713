package gateway

import (
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway/config"
)

// The configuration checks hold tenant caps against the local backend's
// defaults through config.LocalDefaults, a copy the config package keeps so
// that it need not import the backend: the two must agree on every machine
// size.
func TestConfigKnowsTheLocalBackendsDefaults(t *testing.T) {
	for _, n := range []int{1, 2, 4, 96} {
		c := config.LocalDefaults(n)
		maxWorkers := local.DefaultMaxWorkers(n)
		want := config.LocalSettings{
			MinWorkers:        local.DefaultMinWorkers(n, maxWorkers),
			MaxWorkers:        maxWorkers,
			RunsPerWorker:     local.DefaultRunsPerWorker,
			WorkerMemoryMB:    local.DefaultWorkerMemoryMB,
			MemoryMB:          c.MemoryMB,
			Queue:             local.DefaultQueueBound,
			QueueTimeout:      local.DefaultQueueTimeout,
			WorkerIdleTimeout: local.DefaultWorkerIdleTimeout,
			CPUSlots:          local.DefaultCPUSlots(n, maxWorkers),
		}
		if c != want {
			t.Errorf("%d CPUs: config has %+v, the local backend %+v", n, c, want)
		}
	}
}
