package remote_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// testServer is an executor server on loopback that can drop its
// connections, as a server that dies does.
type testServer struct {
	mu       sync.Mutex
	sessions []*capnweb.Session
}

// sessionCount is how many sessions the server has registered. A session
// serves calls as soon as Accept starts it, before its handler registers
// it, so a test that drops sessions mid-call waits for the count first.
func (ts *testServer) sessionCount() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.sessions)
}

func (ts *testServer) dropAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, s := range ts.sessions {
		s.Abort(errors.New("server going away"))
	}
	ts.sessions = nil
}

// serve starts an executor server for exec on loopback and returns its
// ws:// URL.
func serve(t *testing.T, exec protocol.Executor, opts executorapi.ServerOptions) (string, *testServer) {
	t.Helper()
	srv := executorapi.NewServer(exec, opts)
	ts := &testServer{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := capnweb.Accept(w, r, srv.Target(), executorapi.SessionOptions(capnweb.Options{}))
		if err != nil {
			return
		}
		ts.mu.Lock()
		ts.sessions = append(ts.sessions, sess)
		ts.mu.Unlock()
		<-sess.Done()
	}))
	t.Cleanup(func() {
		ts.dropAll()
		hs.Close()
		srv.Close()
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http"), ts
}

func dial(t *testing.T, url string) *remote.Executor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := remote.Dial(ctx, url, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestRequestCrossesIntact(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	yes, no := true, false
	cases := []*protocol.ExecuteRequest{
		{Code: "result:1"},
		{Code: "result:1", Timeout: protocol.TimeoutOf(1500), CountHostWaits: &yes, RetainHandles: true},
		{Code: "result:1", Timeout: protocol.TimeoutLifted(), CountHostWaits: &no},
		{Code: "result:1", Timeout: protocol.TimeoutOf(0.5), Outbound: protocol.NoOutbound()},
		{
			Code: "result:1",
			Providers: []protocol.ProviderDescriptor{
				{Name: "store", Tools: []string{"listOrders", "deleteOrders"}},
				{Name: "crm", Tools: []string{}, PositionalArgs: true, Prelude: "void 0", ProxySource: "const crm = {}"},
			},
			Modules: protocol.ModuleMap{
				"greeter":     {Kind: protocol.KindJS, Source: "export const greet = (n) => 'hello ' + n"},
				"toString":    {Kind: protocol.KindCJS, Source: "module.exports = 1"},
				"constructor": {Kind: protocol.KindText, Source: "plain text"},
				"config":      {Kind: protocol.KindJSON, Source: `{"b":1,"a":[true,null,"x"]}`},
				"blob":        {Kind: protocol.KindData, Data: []byte{0, 1, 2, 0xff}},
			},
		},
	}
	for _, want := range cases {
		if _, err := e.Execute(ctx(t), want); err != nil {
			t.Fatal(err)
		}
		got := fake.Last()
		if got.Code != want.Code || !reflect.DeepEqual(got.Providers, want.Providers) ||
			!reflect.DeepEqual(got.Modules, want.Modules) || got.Timeout != want.Timeout ||
			!reflect.DeepEqual(got.CountHostWaits, want.CountHostWaits) || got.RetainHandles != want.RetainHandles ||
			got.Outbound.Mode() != want.Outbound.Mode() || (got.Dispatch == nil) != (want.Dispatch == nil) {
			t.Errorf("sent %#v\nthe server received %#v", want, got)
		}
	}
}

func TestResultCrossesIntact(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	// A key named after an Object.prototype member would be deleted from a
	// plain object; inside resultJson it survives.
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: `result:{"constructor":1,"toString":[2]}`})
	if err != nil {
		t.Fatal(err)
	}
	want := &protocol.ExecuteResult{ResultJSON: `{"constructor":1,"toString":[2]}`, Logs: []protocol.LogLine{{Level: "log", Text: "ran"}}}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("got %+v, want %+v", res, want)
	}
	res, err = e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "error:"})
	if err != nil || !res.HasError || res.Error != "" || res.ResultJSON != "" {
		t.Fatalf("an empty error text came back as %+v, %v", res, err)
	}
}

