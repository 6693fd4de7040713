package local

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// processCPU is the CPU time the process has used, user and system, all
// threads. Only one run executes JavaScript at a time, so what it grows
// by while a run holds the gate is that run's, like the heap it allocates.
// It costs a system call (about a microsecond) per gate entry and exit.
func processCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// usageOf is what run r used, from its result and the worker's frame.
func (r *run) usageOf(res *protocol.ExecuteResult, m *wire.Message) *protocol.Usage {
	return &protocol.Usage{
		RunClock:         res.RunClock,
		CPU:              time.Duration(m.CPUNanos),
		PeakHeapBytes:    m.PeakHeap,
		ToolCalls:        int(r.toolCalls.Load()),
		OutboundRequests: res.OutboundRequests,
		LogBytes:         protocol.LogBytesOf(res.Logs),
	}
}
