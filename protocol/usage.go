package protocol

import (
	"math"
	"time"
)

// Usage is what one execution used, for a platform that bills or budgets
// its own users. An executor fills what it measures; the rest stays zero.
type Usage struct {
	// RunClock is the time on the run clock (host waits excluded unless
	// countHostWaits).
	RunClock time.Duration
	// CPU is the CPU time the executor's process spent while the run held
	// it: in the local backend, the worker process's CPU time while the run
	// executed JavaScript, the garbage collector's share included.
	CPU time.Duration
	// PeakHeapBytes is the largest heap the run was charged, as its memory
	// limit is enforced: what it allocated since the last collection
	// counts until a collection finds it dead, so it bounds the live peak
	// from above.
	PeakHeapBytes int64
	// ToolCalls counts the calls the program made to its tools.
	ToolCalls int
	// OutboundRequests counts the requests the program sent with fetch.
	OutboundRequests int
	// LogBytes counts the bytes of console text captured.
	LogBytes int
}

// UsageMessage is Usage on the wire: the optional usage member of an
// ExecuteResultMessage, an extension of the contract that other clients
// ignore. Durations are milliseconds, to the microsecond.
type UsageMessage struct {
	RunClockMs       float64 `json:"runClockMs"`
	CPUMs            float64 `json:"cpuMs"`
	PeakHeapBytes    int64   `json:"peakHeapBytes"`
	ToolCalls        int     `json:"toolCalls"`
	OutboundRequests int     `json:"outboundRequests"`
	LogBytes         int     `json:"logBytes"`
}

// Message is u on the wire.
func (u *Usage) Message() *UsageMessage {
	return &UsageMessage{RunClockMs: wireMs(u.RunClock), CPUMs: wireMs(u.CPU), PeakHeapBytes: u.PeakHeapBytes,
		ToolCalls: u.ToolCalls, OutboundRequests: u.OutboundRequests, LogBytes: u.LogBytes}
}

// Usage is the Usage m carries; nil when a member is negative, not a
// number, or too large for its type: another server's usage that this
// side cannot read is ignored, not an error.
func (m *UsageMessage) Usage() *Usage {
	ok := func(v float64) bool { return v >= 0 && v <= maxUsageMs }
	if m == nil || !ok(m.RunClockMs) || !ok(m.CPUMs) || m.PeakHeapBytes < 0 || m.ToolCalls < 0 || m.OutboundRequests < 0 || m.LogBytes < 0 {
		return nil
	}
	return &Usage{RunClock: fromWireMs(m.RunClockMs), CPU: fromWireMs(m.CPUMs), PeakHeapBytes: m.PeakHeapBytes,
		ToolCalls: m.ToolCalls, OutboundRequests: m.OutboundRequests, LogBytes: m.LogBytes}
}

// maxUsageMs is the longest duration a Usage holds (a time.Duration's
// range), in milliseconds.
const maxUsageMs = float64(math.MaxInt64 / int64(time.Millisecond))

func wireMs(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fromWireMs(ms float64) time.Duration {
	return time.Duration(math.Round(ms*1000)) * time.Microsecond
}

// LogBytesOf counts the console text of logs.
func LogBytesOf(logs []LogLine) int {
	n := 0
	for _, l := range logs {
		n += len(l.Text)
	}
	return n
}
