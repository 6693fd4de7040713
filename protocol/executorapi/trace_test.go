package executorapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

func TestTraceContextOptions(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tc, err := traceContextOf("execute", jsvalue.Object{{Key: "timeout", Value: 5.0}, {Key: "traceparent", Value: tp}, {Key: "tracestate", Value: "k=v"}})
	if err != nil || tc != (telemetry.TraceContext{Parent: tp, State: "k=v"}) {
		t.Fatalf("traceContextOf = %+v, %v", tc, err)
	}
	for _, opts := range []any{nil, jsvalue.Undefined, "not an object", map[string]any{}} {
		if tc, err := traceContextOf("execute", opts); err != nil || tc != (telemetry.TraceContext{}) {
			t.Errorf("traceContextOf(%#v) = %+v, %v; want nothing", opts, tc, err)
		}
	}
	for key, want := range map[string]string{
		"traceparent": "TypeError: execute: options.traceparent must be a string",
		"tracestate":  "TypeError: execute: options.tracestate must be a string",
	} {
		_, err := traceContextOf("execute", map[string]any{key: 1.0})
		if err == nil || err.Error() != want {
			t.Errorf("a numeric %s: %v, want %q", key, err, want)
		}
	}
}

// invokeHandle's optional fourth argument: absent or null is no context;
// anything but an object, or a member that is not a string, is a TypeError.
func TestInvokeHandleOptions(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tc, err := invokeOptionsOf(jsvalue.Object{{Key: "traceparent", Value: tp}, {Key: "tracestate", Value: "k=v"}, {Key: "other", Value: 1.0}})
	if err != nil || tc != (telemetry.TraceContext{Parent: tp, State: "k=v"}) {
		t.Fatalf("invokeOptionsOf = %+v, %v", tc, err)
	}
	for _, opts := range []any{nil, jsvalue.Undefined, map[string]any{}} {
		if tc, err := invokeOptionsOf(opts); err != nil || tc != (telemetry.TraceContext{}) {
			t.Errorf("invokeOptionsOf(%#v) = %+v, %v; want nothing", opts, tc, err)
		}
	}
	for _, opts := range []any{"options", 1.0, true, []any{}} {
		if _, err := invokeOptionsOf(opts); err == nil || err.Error() != "TypeError: invokeHandle: options must be an object" {
			t.Errorf("invokeOptionsOf(%#v): %v", opts, err)
		}
	}
	for key, want := range map[string]string{
		"traceparent": "TypeError: invokeHandle: options.traceparent must be a string",
		"tracestate":  "TypeError: invokeHandle: options.tracestate must be a string",
	} {
		if _, err := invokeOptionsOf(map[string]any{key: 1.0}); err == nil || err.Error() != want {
			t.Errorf("a numeric %s: %v, want %q", key, err, want)
		}
	}
}

// invocationRecorder answers every invocation and reports the span it ran
// under.
type invocationRecorder struct {
	spans chan sdktrace.ReadOnlySpan
}

func (*invocationRecorder) Execute(context.Context, *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return &protocol.ExecuteResult{ResultJSON: "1"}, nil
}
func (r *invocationRecorder) InvokeHandle(ctx context.Context, _, _ string, _ protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	span, _ := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan)
	r.spans <- span
	return protocol.OutboundResponse{Status: 204}, nil
}
func (*invocationRecorder) CloseHandles(context.Context, string) error { return nil }
func (*invocationRecorder) Close() error                               { return nil }

// Over the wire: the client sends ctx's trace context as invokeHandle's
// fourth argument, and the server makes the invocation's span its child;
// the server takes three arguments, or a null fourth, as well, and refuses
// a fourth that is not an object.
func TestInvokeHandleCarriesTheCallersContext(t *testing.T) {
	rcv := otlptest.Start()
	defer rcv.Close()
	tr, err := telemetry.Start(telemetry.Settings{Enabled: true, Endpoint: rcv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	ex := &invocationRecorder{spans: make(chan sdktrace.ReadOnlySpan, 1)}
	srv := NewServer(ex, ServerOptions{Tracing: tr})
	ctx, client := connect(t, srv)
	invoke := func(ctx context.Context) sdktrace.ReadOnlySpan {
		t.Helper()
		resp, err := client.InvokeHandle(ctx, "e1", "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
		if err != nil || resp.Status != 204 {
			t.Fatalf("invokeHandle: %+v, %v", resp, err)
		}
		span := <-ex.spans
		if span == nil || span.Name() != telemetry.SpanInvokeHandle {
			t.Fatalf("the invocation ran under %v, not its span", span)
		}
		return span
	}

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	span := invoke(trace.ContextWithSpanContext(ctx, caller))
	if span.SpanContext().TraceID() != tid || span.Parent().SpanID() != sid {
		t.Fatalf("the invocation's span is in trace %s under %s, want %s under %s", span.SpanContext().TraceID(), span.Parent().SpanID(), tid, sid)
	}
	// No context: three arguments, and a trace of the invocation's own.
	if span := invoke(ctx); span.Parent().IsValid() || span.SpanContext().TraceID() == tid {
		t.Fatalf("an invocation without a context joined %s under %s", span.SpanContext().TraceID(), span.Parent().SpanID())
	}

	call := func(opts any) error {
		_, err := client.main.Call(ctx, "invokeHandle", "e1", "fetch", requestToWire(protocol.OutboundRequest{Method: "GET", URL: "/"}), opts)
		return err
	}
	if err := call(nil); err != nil {
		t.Fatalf("a null fourth argument: %v", err)
	}
	if span := <-ex.spans; span.Parent().IsValid() {
		t.Fatalf("a null fourth argument gave the invocation a parent %s", span.Parent().SpanID())
	}
	for opts, want := range map[any]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "TypeError: invokeHandle: options must be an object",
		5.0: "TypeError: invokeHandle: options must be an object",
	} {
		if err := call(opts); err == nil || err.Error() != want {
			t.Errorf("a fourth argument %#v: %v, want %q", opts, err, want)
		}
	}
	if err := call(jsvalue.Object{{Key: "traceparent", Value: 1.0}}); err == nil || err.Error() != "TypeError: invokeHandle: options.traceparent must be a string" {
		t.Errorf("a numeric traceparent: %v", err)
	}
	select {
	case span := <-ex.spans:
		t.Fatalf("a refused invocation reached the executor under %v", span)
	default:
	}
}

func TestClientSendsTheCallersContext(t *testing.T) {
	if o := withTraceContext(context.Background(), jsvalue.Object{}); len(o) != 0 {
		t.Fatalf("a context without a span added %v", o)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	o := withTraceContext(ctx, jsvalue.Object{{Key: "timeout", Value: 5.0}})
	want := jsvalue.Object{{Key: "timeout", Value: 5.0}, {Key: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if len(o) != len(want) || o[0] != want[0] || o[1] != want[1] {
		t.Fatalf("options %v, want %v", o, want)
	}
}

func TestUsageCrossesTheWire(t *testing.T) {
	u := &protocol.Usage{RunClock: 1500 * time.Microsecond, CPU: 2 * time.Millisecond, PeakHeapBytes: 4096, ToolCalls: 3, OutboundRequests: 1, LogBytes: 9}
	wire := protocol.ResultMessageOf(&protocol.ExecuteResult{ResultJSON: "1", Usage: u}).Object()
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
