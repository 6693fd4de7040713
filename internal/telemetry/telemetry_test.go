package telemetry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
	"github.com/supolka/codemode-gateway/protocol"
)

func recording(digests bool) (*Tracing, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return &Tracing{provider: tp, tracer: tp.Tracer(ScopeName), digests: digests}, rec
}

const (
	callerTrace = "0af7651916cd43dd8448eb211c80319c"
	callerSpan  = "b7ad6b7169203331"
	traceparent = "00-" + callerTrace + "-" + callerSpan + "-01"
)

func TestOffIsNil(t *testing.T) {
	tr, err := Start(Settings{Endpoint: "http://127.0.0.1:1"})
	if err != nil || tr != nil {
		t.Fatalf("Start of a disabled setting: %v, %v", tr, err)
	}
	ctx := context.Background()
	cctx, span := tr.StartConnection(ctx, http.Header{"Traceparent": {traceparent}})
	if cctx != ctx || span.IsRecording() {
		t.Fatal("an off tracer changed the context or records")
	}
	if _, s := tr.StartCall(ctx, SpanExecute, TraceContext{Parent: traceparent}); s.IsRecording() {
		t.Fatal("an off tracer records an execution")
	}
	if tr.Shutdown(ctx) != nil || tr.Enabled() || tr.Digests() {
		t.Fatal("a nil Tracing is not off")
	}
}

func TestOTELSDKDisabledWins(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if tr, err := Start(Settings{Enabled: true}); tr != nil || err != nil {
		t.Fatalf("OTEL_SDK_DISABLED=true still started tracing: %v %v", tr, err)
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":           "http://127.0.0.1:4318/v1/traces",
		"https://collector.example:4318/": "https://collector.example:4318/v1/traces",
		"http://127.0.0.1:4318/custom/tr": "http://127.0.0.1:4318/custom/tr",
	} {
		if got, err := EndpointURL(in); err != nil || got != want {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"collector:4318":                 `tracing: endpoint "collector:4318" is not an http:// or https:// URL`,
		"http://user:pw@collector:4318/": "tracing: the endpoint must carry no credentials, query or fragment; send credentials as headers",
		"http://collector:4318/?k=v":     "tracing: the endpoint must carry no credentials, query or fragment; send credentials as headers",
	} {
		if _, err := EndpointURL(in); err == nil || err.Error() != want {
			t.Errorf("EndpointURL(%q) failed with %v, want %q", in, err, want)
		}
	}
}

// TestCallParents checks where an execution's span goes: under the call's
// own context, else under a connection that joined a caller's trace, else
// a root linked to its connection.
func TestCallParents(t *testing.T) {
	tr, rec := recording(false)
	ctx := context.Background()

	plain, conn := tr.StartConnection(ctx, http.Header{})
	_, own := tr.StartCall(plain, SpanExecute, TraceContext{})
	own.End()
	_, viaOptions := tr.StartCall(plain, SpanExecute, TraceContext{Parent: traceparent, State: "k=v"})
	viaOptions.End()
	_, malformed := tr.StartCall(plain, SpanExecute, TraceContext{Parent: "00-nonsense"})
	malformed.End()
	conn.End()

	joinedCtx, joinedConn := tr.StartConnection(ctx, http.Header{"Traceparent": {traceparent}})
	_, underConn := tr.StartCall(joinedCtx, SpanInvokeHandle, TraceContext{})
	underConn.End()
	joinedConn.End()

	sc := func(s trace.Span) trace.SpanContext { return s.SpanContext() }
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID()] = s
	}
	o := byID[sc(own).SpanID()]
	if o.Parent().IsValid() || len(o.Links()) != 1 || o.Links()[0].SpanContext.SpanID() != sc(conn).SpanID() || sc(own).TraceID() == sc(conn).TraceID() {
		t.Errorf("an execution without any context: parent %v, links %v", o.Parent(), o.Links())
	}
	v := byID[sc(viaOptions).SpanID()]
	if v.Parent().TraceID().String() != callerTrace || v.Parent().SpanID().String() != callerSpan || !v.Parent().IsRemote() || v.Parent().TraceState().String() != "k=v" {
		t.Errorf("an execution with a traceparent: parent %v", v.Parent())
	}
	if m := byID[sc(malformed).SpanID()]; m.Parent().IsValid() {
		t.Errorf("a malformed traceparent was followed: %v", m.Parent())
	}
	jc := byID[sc(joinedConn).SpanID()]
	if jc.Parent().SpanID().String() != callerSpan || jc.SpanKind() != trace.SpanKindServer {
		t.Errorf("a connection with a traceparent upgrade: parent %v", jc.Parent())
	}
	if u := byID[sc(underConn).SpanID()]; u.Parent().SpanID() != sc(joinedConn).SpanID() || u.Name() != SpanInvokeHandle {
		t.Errorf("a call on a joined connection: parent %v", u.Parent())
	}
}

