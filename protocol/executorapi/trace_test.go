package executorapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/capnweb"
)

func TestTraceContextOptions(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tc, err := traceContextOf(capnweb.Object{{Key: "timeout", Value: 5.0}, {Key: "traceparent", Value: tp}, {Key: "tracestate", Value: "k=v"}})
	if err != nil || tc != (telemetry.TraceContext{Parent: tp, State: "k=v"}) {
		t.Fatalf("traceContextOf = %+v, %v", tc, err)
	}
	for _, opts := range []any{nil, capnweb.Undefined, "not an object", map[string]any{}} {
		if tc, err := traceContextOf(opts); err != nil || tc != (telemetry.TraceContext{}) {
			t.Errorf("traceContextOf(%#v) = %+v, %v; want nothing", opts, tc, err)
		}
	}
	for key, want := range map[string]string{
		"traceparent": "TypeError: execute: options.traceparent must be a string",
		"tracestate":  "TypeError: execute: options.tracestate must be a string",
	} {
		_, err := traceContextOf(map[string]any{key: 1.0})
		if err == nil || err.Error() != want {
			t.Errorf("a numeric %s: %v, want %q", key, err, want)
		}
	}
}

func TestClientSendsTheCallersContext(t *testing.T) {
	if o := withTraceContext(context.Background(), capnweb.Object{}); len(o) != 0 {
		t.Fatalf("a context without a span added %v", o)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	o := withTraceContext(ctx, capnweb.Object{{Key: "timeout", Value: 5.0}})
	want := capnweb.Object{{Key: "timeout", Value: 5.0}, {Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if len(o) != len(want) || o[0] != want[0] || o[1] != want[1] {
		t.Fatalf("options %v, want %v", o, want)
	}
}

func TestUsageCrossesTheWire(t *testing.T) {
	u := &protocol.Usage{RunClock: 1500 * time.Microsecond, CPU: 2 * time.Millisecond, PeakHeapBytes: 4096, ToolCalls: 3, OutboundRequests: 1, LogBytes: 9}
	wire := resultToWire(protocol.ResultMessageOf(&protocol.ExecuteResult{ResultJSON: "1", Usage: u}))
	if got := fmt.Sprint(wire); got != "[{resultJson 1} {logs []} {usage [{runClockMs 1.5} {cpuMs 2} {peakHeapBytes 4096} {toolCalls 3} {outboundRequests 1} {logBytes 9}]}]" {
		t.Fatalf("on the wire: %s", got)
	}
	res, err := resultFromWire(wire)
	if err != nil || res.Usage == nil || *res.Usage != *u {
		t.Fatalf("read back %+v, %v", res.Usage, err)
	}
	good := map[string]any{"runClockMs": 1.0, "cpuMs": 1.0, "peakHeapBytes": 1.0, "toolCalls": 1.0, "outboundRequests": 1.0, "logBytes": 1.0}
	for name, change := range map[string]func(map[string]any){
		"not an object":    nil,
		"a member missing": func(m map[string]any) { delete(m, "logBytes") },
		"a string":         func(m map[string]any) { m["toolCalls"] = "3" },
		"a fraction":       func(m map[string]any) { m["toolCalls"] = 1.5 },
		"negative":         func(m map[string]any) { m["cpuMs"] = -1.0 },
		"past 2^53":        func(m map[string]any) { m["peakHeapBytes"] = 1e300 },
	} {
		var v any = "usage"
		if change != nil {
			m := map[string]any{}
			for k, x := range good {
				m[k] = x
			}
			change(m)
			v = m
		}
		res, err := resultFromWire(map[string]any{"logs": []any{}, "usage": v})
		if err != nil || res.Usage != nil {
			t.Errorf("%s: usage %+v, error %v; want it ignored", name, res.Usage, err)
		}
	}
}
