package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

func TestMain(m *testing.M) {
	local.RunWorkerIfRequested() // the local backend re-executes this binary
	os.Exit(m.Run())
}

func wsURL(httpURL string) string { return "ws" + strings.TrimPrefix(httpURL, "http") }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// farServer is a remote executor server backed by a Recorder.
func farServer(t *testing.T) (string, *executortest.Recorder) {
	rec := executortest.NewRecorder()
	srv := executorapi.NewServer(rec, executorapi.ServerOptions{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return wsURL(hs.URL) + "/", rec
}

type env struct {
	base     string // the configuration before any tweak
	url      string // http:// of the gateway
	admin    string // http:// of its admin handler
	gw       *gateway.Gateway
	keys     map[string]string
	far      *executortest.Recorder
	upstream *httptest.Server
	seen     chan http.Header // headers the proxy upstream received
	logs     *testutil.Buffer // the gateway's log, as text
}

const (
	jwtSecret  = "0123456789abcdef0123456789abcdef"
	adminToken = "admin-token-0123456789"
)

// start runs a gateway with three tenants: acme on the local backend, and
// globex and initech on a remote group whose member is a Recorder.
func start(t *testing.T, tweak func(string) string) *env {
	t.Helper()
	e := &env{keys: map[string]string{}, seen: make(chan http.Header, 8), logs: &testutil.Buffer{}}
	var farURL string
	farURL, e.far = farServer(t)
	e.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.seen <- r.Header.Clone()
		fmt.Fprintf(w, "upstream saw %s", r.URL.Path)
	}))
	t.Cleanup(e.upstream.Close)
	hashes := map[string]string{}
	for _, name := range []string{"acme", "globex", "initech"} {
		e.keys[name] = auth.NewAPIKey()
		hashes[name], _ = auth.HashAPIKey(e.keys[name])
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: local
    type: local
    local: {poolSize: 1, queue: 8}
  - name: far
    type: remote
    remote:
      members:
        - url: %s
      healthInterval: 200ms
jwt:
  issuer: https://issuer.example
  audience: gateway
  hmacSecretEnv: TEST_JWT_SECRET
tenants:
  - name: acme
    backend: local
    keys: [{name: acme-key, hash: %s}]
    policy: {timeoutMs: 300}
  - name: globex
    backend: far
    keys: [{name: globex-key, hash: %s}]
    policy: {maxHandles: 2, maxConnections: 3}
  - name: initech
    backend: far
    keys: [{name: initech-key, hash: %s}]
    policy: {maxConcurrent: 1, rate: 50, burst: 2}
routes:
  - path: /v1/executor
    kind: executor
  - path: /v1/executor
    kind: executor
    subprotocols: [codemode.executor.v1]
    tenants: [acme]
    allowedOrigins: ["*.example.com"]
  - path: /v1/acme-only
    kind: executor
    tenants: [acme]
  - path: /v1/proxy/*
    kind: proxy
    upstream: %s
pins:
  size: 3
`, farURL, hashes["acme"], hashes["globex"], hashes["initech"], e.upstream.URL)
	e.base = yaml
	e.url = e.serve(t, yaml, tweak)
	return e
}

// startReplica runs another gateway on from's configuration: the same
// tenants, keys and remote member.
func startReplica(t *testing.T, from *env, tweak func(string) string) *env {
	e := *from
	e.url = e.serve(t, from.base, tweak)
	return &e
}

func (e *env) serve(t *testing.T, yaml string, tweak func(string) string) string {
	t.Helper()
	if tweak != nil {
		yaml = tweak(yaml)
	}
	getenv := func(k string) string {
		switch k {
		case "TEST_JWT_SECRET":
			return jwtSecret
		case "TEST_ADMIN_TOKEN":
			return adminToken
		}
		return os.Getenv(k)
	}
	cfg, err := config.Parse("test.yaml", []byte(yaml), getenv)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{Getenv: getenv, Logger: slog.New(slog.NewTextHandler(e.logs, nil)), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw.Handler())
	admin := httptest.NewServer(gw.AdminHandler())
	t.Cleanup(func() { hs.Close(); admin.Close(); gw.Close() })
	e.admin, e.gw = admin.URL, gw
	return hs.URL
}

// dial connects as a tenant with key. The client does not retry, so each
// call reads the gateway's one answer (its refusals above all).
func (e *env) dial(t *testing.T, path, key string) (*remote.Executor, error) {
	t.Helper()
	ex, err := remote.Dial(testCtx(t), wsURL(e.url)+path, remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, Retry: remote.Retry{Attempts: 1}})
	if err == nil {
		t.Cleanup(func() { ex.Close() })
	}
	return ex, err
}

func (e *env) mustDial(t *testing.T, path, tenant string) *remote.Executor {
	t.Helper()
	ex, err := e.dial(t, path, e.keys[tenant])
	if err != nil {
		t.Fatalf("dial as %s: %v", tenant, err)
	}
	return ex
}

// metric scrapes the admin listener and returns the value of the series
// named exactly series (with its labels), or "absent".
func (e *env) metric(t *testing.T, series string) string {
	t.Helper()
	resp, err := http.Get(e.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "absent"
}

// upgrade attempts a WebSocket handshake and returns the HTTP status.
func (e *env) upgrade(t *testing.T, path string, header http.Header) int {
	t.Helper()
	return upgradeStatus(t, e.url+path, header)
}

// upgradeStatus attempts a WebSocket handshake at url and returns the HTTP
// status.
func upgradeStatus(t *testing.T, url string, header http.Header) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAuthenticationAndAccess(t *testing.T) {
	e := start(t, nil)
	cases := []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"no credential", "/v1/executor", nil, 401},
		{"unknown key", "/v1/executor", http.Header{"Authorization": {"Bearer " + auth.NewAPIKey()}}, 401},
		{"basic scheme", "/v1/executor", http.Header{"Authorization": {"Basic " + e.keys["acme"]}}, 401},
		{"forged jwt", "/v1/executor", http.Header{"Authorization": {"Bearer a.b.c"}}, 401},
		{"tenant not on the route", "/v1/acme-only", http.Header{"Authorization": {"Bearer " + e.keys["globex"]}}, 403},
		{"tenant on the route", "/v1/acme-only", http.Header{"Authorization": {"Bearer " + e.keys["acme"]}}, 101},
		{"no such path", "/v2/nothing", http.Header{"Authorization": {"Bearer " + e.keys["acme"]}}, 404},
		{"foreign origin", "/v1/executor", http.Header{"Authorization": {"Bearer " + e.keys["acme"]}, "Origin": {"https://evil.test"}}, 403},
	}
	for _, c := range cases {
		if got := e.upgrade(t, c.path, c.header); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	// A JWT names its tenant in a claim.
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://issuer.example", "aud": "gateway", "tenant": "globex", "sub": "svc", "exp": time.Now().Add(time.Hour).Unix(),
	})
	signed, _ := tok.SignedString([]byte(jwtSecret))
	ex, err := e.dial(t, "/v1/executor", signed)
	if err != nil {
		t.Fatal(err)
	}
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"})
	if err != nil || res.ResultJSON != "1" {
		t.Fatalf("a JWT for globex ran %+v, %v (want the remote group's recorder to answer)", res, err)
	}
}

func TestSubprotocolRouting(t *testing.T) {
	e := start(t, nil)
	ctx := testCtx(t)
	dial := func(origin string, protos ...string) (*websocket.Conn, *http.Response, error) {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		return websocket.Dial(ctx, wsURL(e.url)+"/v1/executor", &websocket.DialOptions{Subprotocols: protos, HTTPHeader: h})
	}
	// A browser offers the route's subprotocol and its credential: the
	// gateway selects the subprotocol and never echoes the credential.
	conn, resp, err := dial("https://app.example.com", "codemode.executor.v1", auth.SubprotocolPrefix+e.keys["acme"])
	if err != nil {
		t.Fatal(err)
	}
	if conn.Subprotocol() != "codemode.executor.v1" || strings.Contains(resp.Header.Get("Sec-WebSocket-Protocol"), e.keys["acme"]) {
		t.Fatalf("selected %q, answered %q", conn.Subprotocol(), resp.Header.Get("Sec-WebSocket-Protocol"))
	}
	conn.CloseNow()
	// That route admits acme only.
	if _, resp, err = dial("", "codemode.executor.v1", auth.SubprotocolPrefix+e.keys["globex"]); err == nil || resp.StatusCode != 403 {
		t.Fatalf("globex on the acme-only subprotocol route: %v", err)
	}
	// A subprotocol nobody serves is refused before the upgrade.
	if _, resp, err = dial("", "graphql-ws", auth.SubprotocolPrefix+e.keys["acme"]); err == nil || resp.StatusCode != 400 {
		t.Fatalf("an unknown subprotocol: %v", err)
	}
	// Offering nothing reaches the default route, with no subprotocol.
	conn, _, err = websocket.Dial(ctx, wsURL(e.url)+"/v1/executor", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.keys["globex"]}}})
	if err != nil || conn.Subprotocol() != "" {
		t.Fatalf("the default route: %v, %q", err, conn.Subprotocol())
	}
	conn.CloseNow()
}

func TestTimeoutIsCappedByPolicy(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "acme")
	for _, to := range []protocol.Timeout{protocol.TimeoutOf(60000), protocol.TimeoutLifted(), {}} {
		res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => { while (true) {} }", Timeout: to})
		if err != nil {
			t.Fatal(err)
		}
		if res.Error != protocol.NewExecutionTimeoutError(300).Error() {
			t.Fatalf("timeout %v ran under %q, want the tenant's 300 ms cap", to, res.Error)
		}
	}
}

func TestNativeOutboundIsVetoed(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "globex")
	if _, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"}); err != nil {
		t.Fatal(err)
	}
	if m := e.far.Last().Outbound.Mode(); m != protocol.OutboundDisabled {
		t.Fatalf("a native request reached the backend as %s, want disabled (the tenant has no native outbound)", m)
	}
	stub := func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 204}, nil
	}
	if _, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "fetch:https://x/", Outbound: protocol.OutboundVia(stub)}); err != nil {
		t.Fatal(err)
	}
	if m := e.far.Last().Outbound.Mode(); m != protocol.OutboundStub {
		t.Fatalf("a stub request reached the backend as %s", m)
	}
}

func TestConcurrencyAndRateLimits(t *testing.T) {
	// At 5 a second a token takes 200 ms: the sequential runs below come
	// faster than that on a machine as loaded as make test makes it (at
	// 50 a second, 20 ms a token, they once did not).
	e := start(t, func(y string) string {
		return strings.Replace(y, "{maxConcurrent: 1, rate: 50, burst: 2}", "{maxConcurrent: 1, rate: 5, burst: 2}", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "initech")
	blocker := e.mustDial(t, "/v1/executor", "initech")
	done := make(chan error, 1)
	go func() {
		_, err := blocker.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "block"})
		done <- err
	}()
	<-e.far.Started
	// No execution of initech has finished, so the wait is the default.
	_, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"})
	want := protocol.NewTenantLimitError("initech", "1 execution in flight", 100*time.Millisecond)
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || err.Error() != want.Error() {
		t.Fatalf("a second execution in flight gave %v, want %q", err, want)
	}
	if d, ok := protocol.RetryAfterOf(err); !ok || d != 100*time.Millisecond {
		t.Fatalf("the hint crossed the wire as %v, %v", d, ok)
	}
	// Closing its connection ends the blocked run (a cancel does not
	// cross capnweb).
	blocker.Close()
	<-done
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.metric(t, `codemode_executions_in_flight{tenant="initech"}`) == "0" }, "initech's run to end")
	// The burst of 2 has one token left (the refused run gave its token
	// back); the next ones inside the same moment are over the rate, each
	// told to wait at most the 200 ms a token takes at 5 a second.
	refused := 0
	for i := 0; i < 5; i++ {
		_, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"})
		if err == nil {
			continue
		}
		d, _ := protocol.RetryAfterOf(err)
		if want := protocol.NewTenantLimitError("initech", "5 executions started per second", d); err.Error() != want.Error() || d <= 0 || d > 200*time.Millisecond {
			t.Fatalf("over the rate: %v, want %q with a wait of at most 200 ms", err, want)
		}
		refused++
	}
	if refused == 0 {
		t.Fatal("no execution was refused over the rate limit")
	}
	for reason, want := range map[string]string{"concurrency": "1", "rate": fmt.Sprint(refused), "budget_executions": "0"} {
		if got := e.metric(t, `codemode_refusals_total{reason="`+reason+`",tenant="initech"}`); got != want {
			t.Errorf("refusals for %s: %s, want %s", reason, got, want)
		}
	}
}

// An execution leaves the concurrency bound before its answer is written:
// a client that sends its next call as the answer arrives is never refused
// for its own last call (the slot once stayed taken until the answer was
// queued, and a fast client raced it).
func TestSequentialCallsNeverMeetTheirOwnConcurrencySlot(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "{maxConcurrent: 1, rate: 50, burst: 2}", "{maxConcurrent: 1}", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "initech")
	for i := 0; i < 500; i++ {
		if _, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"}); err != nil {
			t.Fatalf("call %d, sent after the one before it was answered: %v", i, err)
		}
	}
}

func TestConnectionLimit(t *testing.T) {
	e := start(t, nil)
	for i := 0; i < 3; i++ {
		e.mustDial(t, "/v1/executor", "globex")
	}
	if _, err := e.dial(t, "/v1/executor", e.keys["globex"]); protocol.CodeOf(err) != protocol.CodeConnectionRejected {
		t.Fatalf("a fourth connection gave %v, want it refused", err)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/executor", nil)
	req.Header.Set("Authorization", "Bearer "+e.keys["globex"])
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q; want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if want := "tenant \"globex\" is at its bound of 3 open connections (policy.maxConnections); connect again after one of them closes\n"; string(body) != want {
		t.Fatalf("body %q, want %q", body, want)
	}
	if got := e.metric(t, `codemode_refusals_total{reason="connections",tenant="globex"}`); got != "2" {
		t.Fatalf("connection refusals counted %s, want 2", got)
	}
	e.mustDial(t, "/v1/executor", "initech") // other tenants are unaffected
}

// TestBackendRefusalReachesTheCallerAndIsCounted: a remote member's queue
// at its bound answers QUEUE_OVERFLOW; the caller reads its text and hint
// unchanged, two hops away, and the refusal is counted as queue_full.
func TestBackendRefusalReachesTheCallerAndIsCounted(t *testing.T) {
	e := start(t, nil)
	_, err := e.mustDial(t, "/v1/executor", "globex").Execute(testCtx(t), &protocol.ExecuteRequest{Code: "fault:QUEUE_OVERFLOW"})
	want := protocol.NewQueueOverflowError(4, 40*time.Millisecond)
	var qo *protocol.QueueOverflowError
	if err == nil || err.Error() != want.Error() || !errors.As(err, &qo) {
		t.Fatalf("got %v, want %q", err, want)
	}
	if d, ok := protocol.RetryAfterOf(err); !ok || d != 40*time.Millisecond {
		t.Fatalf("hint %v, %v", d, ok)
	}
	if got := e.metric(t, `codemode_refusals_total{reason="queue_full",tenant="globex"}`); got != "1" {
		t.Fatalf("queue_full refusals: %s, want 1", got)
	}
}

// TestRunClockBudgetOnTheLocalBackend: a run that spends more run clock
// than the tenant's budget leaves it in debt, and the next execution is
// refused until the bucket is back at zero.
func TestRunClockBudgetOnTheLocalBackend(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "policy: {timeoutMs: 300}", "policy: {timeoutMs: 5000, budget: {window: 1h, runClock: 1ms}}", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "acme")
	// Work, not a wall-clock wait: the run clock counts the run's own
	// computing, and gives back what the CPU spent on other processes.
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => { let x = 0; for (let i = 0; i < 1e6; i++) x += i; return 1 }"})
	if err != nil || res.ResultJSON != "1" {
		t.Fatalf("the first run: %+v, %v", res, err)
	}
	_, err = ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"})
	d, _ := protocol.RetryAfterOf(err)
	// Past 29 ms of debt at 1 ms an hour, the wait is over a day (the run
	// computes for about 150 ms).
	if want := protocol.NewTenantLimitError("acme", "a budget of 1ms of run-clock time per 1h0m0s", d); err == nil || err.Error() != want.Error() || d < 24*time.Hour {
		t.Fatalf("got %v, want %q with a wait over a day", err, want)
	}
	if got := e.metric(t, `codemode_refusals_total{reason="budget_run_clock",tenant="acme"}`); got != "1" {
		t.Fatalf("budget_run_clock refusals: %s, want 1", got)
	}
}

func TestFailoverToAHealthyMember(t *testing.T) {
	downURL := func() string {
		hs := httptest.NewServer(http.NotFoundHandler())
		u := wsURL(hs.URL) + "/"
		hs.Close()
		return u
	}()
	e := start(t, func(y string) string {
		// A member that is down comes first; runs go to the healthy one.
		return strings.Replace(y, "      members:\n", "      members:\n        - url: "+downURL+"\n", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "globex")
	for i := 0; i < 3; i++ {
		res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:7"})
		if err != nil || res.ResultJSON != "7" {
			t.Fatalf("run %d: %+v, %v", i, res, err)
		}
	}
}

func TestProxyRouteStripsTheCredential(t *testing.T) {
	e := start(t, nil)
	req, _ := http.NewRequest("GET", e.url+"/v1/proxy/things", nil)
	req.Header.Set("Authorization", "Bearer "+e.keys["globex"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "upstream saw /v1/proxy/things" {
		t.Fatalf("proxy answered %d %q", resp.StatusCode, body)
	}
	h := <-e.seen
	if h.Get("Authorization") != "" || h.Get("X-Codemode-Tenant") != "globex" {
		t.Fatalf("the upstream saw Authorization %q and tenant %q", h.Get("Authorization"), h.Get("X-Codemode-Tenant"))
	}
	req, _ = http.NewRequest("GET", e.url+"/v1/proxy/things", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("an unauthenticated proxy request got %d", resp.StatusCode)
	}
}

func TestLocalBackendThroughTheGateway(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "acme")
	var mu sync.Mutex
	var calls []string
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{
		Code:      "async () => (await store.get('a')) + 1",
		Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"get"}}},
		Dispatch: func(_ context.Context, p, tool, args string) (string, error) {
			mu.Lock()
			calls = append(calls, p+"."+tool+" "+args)
			mu.Unlock()
			return `{"result":41}`, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := res.Value(); v != 42.0 || len(calls) != 1 || calls[0] != `store.get "a"` {
		t.Fatalf("got %+v (calls %v)", res, calls)
	}
}

func TestProxyRouteCarriesWebSockets(t *testing.T) {
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Sec-WebSocket-Protocol"), auth.SubprotocolPrefix) || r.Header.Get("Authorization") != "" {
			http.Error(w, "the credential reached the upstream", http.StatusTeapot)
			return
		}
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"chat.v1"}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		typ, msg, err := c.Read(r.Context())
		if err == nil {
			c.Write(r.Context(), typ, append([]byte("echo:"+r.Header.Get("X-Codemode-Tenant")+":"), msg...))
		}
	}))
	defer echo.Close()
	e := start(t, func(y string) string {
		return strings.Replace(y, "pins:\n", "  - path: /v1/ws/*\n    kind: proxy\n    upstream: "+echo.URL+"\npins:\n", 1)
	})
	ctx := testCtx(t)
	conn, _, err := websocket.Dial(ctx, wsURL(e.url)+"/v1/ws/room", &websocket.DialOptions{
		Subprotocols: []string{"chat.v1", auth.SubprotocolPrefix + e.keys["globex"]},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if conn.Subprotocol() != "chat.v1" {
		t.Fatalf("negotiated %q through the proxy", conn.Subprotocol())
	}
	if err := conn.Write(ctx, websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	_, msg, err := conn.Read(ctx)
	if err != nil || string(msg) != "echo:globex:hi" {
		t.Fatalf("read %q, %v", msg, err)
	}
}

// TestNativeFetchWhereAllowedIsCounted: a tenant and backend that both allow
// native fetch reach an allowed range; the requests and the run clock show
// in the metrics.
func TestNativeFetchWhereAllowedIsCounted(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") }))
	defer site.Close()
	e := start(t, func(y string) string {
		y = strings.Replace(y, "local: {poolSize: 1, queue: 8}", "local: {poolSize: 1, queue: 8, nativeOutbound: true, native: {allow: [127.0.0.0/8]}}", 1)
		return strings.Replace(y, "policy: {timeoutMs: 300}", "policy: {timeoutMs: 5000, nativeOutbound: true}", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "acme")
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{
		Code: fmt.Sprintf("async () => (await (await fetch(%q)).text()) + (await (await fetch(%q)).text())", site.URL, site.URL),
	})
	if err != nil || res.ResultJSON != `"pagepage"` {
		t.Fatalf("native fetch through the gateway: %+v, %v", res, err)
	}
	resp, err := http.Get(e.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`codemode_outbound_requests_total{mode="native",tenant="acme"} 2`,
		`codemode_outbound_total{mode="native",tenant="acme"} 1`,
		`codemode_execution_run_clock_seconds_count{backend="local",tenant="acme"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestDrainClosesHeldHandles: Drain fails readiness at once, turns new
// executions away with QUEUE_OVERFLOW, and closes every retained execution
// this replica pinned, on its backend.
func TestDrainClosesHeldHandles(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "globex")
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	if err := e.gw.Drain(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if e.far.Held() != 0 || len(e.far.Closed()) != 1 {
		t.Fatalf("after Drain the backend holds %d executions (closed %v)", e.far.Held(), e.far.Closed())
	}
	resp, err := http.Get(e.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz answered %d while draining", resp.StatusCode)
	}
	_, err = ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"})
	const want = "This gateway is draining for a restart, so the execution was turned away before it started. Retry it; another replica, or this one after the restart, will run it."
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || err.Error() != want {
		t.Fatalf("an execution while draining gave %v, want QUEUE_OVERFLOW %q", err, want)
	}
	if got := e.metric(t, `codemode_refusals_total{reason="draining",tenant="globex"}`); got != "1" {
		t.Fatalf("draining refusals: %s, want 1", got)
	}
}

// TestTenantMemoryLimit: a tenant's policy lowers the memory limit of its
// runs below its local backend's.
func TestTenantMemoryLimit(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "policy: {timeoutMs: 300}", "policy: {timeoutMs: 30000, memoryMB: 32}", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "acme")
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{
		Code: executortest.Keeps64MB,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.NewMemoryLimitError(32).Error(); res.Error != want {
		t.Fatalf("got %+v, want %q", res, want)
	}
}

// TestTenantNativeDenyBindsInsideTheBackendsAllowList: the backend allows
// loopback for native fetch; a tenant whose policy denies it is refused.
func TestTenantNativeDenyBindsInsideTheBackendsAllowList(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") }))
	defer site.Close()
	e := start(t, func(y string) string {
		y = strings.Replace(y, "local: {poolSize: 1, queue: 8}", "local: {poolSize: 1, queue: 8, nativeOutbound: true, native: {allow: [127.0.0.0/8]}}", 1)
		return strings.Replace(y, "policy: {timeoutMs: 300}", "policy: {timeoutMs: 5000, nativeOutbound: true, nativeDeny: [127.0.0.1/32]}", 1)
	})
	res, err := e.mustDial(t, "/v1/executor", "acme").Execute(testCtx(t), &protocol.ExecuteRequest{
		Code: fmt.Sprintf("async () => { try { return await (await fetch(%q)).text() } catch (e) { return 'refused' } }", site.URL),
	})
	if err != nil || res.ResultJSON != `"refused"` {
		t.Fatalf("the tenant's denied range was reached: %+v, %v", res, err)
	}
}

// TestTenantsNeverShareALocalWorker: isolateTenants is deprecated and
// ignored, even when false. A local group hosts many executions of one
// tenant in one worker process, never two tenants': two parked runs of
// acme keep one process busy, and a parked run of globex beside them a
// second one.
func TestTenantsNeverShareALocalWorker(t *testing.T) {
	e := start(t, func(y string) string {
		y = strings.Replace(y, "local: {poolSize: 1, queue: 8}", "local: {maxWorkers: 3, minWorkers: 1, queue: 8, isolateTenants: false}", 1)
		return strings.Replace(y, "  - name: globex\n    backend: far", "  - name: globex\n    backend: local", 1)
	})
	busy := func() string { return e.metric(t, `codemode_workers_busy{backend="local"}`) }
	waiting, release := make(chan struct{}, 3), make(chan struct{})
	var wg sync.WaitGroup
	park := func(tenant string) {
		ex := e.mustDial(t, "/v1/executor", tenant)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{
				Code:      "async () => await gate.wait()",
				Providers: []protocol.ProviderDescriptor{{Name: "gate", Tools: []string{"wait"}}},
				Dispatch: func(context.Context, string, string, string) (string, error) {
					waiting <- struct{}{}
					<-release
					return `{"result":1}`, nil
				},
			})
			if err != nil {
				t.Error(err)
			}
		}()
		<-waiting
	}
	park("acme")
	park("acme")
	if got := busy(); got != "1" {
		t.Fatalf("busy workers with two parked runs of one tenant: %s, want 1", got)
	}
	park("globex")
	if got := busy(); got != "2" {
		t.Fatalf("busy workers with a parked run of a second tenant: %s, want 2", got)
	}
	close(release)
	wg.Wait()
}

// TestCloseTellsClientsToReconnect: when the gateway stops, every open
// executor session is closed with 1001 and GoingAwayReason, so a client
// reads why and knows to connect again, rather than meeting a dead socket.
func TestCloseTellsClientsToReconnect(t *testing.T) {
	e := start(t, nil)
	sess, err := capnweb.Dial(testCtx(t), wsURL(e.url)+"/v1/executor", nil, capnweb.Options{
		Dial: &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.keys["acme"]}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if v, err := sess.Main().Call(testCtx(t), "protocolVersion"); err != nil || v != float64(protocol.ProtocolVersion) {
		t.Fatalf("protocolVersion = %v, %v", v, err)
	}
	if err := e.gw.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sess.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client's session outlived the gateway")
	}
	var be *capnweb.BrokenError
	if err := sess.Err(); !errors.As(err, &be) || be.CloseCode != 1001 || be.Reason != gateway.GoingAwayReason {
		t.Fatalf("the session ended with %v, want 1001 %q", err, gateway.GoingAwayReason)
	}
}

// TestAuthFailuresNameTheTenantWhenProved: codemode_auth_failures_total
// carries the tenant a refused credential proved it belongs to (a JWT
// whose signature verified but which expired, a key refused on a route or
// from an origin), else "unknown"; a JWT's connection logs a name for the
// token, never an empty credential.
func TestAuthFailuresNameTheTenantWhenProved(t *testing.T) {
	e := start(t, nil)
	jwtFor := func(claims jwt.MapClaims, secret string) string {
		s, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
		return s
	}
	claims := func(tenant string, exp time.Time) jwt.MapClaims {
		return jwt.MapClaims{"iss": "https://issuer.example", "aud": "gateway", "tenant": tenant, "exp": exp.Unix()}
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	for _, c := range []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"no credential", "/v1/executor", nil, 401},
		{"unknown key", "/v1/executor", bearer(auth.NewAPIKey()), 401},
		{"forged jwt", "/v1/executor", bearer(jwtFor(claims("globex", future), strings.Repeat("x", 32))), 401},
		{"forged and expired jwt", "/v1/executor", bearer(jwtFor(claims("globex", past), strings.Repeat("x", 32))), 401},
		{"expired jwt", "/v1/executor", bearer(jwtFor(claims("globex", past), jwtSecret)), 401},
		{"expired jwt of no configured tenant", "/v1/executor", bearer(jwtFor(claims("hooli", past), jwtSecret)), 401},
		{"jwt of no configured tenant", "/v1/executor", bearer(jwtFor(claims("hooli", future), jwtSecret)), 403},
		{"tenant not on the route", "/v1/acme-only", bearer(e.keys["globex"]), 403},
		{"foreign origin", "/v1/executor", http.Header{"Authorization": {"Bearer " + e.keys["acme"]}, "Origin": {"https://evil.test"}}, 403},
	} {
		if got := e.upgrade(t, c.path, c.header); got != c.want {
			t.Errorf("%s: status %d, want %d", c.name, got, c.want)
		}
	}
	for series, want := range map[string]string{
		`codemode_auth_failures_total{reason="unauthenticated",tenant="unknown"}`: "5",
		`codemode_auth_failures_total{reason="unauthenticated",tenant="globex"}`:  "1",
		`codemode_auth_failures_total{reason="forbidden",tenant="unknown"}`:       "1",
		`codemode_auth_failures_total{reason="forbidden",tenant="globex"}`:        "1",
		`codemode_auth_failures_total{reason="forbidden",tenant="acme"}`:          "1",
		`codemode_auth_failures_total{reason="unauthenticated",tenant="hooli"}`:   "absent",
	} {
		if got := e.metric(t, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
	// A token with no subject and no kid is named by its issuer.
	ex, err := e.dial(t, "/v1/executor", jwtFor(claims("globex", future), jwtSecret))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "result:1"}); err != nil || res.ResultJSON != "1" {
		t.Fatalf("the JWT's connection ran %+v, %v", res, err)
	}
	ex.Close()
	const want = `credential="iss https://issuer.example"`
	testutil.WaitFor(t, 10*time.Second, func() bool {
		for _, line := range strings.Split(e.logs.String(), "\n") {
			if strings.Contains(line, "msg=\"connection closed\"") && strings.Contains(line, " "+want+" ") {
				return true
			}
		}
		return false
	}, "the JWT's connection to log %s:\n%s", want, e.logs)
}