func TestOutgoing(t *testing.T) {
	if tc := Outgoing(context.Background()); tc != (TraceContext{}) {
		t.Fatalf("a context without a span sends %+v", tc)
	}
	tr, _ := recording(false)
	ctx, span := tr.StartCall(context.Background(), SpanExecute, TraceContext{Parent: traceparent, State: "k=v"})
	defer span.End()
	tc := Outgoing(ctx)
	want := "00-" + callerTrace + "-" + span.SpanContext().SpanID().String() + "-01"
	if tc.Parent != want || tc.State != "k=v" {
		t.Fatalf("Outgoing = %+v, want parent %s and state k=v", tc, want)
	}
}

func TestToolCallAndOutboundAttributes(t *testing.T) {
	tr, rec := recording(true)
	ctx, exec := tr.StartCall(context.Background(), SpanExecute, TraceContext{})
	_, call := tr.StartToolCall(context.Background(), exec, "vault", "read", `["secret"]`)
	call.End(` { "error": {"message": "no"}}`, nil)
	_, failed := tr.StartToolCall(ctx, exec, "vault", "read", `[]`)
	failed.End("", protocol.NewFault(protocol.CodeConnectionBroken, "gone"))
	_, out := tr.StartOutbound(ctx, exec, "POST", "https://api.example.test:8443/a/b?token=secret#frag")
	out.End(503, nil)
	exec.End()

	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.String()
		}
		delete(m, string(DurationMs))
		return m
	}
	for i, want := range []map[string]string{
		{"codemode.tool.provider": "vault", "codemode.tool.name": "read", "codemode.tool.result": "error",
			"codemode.tool.args_bytes": "10", "codemode.tool.args_sha256": "7ed6936249ddb5c87cc52acf02d9c1fe7ea39bf6cf31c3dedee02ec26dfc7b92",
			"codemode.tool.result_bytes": "30", "codemode.tool.result_sha256": "ec6be2999cda8329789476db9d364b90496134496aeab32f7cbc54405017b9ec"},
		{"codemode.tool.provider": "vault", "codemode.tool.name": "read", "codemode.tool.result": "CONNECTION_BROKEN",
			"codemode.tool.args_bytes": "2", "codemode.tool.args_sha256": "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
		{"http.request.method": "POST", "codemode.outbound.mode": "stub", "url.scheme": "https", "server.address": "api.example.test", "http.response.status_code": "503"},
	} {
		got := attrs(spans[i])
		if len(got) != len(want) {
			t.Errorf("span %d (%s): %v, want %v", i, spans[i].Name(), got, want)
			continue
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %d (%s) %s = %q, want %q", i, spans[i].Name(), k, got[k], v)
			}
		}
		if spans[i].Parent().SpanID() != exec.SpanContext().SpanID() {
			t.Errorf("span %d is not the execution's child", i)
		}
	}
	if spans[1].Status().Description != "CONNECTION_BROKEN" {
		t.Errorf("a failed tool call's status: %+v", spans[1].Status())
	}
}

func TestErrorKind(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                     "",
		context.Canceled:                        "cancelled",
		context.DeadlineExceeded:                "deadline",
		errors.New("anything the caller wrote"): "error",
		protocol.NewFault(protocol.CodeQueueOverflow, "x"): "QUEUE_OVERFLOW",
	} {
		if got := ErrorKind(err); got != want {
			t.Errorf("ErrorKind(%v) = %q, want %q", err, got, want)
		}
	}
}

