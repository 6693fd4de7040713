package protocol

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestUsageOnTheWire(t *testing.T) {
	r := &ExecuteResult{ResultJSON: "1", Logs: []LogLine{{Level: LogLevelLog, Text: "héllo"}}, Usage: &Usage{
		RunClock: 12345678 * time.Nanosecond, CPU: 2*time.Millisecond + 500*time.Microsecond, PeakHeapBytes: 3 << 20,
		ToolCalls: 2, OutboundRequests: 1, LogBytes: LogBytesOf([]LogLine{{Text: "héllo"}})}}
	b, err := ResultMessageOf(r).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"resultJson":"1","logs":[{"level":"log","text":"héllo"}],"usage":{"runClockMs":12.345,"cpuMs":2.5,"peakHeapBytes":3145728,"toolCalls":2,"outboundRequests":1,"logBytes":6}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var m ExecuteResultMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	u := m.Result().Usage
	if u == nil || *u != (Usage{RunClock: 12345 * time.Microsecond, CPU: 2500 * time.Microsecond, PeakHeapBytes: 3 << 20, ToolCalls: 2, OutboundRequests: 1, LogBytes: 6}) {
		t.Fatalf("read back %+v", u)
	}
	if b, _ := ResultMessageOf(&ExecuteResult{}).MarshalJSON(); string(b) != `{"logs":[]}` {
		t.Fatalf("a result without usage: %s", b)
	}
}

func TestUnreadableUsageIsIgnored(t *testing.T) {
	for _, m := range []*UsageMessage{
		nil,
		{RunClockMs: -1},
		{CPUMs: math.NaN()},
		{CPUMs: math.Inf(1)},
		{RunClockMs: 1e300},
		{ToolCalls: -2},
		{PeakHeapBytes: -1},
	} {
		if u := m.Usage(); u != nil {
			t.Errorf("%+v read as %+v", m, u)
		}
	}
}