func TestDispatchCallsBackIntoTheCaller(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	var mu sync.Mutex
	var seen [][3]string
	dispatch := func(_ context.Context, provider, tool, args string) (string, error) {
		mu.Lock()
		seen = append(seen, [3]string{provider, tool, args})
		mu.Unlock()
		return `{"result":{"id":"o1","total":42}}`, nil
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: `dispatch:store:listOrders:["ada",3]`, Dispatch: dispatch})
			if err != nil {
				t.Error(err)
				return
			}
			v, _ := res.Value()
			if v != `{"result":{"id":"o1","total":42}}` {
				t.Errorf("the run saw %v", v)
			}
		}()
	}
	wg.Wait()
	if len(seen) != 8 || seen[0] != [3]string{"store", "listOrders", `["ada",3]`} {
		t.Fatalf("dispatch saw %v", seen)
	}
	// Without tools the server gets no dispatch at all.
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "dispatch:a:b:"})
	if err != nil || res.Error != "no dispatch" {
		t.Fatalf("got %+v, %v", res, err)
	}
	// A provider rejection reaches the run as an error.
	failing := func(context.Context, string, string, string) (string, error) { return "", errors.New("provider down") }
	res, err = e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "dispatch:a:b:", Dispatch: failing})
	// The recorder reports the rejection as it arrived: a plain Error.
	if err != nil || res.Error != "dispatch failed: Error: provider down" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestOutboundStubKeepsBytesAndHeaders(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	var got protocol.OutboundRequest
	outbound := func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		got = req
		return protocol.OutboundResponse{Status: 201, StatusText: "Created", Body: []byte("made")}, nil
	}
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "fetch:https://api.example/x", Outbound: protocol.OutboundVia(outbound)})
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.OutboundRequest{Method: "POST", URL: "https://api.example/x",
		Headers: []protocol.Header{{"x-a", "1"}, {"x-a", "2"}}, Body: []byte{0, 1, 0xfe, 0xff}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the outbound function got %+v, want %+v", got, want)
	}
	if res.ResultJSON != `{"body":"made","status":201}` {
		t.Fatalf("the run saw %s", res.ResultJSON)
	}
	for mode, o := range map[string]protocol.Outbound{"native": {}, "disabled": protocol.NoOutbound()} {
		res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "fetch:x", Outbound: o})
		if err != nil || res.Error != "mode "+mode {
			t.Fatalf("%s: got %+v, %v", mode, res, err)
		}
	}
}

// handshaken is a bare session to the server and its executorapi client,
// for tests that watch the session's tables.
func handshaken(t *testing.T, url string) (*capnweb.Session, *executorapi.Client) {
	t.Helper()
	sess, err := capnweb.Dial(ctx(t), url, nil, capnweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	client, err := executorapi.Handshake(ctx(t), sess)
	if err != nil {
		t.Fatal(err)
	}
	return sess, client
}

func TestRetainedOutboundOutlivesTheCall(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	sess, client := handshaken(t, url)
	base := sess.Stats()
	outbound := func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 200, Body: append([]byte("via caller:"), req.Body...)}, nil
	}
	res, err := client.Execute(ctx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true, Outbound: protocol.OutboundVia(outbound)})
	if err != nil || res.ExecutionID == "" || !reflect.DeepEqual(res.Handles, []string{"fetch"}) {
		t.Fatalf("got %+v, %v", res, err)
	}
	// After execute returned, the handler still fetches through the caller,
	// and from a second connection too.
	other := dial(t, url)
	type invoker interface {
		InvokeHandle(context.Context, string, string, protocol.OutboundRequest) (protocol.OutboundResponse, error)
	}
	for _, ex := range []invoker{client, other} {
		resp, err := ex.InvokeHandle(ctx(t), res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/", Body: []byte("hi")})
		if err != nil || string(resp.Body) != "via caller:hi" {
			t.Fatalf("invokeHandle gave %+v, %v", resp, err)
		}
	}
	if err := other.CloseHandles(ctx(t), res.ExecutionID); err != nil {
		t.Fatal(err)
	}
	// Closing the handles released the server's duplicate of the stub: the
	// caller's export table is back to where it started.
	testutil.WaitFor(t, 5*time.Second, func() bool { return sess.Stats() == base }, "the outbound stub to be released: %+v, want %+v", sess.Stats(), base)
	_, err = client.InvokeHandle(ctx(t), res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
	var hc *protocol.HandlesClosedError
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || !errors.As(err, &hc) || hc.ExecutionID != res.ExecutionID {
		t.Fatalf("invoke after close gave %v", err)
	}
}

func TestFaultsAreRehydrated(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "fault:QUEUE_OVERFLOW"})
	var qo *protocol.QueueOverflowError
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || !errors.As(err, &qo) || !protocol.CodeOf(err).Retryable() {
		t.Fatalf("got %v (%T)", err, err)
	}
	if err.Error() != protocol.NewQueueOverflowError(4, 40*time.Millisecond).Error() {
		t.Fatalf("text %q changed on the way", err)
	}
	// The hint also crossed as the retryAfterMs property.
	var f *protocol.Fault
	if !errors.As(err, &f) || f.Props[protocol.RetryAfterProp] != 40.0 {
		t.Fatalf("props %#v", f)
	}
	_, err = e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "fault:INTERNAL"})
	if protocol.CodeOf(err) != protocol.CodeInternal || err.Error() != "the far side failed with INTERNAL" {
		t.Fatalf("got %v", err)
	}
	// An error with no code passes through untouched, not as a fault.
	_, err = e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "plain-error:user code threw"})
	var ce *capnweb.Error
	if protocol.CodeOf(err) != "" || !errors.As(err, &ce) || ce.Message != "user code threw" {
		t.Fatalf("got %v (%T)", err, err)
	}
	_, err = e.InvokeHandle(ctx(t), "nope", "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != protocol.NewHandlesClosedError("nope").Error() {
		t.Fatalf("got %v", err)
	}
	if err := e.CloseHandles(ctx(t), "nope"); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("got %v", err)
	}
}

