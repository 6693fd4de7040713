package local

import (
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// usageOfSlot is what run r used, from what its worker's table said when
// the worker died under it.
func (r *run) usageOfSlot(s wire.Slot) *protocol.Usage {
	return &protocol.Usage{
		RunClock:      s.Clock,
		CPU:           s.CPU,
		PeakHeapBytes: s.Peak,
		ToolCalls:     int(r.toolCalls.Load()),
	}
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