func TestEnvelopeKind(t *testing.T) {
	for in, want := range map[string]string{`{"result":1}`: "result", "\n{ \"error\" : {}}": "error", `[1]`: "other", ``: "other", `{"x":1}`: "other"} {
		if got := envelopeKind(in); got != want {
			t.Errorf("envelopeKind(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzTraceContext: whatever a caller puts in traceparent and tracestate,
// an execution's span starts, and follows the context only when it is a
// valid one.
func FuzzTraceContext(f *testing.F) {
	f.Add(traceparent, "k=v")
	f.Add("00-00000000000000000000000000000000-b7ad6b7169203331-01", "")
	f.Add("ff-"+callerTrace+"-"+callerSpan+"-01", "a=b,c=d")
	f.Add("00-"+callerTrace+"-"+callerSpan+"-01-extra", "=,=")
	tr, _ := recording(false)
	f.Fuzz(func(t *testing.T, parent, state string) {
		tc := TraceContext{Parent: parent, State: state}
		_, span := tr.StartCall(context.Background(), SpanExecute, tc)
		defer span.End()
		got := span.SpanContext().TraceID().String()
		if sc := tc.spanContext(); sc.IsValid() != strings.Contains(parent, got) {
			t.Fatalf("traceparent %q (valid: %v) gave a span in trace %s", parent, sc.IsValid(), got)
		}
	})
}

// BenchmarkOff is what tracing costs an execution with one tool call and
// one outbound request when it is off: no allocation, a few nil checks.
func BenchmarkOff(b *testing.B) { benchExecution(b, nil) }

// BenchmarkOn is the same with tracing on and every span sampled, for
// comparison.
func BenchmarkOn(b *testing.B) {
	tr, _ := recording(false)
	benchExecution(b, tr)
}

// benchExecution makes the spans of one execution as the gateway does.
func benchExecution(b *testing.B, tr *Tracing) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		cctx, span := tr.StartCall(ctx, SpanExecute, TraceContext{Parent: traceparent})
		_, call := tr.StartToolCall(cctx, span, "p", "t", "[]")
		call.End(`{"result":1}`, nil)
		_, out := tr.StartOutbound(cctx, span, "GET", "https://example.test/")
		out.End(200, nil)
		if Recording(cctx) {
			Execution(cctx, Tenant.String("t"))
		}
		EndCall(span, nil)
	}
}

func TestNativeRequestsAreSpansAtTheirOwnTimes(t *testing.T) {
	tr, rec := recording(false)
	ctx, exec := tr.StartCall(context.Background(), SpanExecute, TraceContext{})
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	NativeRequests(ctx, []protocol.NativeRequest{
		{Method: "GET", Host: "api.example.test", Status: 200, Start: start, Duration: 40 * time.Millisecond},
		{Method: "PUT", Host: "down.example.test", Start: start.Add(time.Second), Duration: time.Millisecond},
	})
	NativeRequests(context.Background(), []protocol.NativeRequest{{Method: "GET"}}) // no execution: nothing
	exec.End()
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, want := range []struct {
		method, host, status, statusText string
		start                            time.Time
		took                             time.Duration
	}{{"GET", "api.example.test", "200", "", start, 40 * time.Millisecond}, {"PUT", "down.example.test", "", "failed", start.Add(time.Second), time.Millisecond}} {
		s := spans[i]
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		if s.Name() != SpanOutbound || s.Parent().SpanID() != exec.SpanContext().SpanID() || got["http.request.method"] != want.method ||
			got["server.address"] != want.host || got["http.response.status_code"] != want.status || got["codemode.outbound.mode"] != "native" ||
			s.Status().Description != want.statusText || !s.StartTime().Equal(want.start) || s.EndTime().Sub(s.StartTime()) != want.took {
			t.Errorf("span %d: %s %v %+v %v–%v", i, s.Name(), got, s.Status(), s.StartTime(), s.EndTime())
		}
	}
}

// TestExportsOverHTTPAndGRPC: Start's provider reaches a collector over
// either OTLP transport, and Shutdown flushes what it holds.
func TestExportsOverHTTPAndGRPC(t *testing.T) {
	for _, protocol := range []string{ProtocolHTTP, ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			rcv := otlptest.Start()
			if protocol == ProtocolGRPC {
				var err error
				if rcv, err = otlptest.StartGRPC(); err != nil {
					t.Fatal(err)
				}
			}
			defer rcv.Close()
			// The protocol from the standard variable, as the executor
			// server takes it.
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", protocol)
			tr, err := Start(Settings{Enabled: true, Endpoint: rcv.URL(), ServiceName: "svc-" + protocol, Version: "v9.9.9",
				Headers: map[string]string{"X-Collector-Token": "t"}})
			if err != nil {
				t.Fatal(err)
			}
			_, span := tr.StartCall(context.Background(), SpanExecute, TraceContext{Parent: traceparent})
			span.End()
			if err := tr.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := rcv.Spans()
			if len(spans) != 1 || spans[0].Name != SpanExecute || spans[0].Service != "svc-"+protocol || spans[0].TraceID() != callerTrace || spans[0].ParentID() != callerSpan {
				t.Fatalf("received %v", spans)
			}
		})
	}
	if _, err := Start(Settings{Enabled: true, Protocol: "thrift"}); err == nil || err.Error() != `tracing: "thrift" is not an OTLP protocol this gateway speaks; use http/protobuf or grpc` {
		t.Fatalf("an unknown protocol: %v", err)
	}
}