func TestResponseLimit(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{ResponseLimit: 1000})
	e := dial(t, url)
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: `result:"` + strings.Repeat("x", 2000) + `"`})
	var rt *protocol.ResponseTooLargeError
	if protocol.CodeOf(err) != protocol.CodeResponseTooLarge || !errors.As(err, &rt) || rt.Limit != 1000 {
		t.Fatalf("got %v", err)
	}
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.InvokeHandle(ctx(t), res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "big"})
	if protocol.CodeOf(err) != protocol.CodeResponseTooLarge {
		t.Fatalf("an oversized handle answer gave %v", err)
	}
}

func TestHandshake(t *testing.T) {
	// Nothing listening: CONNECTION_REJECTED.
	hs := httptest.NewServer(http.NotFoundHandler())
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	hs.Close()
	if _, err := remote.Dial(ctx(t), url, remote.Options{DialTimeout: 2 * time.Second}); protocol.CodeOf(err) != protocol.CodeConnectionRejected {
		t.Fatalf("dial to a closed port gave %v", err)
	}
	// A server speaking another version: PROTOCOL_MISMATCH.
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := capnweb.Accept(w, r, capnweb.Methods{
			"protocolVersion": func(context.Context, []any) (any, error) { return 2, nil },
		}, capnweb.Options{})
		if err == nil {
			<-sess.Done()
		}
	}))
	defer other.Close()
	defer other.CloseClientConnections()
	if _, err := remote.Dial(ctx(t), "ws"+strings.TrimPrefix(other.URL, "http"), remote.Options{}); protocol.CodeOf(err) != protocol.CodeProtocolMismatch {
		t.Fatalf("a version-2 server gave %v", err)
	}
}

