package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// Texts the programs, tools and credentials of TestTracesAcrossGatewayAndExecutorServer
// carry; none may reach the collector.
const (
	programSecret = "PROGRAM-SECRET-3141"
	argsSecret    = "ARGS-SECRET-2718"
	resultSecret  = "RESULT-SECRET-1618"
	querySecret   = "QUERY-SECRET-1414"
)

var tracedProgram = protocol.ExecuteRequest{
	Code: `async () => {
		const kept = "` + programSecret + `"
		const got = await vault.read("` + argsSecret + `")
		const resp = await fetch("https://api.example.test/v1/items?token=` + querySecret + `")
		return { got, status: resp.status, n: kept.length }
	}`,
	Providers: []protocol.ProviderDescriptor{{Name: "vault", Tools: []string{"read"}}},
}

func tracedRequest() *protocol.ExecuteRequest {
	r := tracedProgram
	r.Dispatch = func(context.Context, string, string, string) (string, error) {
		return `{"result":"` + resultSecret + `"}`, nil
	}
	r.Outbound = protocol.OutboundVia(func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 201, Body: []byte("{}")}, nil
	})
	return &r
}

// callerContext is a span context of the caller's own trace, as a tenant's
// application instrumented with OpenTelemetry has one.
func callerContext(t *testing.T, trace16, span8 string) trace.SpanContext {
	tid, err1 := trace.TraceIDFromHex(trace16)
	sid, err2 := trace.SpanIDFromHex(span8)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

// TestTracesAcrossGatewayAndExecutorServer runs the gateway and an executor
// server as processes exporting to an OTLP receiver in the test, and
// checks the traces they send: one per execution, tool calls and outbound
// requests under their execution, the executor server's spans under the
// gateway's, the caller's context honoured from the call options and from
// the upgrade, and no program text, tool argument or result, query string
// or credential in any attribute.
func TestTracesAcrossGatewayAndExecutorServer(t *testing.T) {
	rcv, gw, keys, memberKey := tracedGatewayAndServer(t, "beta")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(key string, h http.Header) *remote.Executor { return dialExecutor(t, ctx, gw.url, key, h) }
	run := func(ex *remote.Executor, ctx context.Context) {
		res, err := ex.Execute(ctx, tracedRequest())
		if err != nil || res.HasError || res.ResultJSON != `{"got":"`+resultSecret+`","status":201,"n":19}` {
			t.Fatalf("the traced program: %+v, %v", res, err)
		}
	}

	// beta, two hops: the caller's context travels in the call options.
	beta := dial(keys["beta"], nil)
	caller := callerContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
	run(beta, trace.ContextWithSpanContext(ctx, caller))
	// beta again, with no context at all: a trace of its own.
	run(beta, ctx)
	beta.Close()
	// alpha, one hop: the caller's context came with the upgrade.
	upgrade := callerContext(t, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	alpha := dial(keys["alpha"], http.Header{"Traceparent": {"00-" + upgrade.TraceID().String() + "-" + upgrade.SpanID().String() + "-01"}})
	run(alpha, ctx)
	alpha.Close()

	// Every execution's trace: 3 gateway executions, 2 on the executor
	// server; each with a tool call and an outbound request on the side
	// that saw them; and 2 gateway connections, each span ended at close.
	want := map[string]int{"gateway codemode.execute": 3, "server codemode.execute": 2, "gateway codemode.tool_call": 3,
		"server codemode.tool_call": 2, "gateway codemode.outbound": 3, "server codemode.outbound": 2, "gateway codemode.connection": 2}
	var spans []otlptest.Span
	testutil.WaitFor(t, 15*time.Second, func() bool {
		spans = rcv.Spans()
		got := map[string]int{}
		for _, s := range spans {
			got[side(s)+" "+s.Name]++
		}
		for k, n := range want {
			if got[k] < n {
				return false
			}
		}
		return true
	}, "every span at the receiver")

	byID := map[string]otlptest.Span{}
	for _, s := range spans {
		byID[s.ID()] = s
	}
	children := func(parent otlptest.Span, side, name string) []otlptest.Span {
		var out []otlptest.Span
		for _, s := range spans {
			if s.ParentID() == parent.ID() && s.TraceID() == parent.TraceID() && s.Service == service(side) && s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	one := func(list []otlptest.Span, what string) otlptest.Span {
		t.Helper()
		if len(list) != 1 {
			t.Fatalf("%s: %d spans, want 1", what, len(list))
		}
		return list[0]
	}
	executions := map[string][]otlptest.Span{}
	for _, s := range spans {
		if s.Name == "codemode.execute" && s.Service == service("gateway") {
			executions[s.Attr("codemode.tenant")] = append(executions[s.Attr("codemode.tenant")], s)
		}
	}
	if len(executions["beta"]) != 2 || len(executions["alpha"]) != 1 {
		t.Fatalf("gateway executions by tenant: %v", executions)
	}

	// The first beta execution: a child of the caller's span, in its trace.
	joined, own := inTraceAndNot(executions["beta"], caller.TraceID())
	if joined.Span == nil || joined.ParentID() != caller.SpanID().String() {
		t.Fatalf("no gateway execution is the child of the caller's span %s", caller.SpanID())
	}
	for k, v := range map[string]string{"codemode.tenant": "beta", "codemode.backend": "far", "codemode.member": "far/0", "codemode.outcome": "ok"} {
		if got := joined.Attr(k); got != v {
			t.Errorf("gateway execution %s = %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"codemode.bytes_in", "codemode.bytes_out"} {
		if joined.Attr(k) == "" || joined.Attr(k) == "0" {
			t.Errorf("gateway execution has no %s", k)
		}
	}
	tool := one(children(joined, "gateway", "codemode.tool_call"), "the gateway's tool call under its execution")
	if tool.Attr("codemode.tool.provider") != "vault" || tool.Attr("codemode.tool.name") != "read" || tool.Attr("codemode.tool.result") != "result" || tool.Attr("codemode.duration_ms") == "" {
		t.Errorf("tool call attributes: %v", tool.Attributes)
	}
	out := one(children(joined, "gateway", "codemode.outbound"), "the gateway's outbound request under its execution")
	if out.Attr("http.request.method") != "GET" || out.Attr("server.address") != "api.example.test" || out.Attr("url.path") != "" || out.Attr("http.response.status_code") != "201" {
		t.Errorf("outbound attributes: %v", out.Attributes)
	}
	// The executor server's execution joins the same trace, under the
	// gateway's, with its own tool call and outbound request.
	far := one(children(joined, "server", "codemode.execute"), "the executor server's execution under the gateway's")
	one(children(far, "server", "codemode.tool_call"), "the executor server's tool call")
	one(children(far, "server", "codemode.outbound"), "the executor server's outbound request")
	if far.Attr("codemode.run_clock_ms") == "" || far.Attr("codemode.queue_wait_ms") == "" {
		t.Errorf("the executor server's execution lacks its run clock or queue wait: %v", far.Attributes)
	}

	// The second beta execution: a trace of its own, linked to its
	// connection, holding only its own spans.
	if own.Span == nil || own.ParentID() != "" {
		t.Fatalf("the execution without a context is not a root: %+v", own.Span)
	}
	if len(own.Links) != 1 || byID[hex.EncodeToString(own.Links[0].SpanId)].Name != "codemode.connection" {
		t.Errorf("the root execution is not linked to its connection: %v", own.Links)
	}
	inTrace := map[string]int{}
	for _, s := range spans {
		if s.TraceID() == own.TraceID() {
			inTrace[side(s)+" "+s.Name]++
		}
	}
	if fmt.Sprint(inTrace) != "map[gateway codemode.execute:1 gateway codemode.outbound:1 gateway codemode.tool_call:1 server codemode.execute:1 server codemode.outbound:1 server codemode.tool_call:1]" {
		t.Errorf("the second execution's trace holds %v", inTrace)
	}

	// alpha: the connection is the child of the upgrade's context, and its
	// execution the connection's child.
	a := executions["alpha"][0]
	conn := byID[a.ParentID()]
	if conn.Name != "codemode.connection" || conn.ParentID() != upgrade.SpanID().String() || a.TraceID() != upgrade.TraceID().String() {
		t.Fatalf("alpha's execution %s is not under a connection span under the upgrade's context: parent %+v", a.ID(), conn.Span)
	}
	if a.Attr("codemode.backend") != "local" || a.Attr("codemode.queue_wait_ms") == "" || a.Attr("codemode.run_clock_ms") == "" {
		t.Errorf("alpha's execution attributes: %v", a.Attributes)
	}
	one(children(a, "gateway", "codemode.tool_call"), "alpha's tool call")

	for _, text := range rcv.Texts() {
		for _, secret := range []string{programSecret, argsSecret, resultSecret, querySecret, "token=", memberKey, keys["alpha"], keys["beta"], "vault.read"} {
			if strings.Contains(text, secret) {
				t.Errorf("the collector received %q, which holds %q", text, secret)
			}
		}
	}
}

// TestHandleInvocationsJoinTheTraceAcrossServers: an invocation of a
// retained execution's handle through a remote group is a span on the
// gateway (the caller's child when the call carries a context) and a span
// on the executor server under it, in the same trace, because the gateway
// sends its context as invokeHandle's fourth argument.
func TestHandleInvocationsJoinTheTraceAcrossServers(t *testing.T) {
	rcv, gw, keys, _ := tracedGatewayAndServer(t, "beta")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex := dialExecutor(t, ctx, gw.url, keys["beta"], nil)
	grant, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => (req) => new Response("seen " + req.method)`, RetainHandles: true})
	if err != nil || grant.ExecutionID == "" {
		t.Fatalf("the retained execution: %+v, %v", grant, err)
	}
	invoke := func(ctx context.Context) {
		t.Helper()
		resp, err := ex.InvokeHandle(ctx, grant.ExecutionID, "fetch", protocol.OutboundRequest{Method: "PUT", URL: "https://app.example/"})
		if err != nil || resp.Status != 200 || string(resp.Body) != "seen PUT" {
			t.Fatalf("the invocation: %+v, %v", resp, err)
		}
	}
	caller := callerContext(t, "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8")
	invoke(trace.ContextWithSpanContext(ctx, caller))
	invoke(ctx)

	var spans []otlptest.Span
	var gateway, server []otlptest.Span
	testutil.WaitFor(t, 15*time.Second, func() bool {
		spans = rcv.Spans()
		gateway, server = nil, nil
		for _, s := range spans {
			if s.Name == "codemode.invoke_handle" {
				if side(s) == "server" {
					server = append(server, s)
				} else {
					gateway = append(gateway, s)
				}
			}
		}
		return len(gateway) >= 2 && len(server) >= 2
	}, "both invocations' spans on both sides")
	if len(gateway) != 2 || len(server) != 2 {
		t.Fatalf("%d invocation spans on the gateway and %d on the executor server, want 2 and 2", len(gateway), len(server))
	}
	joined, own := inTraceAndNot(gateway, caller.TraceID())
	if joined.Span == nil || joined.ParentID() != caller.SpanID().String() {
		t.Fatalf("no gateway invocation is the child of the caller's span %s", caller.SpanID())
	}
	if own.Span == nil || own.ParentID() != "" {
		t.Fatalf("the invocation without a context is not a root on the gateway")
	}
	// Each executor server invocation is the child of one gateway
	// invocation, in its trace.
	for _, g := range []otlptest.Span{joined, own} {
		n := 0
		for _, s := range server {
			if s.ParentID() == g.ID() && s.TraceID() == g.TraceID() {
				n++
				if s.Attr("codemode.handle.name") != "fetch" {
					t.Errorf("the executor server's invocation span: %v", s.Attributes)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d executor server invocations under the gateway's invocation %s (trace %s), want 1", n, g.ID(), g.TraceID())
		}
	}
}

// inTraceAndNot picks, of spans, the one in trace id and one in another.
func inTraceAndNot(spans []otlptest.Span, id trace.TraceID) (in, out otlptest.Span) {
	for _, s := range spans {
		if s.TraceID() == id.String() {
			in = s
		} else {
			out = s
		}
	}
	return in, out
}

func side(s otlptest.Span) string {
	if s.Service == service("server") {
		return "server"
	}
	return "gateway"
}

func service(side string) string {
	if side == "server" {
		return "codemode-executor-server"
	}
	return "codemode-gateway"
}

// TestNativeRequestsAreTraced: a request a local group performs itself
// (the native mode) is a span under its execution, at its own times, with
// its method, host and status, and neither its path nor its query.
func TestNativeRequestsAreTraced(t *testing.T) {
	rcv := otlptest.Start()
	defer rcv.Close()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer upstream.Close()
	key, hash := newKey(t)
	gw := startGatewayProcess(t, fmt.Sprintf(`listen: 127.0.0.1:0
tracing: {enabled: true, endpoint: %s}
backends:
  - name: local
    type: local
    local:
      maxWorkers: 2
      nativeOutbound: true
      native: {allow: [127.0.0.1/32]}
tenants:
  - name: alpha
    backend: local
    keys: [{name: alpha-key, hash: %s}]
    policy: {nativeOutbound: true}
routes:
  - path: /v1/executor
    kind: executor
`, rcv.URL(), hash), exportSoon)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := dialExecutor(t, ctx, gw.url, key, nil).Execute(ctx, &protocol.ExecuteRequest{Code: `async () => (await fetch("` + upstream.URL + `/accounts/PATH-SECRET-77?token=` + querySecret + `")).status`})
	if err != nil || res.ResultJSON != "418" || res.Usage == nil || res.Usage.OutboundRequests != 1 {
		t.Fatalf("the native fetch: %+v, %v", res, err)
	}
	var exec, out otlptest.Span
	testutil.WaitFor(t, 15*time.Second, func() bool {
		for _, s := range rcv.Spans() {
			switch s.Name {
			case "codemode.execute":
				exec = s
			case "codemode.outbound":
				out = s
			}
		}
		return exec.Span != nil && out.Span != nil
	}, "the execution's and the request's spans")
	if out.ParentID() != exec.ID() || out.TraceID() != exec.TraceID() {
		t.Fatalf("the request's span is not the execution's child")
	}
	host, _, _ := strings.Cut(strings.TrimPrefix(upstream.URL, "http://"), ":")
	for k, v := range map[string]string{"http.request.method": "GET", "server.address": host, "http.response.status_code": "418", "codemode.outbound.mode": "native", "url.path": ""} {
		if got := out.Attr(k); got != v {
			t.Errorf("the native request's %s = %q, want %q", k, got, v)
		}
	}
	if out.StartTimeUnixNano < exec.StartTimeUnixNano || out.EndTimeUnixNano > exec.EndTimeUnixNano || out.EndTimeUnixNano <= out.StartTimeUnixNano {
		t.Errorf("the request's span [%d, %d] is not inside its execution's [%d, %d]", out.StartTimeUnixNano, out.EndTimeUnixNano, exec.StartTimeUnixNano, exec.EndTimeUnixNano)
	}
	for _, text := range rcv.Texts() {
		for _, secret := range []string{"PATH-SECRET-77", querySecret, "token="} {
			if strings.Contains(text, secret) {
				t.Errorf("the collector received %q, which holds %q", text, secret)
			}
		}
	}
}
