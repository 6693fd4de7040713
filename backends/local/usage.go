package local

import (
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

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