// rawSession is a capnweb session to the server that skips the client's
// conveniences, to send what a broken or hostile caller would.
func rawSession(t *testing.T, url string) *capnweb.Stub {
	t.Helper()
	sess, err := capnweb.Dial(ctx(t), url, nil, capnweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess.Main()
}

func TestServerRefusesBadCalls(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	main := rawSession(t, url)
	_, err := main.Call(ctx(t), "execute", "result:1", []any{}, map[string]any{}, nil, "native")
	if protocol.CodeOf(err) != "" || !strings.Contains(err.Error(), "protocolVersion") {
		t.Fatalf("a call before the handshake gave %v", err)
	}
	var ce *capnweb.Error
	if !errors.As(err, &ce) || ce.Code() != string(protocol.CodeProtocolMismatch) {
		t.Fatalf("a call before the handshake gave %v, want PROTOCOL_MISMATCH", err)
	}
	if _, err := main.Call(ctx(t), "protocolVersion"); err != nil {
		t.Fatal(err)
	}
	_, err = main.Call(ctx(t), "execute", "result:1", []any{}, map[string]any{}, nil, "carrier-pigeon")
	if !errors.As(err, &ce) || ce.Code() != string(protocol.CodeProtocolMismatch) {
		t.Fatalf("an unknown outbound mode gave %v", err)
	}
	_, err = main.Call(ctx(t), "execute", "result:1", []any{}, map[string]any{}, nil, "stub")
	if !errors.As(err, &ce) || ce.Code() != string(protocol.CodeProtocolMismatch) {
		t.Fatalf("stub mode without a function gave %v", err)
	}
	for name, args := range map[string][]any{
		"code not a string":   {1, []any{}, map[string]any{}, nil, "native"},
		"providers an object": {"x", map[string]any{}, map[string]any{}, nil, "native"},
		"provider name":       {"x", []any{map[string]any{"name": 1}}, map[string]any{}, nil, "native"},
		"timeout a string":    {"x", []any{}, map[string]any{"timeout": "5"}, nil, "native"},
		"dispatch a number":   {"x", []any{}, map[string]any{}, 7, "native"},
		"module not a pair":   {"x", []any{}, map[string]any{"modules": []any{"m"}}, nil, "native"},
	} {
		_, err := main.Call(ctx(t), "execute", args...)
		if !errors.As(err, &ce) || ce.Name != "TypeError" {
			t.Errorf("%s: got %v, want a TypeError", name, err)
		}
	}
	// A module map the rules refuse is a declared failure in the envelope.
	v, err := main.Call(ctx(t), "execute", "result:1", []any{}, map[string]any{"modules": []any{
		[]any{"m", map[string]any{"wasm": "AAAA"}},
	}}, nil, "native")
	m, _ := v.(map[string]any)
	if err != nil || m["error"] != protocol.NewUnsupportedModuleKindError("m", "wasm").Error() {
		t.Fatalf("an unsupported module kind gave %v, %v", v, err)
	}
	v, err = main.Call(ctx(t), "execute", "result:1", []any{}, map[string]any{"modules": []any{
		[]any{"m", "a"}, []any{"m", "b"},
	}}, nil, "native")
	m, _ = v.(map[string]any)
	if err != nil || m["error"] != protocol.NewModuleKeyCollisionError("m", []string{"m", "m"}).Error() {
		t.Fatalf("a duplicate module name gave %v, %v", v, err)
	}
	if _, err := main.Call(ctx(t), "nosuch"); err == nil {
		t.Fatal("an unknown method was served")
	}
}

func TestConnectionLossAndReconnect(t *testing.T) {
	fake := executortest.NewRecorder()
	url, ts := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "block"})
		errc <- err
	}()
	<-fake.Started
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.sessionCount() == 1 }, "the server to register its session")
	ts.dropAll() // the server side drops mid-execution
	testutil.WaitBroken(t, errc, 10*time.Second, "the execution in flight")
	// The next call dials again.
	testutil.WaitFor(t, 5*time.Second, func() bool {
		res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:2"})
		return err == nil && res.ResultJSON == "2"
	}, "a call on a fresh connection to succeed")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:3"}); protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("a call after Close gave %v", err)
	}
}

func TestModulesWithJSONKindKeepOrder(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	src := `{"z":1,"a":{"y":[1,2,{"k":null}],"b":"\u2028"}}`
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1", Modules: protocol.ModuleMap{"c": {Kind: protocol.KindJSON, Source: src}}})
	if err != nil {
		t.Fatal(err)
	}
	got := fake.Last().Modules["c"].Source
	want, _ := protocol.StringifyForDispatch(mustParse(t, src))
	if got != want || !bytes.Contains([]byte(got), []byte(`"z":1,"a"`)) {
		t.Fatalf("json module arrived as %s, want %s", got, want)
	}
}

func mustParse(t *testing.T, s string) any {
	v, err := protocol.ParseForDispatchOrdered(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOneConnectionCarriesConcurrentExecutions: a run that waits on nothing
// of the wire (here, one that blocks) must not hold up the next execution on
// the same connection.
func TestOneConnectionCarriesConcurrentExecutions(t *testing.T) {
	fake := executortest.NewRecorder()
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	blockCtx, cancel := context.WithCancel(ctx(t))
	done := make(chan error, 1)
	go func() {
		_, err := e.Execute(blockCtx, &protocol.ExecuteRequest{Code: "block"})
		done <- err
	}()
	<-fake.Started
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:2"})
	if err != nil || res.ResultJSON != "2" {
		t.Fatalf("a second execution beside a blocked one gave %+v, %v", res, err)
	}
	cancel()
	<-done
}

// grantWithStub serves a local backend with opts, opens a bare session,
// and grants handles for code in the stub outbound mode. It checks that the
// server holds a duplicate of the outbound stub and returns the session's
// tables as they were before the grant.
func grantWithStub(t *testing.T, opts local.Options, code string, timeout protocol.Timeout) (*capnweb.Session, *executorapi.Client, string, capnweb.Stats) {
	t.Helper()
	backend, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	url, _ := serve(t, backend, executorapi.ServerOptions{})
	sess, client := handshaken(t, url)
	base := sess.Stats()
	outbound := func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 200}, nil
	}
	res, err := client.Execute(ctx(t), &protocol.ExecuteRequest{Code: code, RetainHandles: true, Timeout: timeout, Outbound: protocol.OutboundVia(outbound)})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	if sess.Stats() == base {
		t.Fatal("the server holds no duplicate of the outbound stub while the handles live")
	}
	return sess, client, res.ExecutionID, base
}

