package e2e

import (
	"context"
	"errors"
	"os/exec"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/protocol"
)

// startJSExecutorServer runs js-executor-server.mjs, a peer written in
// JavaScript with the real capnweb library, and returns its URL.
func startJSExecutorServer(t *testing.T) string {
	t.Helper()
	nodeModules(t)
	return startProcess(t, "the JavaScript executor server", exec.Command("node", "js-executor-server.mjs"), nil).url
}

// TestRemoteBackendAgainstAJavaScriptServer proves backends/remote against
// an ExecutorApi peer this project did not write in Go.
func TestRemoteBackendAgainstAJavaScriptServer(t *testing.T) {
	url := startJSExecutorServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := remote.Dial(ctx, url, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()

	var mu sync.Mutex
	var seen [][3]string
	dispatch := func(_ context.Context, provider, tool, args string) (string, error) {
		mu.Lock()
		seen = append(seen, [3]string{provider, tool, args})
		mu.Unlock()
		return `{"result":{"id":"o1","total":42}}`, nil
	}
	res, err := ex.Execute(ctx, &protocol.ExecuteRequest{
		Code:      `async () => { console.log('start', 1); const o = await store.listOrders('ada', 3); return { o, bytes: new Uint8Array([1, 2]) } }`,
		Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"listOrders"}, PositionalArgs: true}},
		Dispatch:  dispatch,
		Timeout:   protocol.TimeoutOf(5000),
	})
	if err != nil {
		t.Fatal(err)
	}
	v, err := res.Value()
	want := map[string]any{"o": map[string]any{"id": "o1", "total": 42.0}, "bytes": []byte{1, 2}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("result %#v (%v), want %#v", v, err, want)
	}
	if !reflect.DeepEqual(res.Logs, []protocol.LogLine{{Level: "log", Text: "start 1"}}) {
		t.Fatalf("logs %v", res.Logs)
	}
	if !reflect.DeepEqual(seen, [][3]string{{"store", "listOrders", `["ada",3]`}}) {
		t.Fatalf("dispatch saw %v", seen)
	}

	// The outbound stub crosses to the JavaScript side and back.
	var got protocol.OutboundRequest
	res, err = ex.Execute(ctx, &protocol.ExecuteRequest{
		Code: `async () => (await fetch('https://api.example/x', { method: 'POST', body: 'hello' })).text()`,
		Outbound: protocol.OutboundVia(func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			got = req
			return protocol.OutboundResponse{Status: 200, Body: []byte("from Go")}, nil
		}),
	})
	if err != nil || res.ResultJSON != `"from Go"` || got.Method != "POST" || got.URL != "https://api.example/x" || string(got.Body) != "hello" {
		t.Fatalf("outbound: %+v %v; the Go function saw %+v", res, err, got)
	}
	res, err = ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => { try { await fetch('https://x/') } catch (e) { return e.message } }`, Outbound: protocol.NoOutbound()})
	if err != nil || res.ResultJSON != strconv.Quote(protocol.NewOutboundDisabledError().Error()) {
		t.Fatalf("disabled outbound: %+v %v", res, err)
	}

	// A user error keeps its own shape; a fault comes back typed by code.
	res, err = ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => { throw new Error('No such customer.') }`})
	if err != nil || !res.HasError || res.Error != "No such customer." {
		t.Fatalf("user error: %+v %v", res, err)
	}
	err = ex.CloseHandles(ctx, "nope")
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != protocol.NewHandlesClosedError("nope").Error() {
		t.Fatalf("closeHandles gave %v", err)
	}
	var hc *protocol.HandlesClosedError
	if !errors.As(err, &hc) || hc.ExecutionID != "nope" {
		t.Fatalf("the fault was not rehydrated into HandlesClosedError: %#v", err)
	}
	// With a span in ctx the client sends invokeHandle a fourth argument,
	// the trace context: capnweb hands a JavaScript method every argument
	// and the method ignores those it does not name, so the server answers
	// as it does to three.
	traced := trace.ContextWithSpanContext(ctx, callerContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"))
	_, err = ex.InvokeHandle(traced, "nope", "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != protocol.NewHandlesClosedError("nope").Error() {
		t.Fatalf("invokeHandle with a trace context gave %v", err)
	}
}