// TestRetainedOutboundReleasedWhenABoundEndsTheHandles: an invocation that
// outlives its bound closes the handles in the executor; the server lets go
// of the caller's outbound stub then, not only on closeHandles.
func TestRetainedOutboundReleasedWhenABoundEndsTheHandles(t *testing.T) {
	sess, client, id, base := grantWithStub(t, local.Options{MaxWorkers: 1},
		"async () => ({ fetch: (req) => { if (req.url.endsWith('/spin')) { while (true) {} } return new Response('ok') } })",
		protocol.TimeoutOf(300))
	_, err := client.InvokeHandle(ctx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://x/spin"})
	if err == nil || executorapi.Message(err) != protocol.NewExecutionTimeoutError(300).Error() {
		t.Fatalf("a spinning handler gave %v, want the timeout text", err)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return sess.Stats() == base }, "the outbound stub to be released: %+v, want %+v", sess.Stats(), base)
	_, err = client.InvokeHandle(ctx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://x/"})
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("after the bound closed the handles: %v", err)
	}
}

// TestRetainedOutboundReleasedAtTheIdleBound: when the executor closes the
// handles on its own (the idle bound), the server lets go of the caller's
// outbound stub without waiting for another call.
func TestRetainedOutboundReleasedAtTheIdleBound(t *testing.T) {
	sess, _, _, base := grantWithStub(t, local.Options{MaxWorkers: 1, HandlesIdleTimeout: 300 * time.Millisecond},
		"async () => (req) => new Response('ok')", protocol.Timeout{})
	testutil.WaitFor(t, 5*time.Second, func() bool { return sess.Stats() == base }, "the idle bound to release the outbound stub: %+v, want %+v", sess.Stats(), base)
}

// drainingExecutor refuses new executions as an executor server that is
// draining does, once draining is set.
type drainingExecutor struct {
	*executortest.Recorder
	draining atomic.Bool
}

func (d *drainingExecutor) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	if d.draining.Load() {
		return nil, protocol.NewExecutorDrainingError()
	}
	return d.Recorder.ExecuteWith(ctx, req, p)
}

func (d *drainingExecutor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return d.ExecuteWith(ctx, req, protocol.Policy{})
}

// A server's draining refusal arrives as the retryable fault it is, marks
// the session Draining, and a session dialed after the server closed that
// one (its replacement's) is not draining.
func TestDrainingRefusalMarksTheSession(t *testing.T) {
	fake := &drainingExecutor{Recorder: executortest.NewRecorder()}
	url, ts := serve(t, fake, executorapi.ServerOptions{})
	e := dial(t, url)
	if e.Draining() {
		t.Fatal("a fresh session reads as draining")
	}
	fake.draining.Store(true)
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1"})
	if !protocol.IsExecutorDraining(err) || err.Error() != protocol.NewExecutorDrainingError().Error() || !protocol.CodeOf(err).Retryable() {
		t.Fatalf("a draining server's refusal arrived as %v (code %q)", err, protocol.CodeOf(err))
	}
	if !e.Draining() {
		t.Fatal("the session is not marked draining after the refusal")
	}
	if err := e.Ping(ctx(t)); err != nil || !e.Draining() {
		t.Fatalf("a draining server's session: ping %v, draining %v; want it still answering and draining", err, e.Draining())
	}
	fake.draining.Store(false) // the replacement, on the same address
	testutil.WaitFor(t, 5*time.Second, func() bool { return ts.sessionCount() == 1 }, "the server to register its session")
	ts.dropAll()
	testutil.WaitFor(t, 5*time.Second, func() bool { return !e.Draining() }, "the closed session to stop reading as draining")
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:2"})
	if err != nil || res.ResultJSON != "2" || e.Draining() {
		t.Fatalf("on the next session: %+v, %v, draining %v", res, err, e.Draining())
	}
}
