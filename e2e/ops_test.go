package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

func oneTenantConfig(hash string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
drainTimeout: 20s
log: {format: json}
backends:
  - name: local
    type: local
    local: {maxWorkers: 2}
tenants:
  - name: alpha
    backend: local
    keys: [{name: alpha-key, hash: %s}]
routes:
  - path: /v1/executor
    kind: executor
`, hash)
}

// metric reads one sample from a Prometheus text exposition.
func metric(t *testing.T, text, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no sample %s in:\n%s", series, text)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// TestMetricsCountAScriptedWorkload scrapes the admin listener after a
// workload whose counts are known.
func TestMetricsCountAScriptedWorkload(t *testing.T) {
	key, hash := newKey(t)
	gw := startGatewayProcess(t, oneTenantConfig(hash))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := remote.Dial(ctx, "ws"+strings.TrimPrefix(gw.url, "http")+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	dispatch := func(context.Context, string, string, string) (string, error) { return `{"result":1}`, nil }
	for i := 0; i < 3; i++ {
		if _, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => (await s.a()) + (await s.b())",
		Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"a", "b"}}}, Dispatch: dispatch}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => { while (true) {} }", Timeout: protocol.TimeoutOf(200)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => { throw new Error('x') }"}); err != nil {
		t.Fatal(err)
	}
	stub := func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 200, Body: []byte(req.URL)}, nil
	}
	if _, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => { await fetch('https://a.example/'); await fetch('https://b.example/'); return 1 }",
		Outbound: protocol.OutboundVia(stub)}); err != nil {
		t.Fatal(err)
	}
	// One refused connection.
	if _, err := remote.Dial(ctx, "ws"+strings.TrimPrefix(gw.url, "http")+"/v1/executor", remote.Options{}); err == nil {
		t.Fatal("a connection without a key was accepted")
	}
	code, body := testutil.Get(t, gw.admin+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d", code)
	}
	for series, want := range map[string]float64{
		`codemode_executions_total{backend="local",outcome="ok",tenant="alpha"}`:         5,
		`codemode_executions_total{backend="local",outcome="timeout",tenant="alpha"}`:    1,
		`codemode_executions_total{backend="local",outcome="user_error",tenant="alpha"}`: 1,
		`codemode_tool_calls_total{result="ok",tenant="alpha"}`:                          2,
		`codemode_outbound_total{mode="disabled",tenant="alpha"}`:                        6,
		`codemode_outbound_total{mode="stub",tenant="alpha"}`:                            1,
		`codemode_outbound_requests_total{mode="stub",tenant="alpha"}`:                   2,
		`codemode_execution_run_clock_seconds_count{backend="local",tenant="alpha"}`:     7,
		`codemode_auth_failures_total{reason="unauthenticated",tenant="unknown"}`:        1,
		`codemode_connections{kind="executor",tenant="alpha"}`:                           1,
		`codemode_executions_in_flight{tenant="alpha"}`:                                  0,
		`codemode_backend_healthy{backend="local",member="local"}`:                       1,
		`codemode_worker_kills_total{backend="local",layer="heap"}`:                      0,
		`codemode_queue_overflows_total{backend="local"}`:                                0,
		`codemode_executions_queued{backend="local"}`:                                    0,
		`codemode_workers_busy{backend="local"}`:                                         0,
	} {
		if got := metric(t, body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// The pool starts its second worker beside the runs, on its own: on a
	// loaded machine it may count a moment after them.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		_, body := testutil.Get(t, gw.admin+"/metrics")
		return metric(t, body, `codemode_workers_started_total{backend="local"}`) >= 2
	}, "codemode_workers_started_total to count the pool's 2 workers")
	if alive := metric(t, body, `codemode_workers_alive{backend="local"}`); alive < 1 || alive > 2 {
		t.Errorf("codemode_workers_alive = %v, want 1 to 2 (pool size 2)", alive)
	}
	if code, _ := testutil.Get(t, gw.admin+"/healthz"); code != 200 {
		t.Fatalf("/healthz answered %d", code)
	}
	if code, _ := testutil.Get(t, gw.admin+"/readyz"); code != 200 {
		t.Fatalf("/readyz answered %d", code)
	}
}

// TestSIGTERMDrains: a run in flight when SIGTERM arrives finishes with its
// result, readiness fails at once, new connections are refused, and the
// process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	key, hash := newKey(t)
	gw := startGatewayProcess(t, oneTenantConfig(hash))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(gw.url, "http") + "/v1/executor"
	header := http.Header{"Authorization": {"Bearer " + key}}
	ex, err := remote.Dial(ctx, wsURL, remote.Options{Header: header})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	inTool := make(chan struct{})
	release := make(chan struct{})
	done := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := ex.Execute(ctx, &protocol.ExecuteRequest{
			Code:      "async () => 'finished: ' + (await s.slow())",
			Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"slow"}}},
			Dispatch: func(ctx context.Context, _, _, _ string) (string, error) {
				close(inTool)
				<-release
				return `{"result":"yes"}`, nil
			},
		})
		if err != nil {
			t.Errorf("the run in flight failed: %v", err)
		}
		done <- res
	}()
	<-inTool
	if err := gw.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if code, _ := testutil.Get(t, gw.admin+"/readyz"); code == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("readiness never went false after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := remote.Dial(ctx, wsURL, remote.Options{Header: header, DialTimeout: 2 * time.Second}); err == nil {
		t.Fatal("a new connection was accepted while draining")
	}
	close(release)
	if res := <-done; res == nil || res.ResultJSON != `"finished: yes"` {
		t.Fatalf("the run in flight ended with %+v", res)
	}
	exited := make(chan error, 1)
	go func() { exited <- gw.proc.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the gateway exited with %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after draining")
	}
}

// TestSIGHUPReloads: a reload adds a tenant and revokes a key without
// dropping the connection that key opened; an invalid file is refused and
// the running configuration stays.
func TestSIGHUPReloads(t *testing.T) {
	oldKey, oldHash := newKey(t)
	newTenantKey, newTenantHash := newKey(t)
	gw := startGatewayProcess(t, oneTenantConfig(oldHash))
	path := gw.configPath
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(gw.url, "http") + "/v1/executor"
	dial := func(key string) (*remote.Executor, error) {
		return remote.Dial(ctx, wsURL, remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, DialTimeout: 5 * time.Second})
	}
	open, err := dial(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if _, err := dial(newTenantKey); err == nil {
		t.Fatal("a key no tenant has was accepted")
	}
	// The new file revokes alpha's key (alpha keeps a new one) and adds
	// tenant beta.
	_, alphaNewHash := newKey(t)
	cfg := oneTenantConfig(alphaNewHash) + fmt.Sprintf("  - name: beta\n    backend: local\n    keys: [{name: beta-key, hash: %s}]\n", newTenantHash)
	cfg = strings.Replace(cfg, "routes:\n", "", 1)
	cfg = strings.Replace(cfg, "  - path: /v1/executor\n    kind: executor\n", "", 1) + "routes:\n  - path: /v1/executor\n    kind: executor\n"
	writeFile(t, path, cfg)
	gw.proc.cmd.Process.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 15*time.Second, func() bool {
		ex, err := dial(newTenantKey)
		if ex != nil {
			ex.Close()
		}
		return err == nil
	}, "the added tenant to connect")
	if _, err := dial(oldKey); err == nil {
		t.Fatal("the revoked key still opens new connections")
	}
	res, err := open.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 'still open'"})
	if err != nil || res.ResultJSON != `"still open"` {
		t.Fatalf("the connection opened before the reload: %+v, %v", res, err)
	}
	// An invalid file is refused; beta keeps working.
	writeFile(t, path, "listen: [broken\n")
	gw.proc.cmd.Process.Signal(syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	ex, err := dial(newTenantKey)
	if err != nil {
		t.Fatalf("after an invalid reload the running configuration is gone: %v", err)
	}
	ex.Close()
	// `gateway reload` reports the refusal through the admin listener.
	out, err := exec.Command(gatewayBinary(t), "reload", "--admin", gw.admin).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refused") {
		t.Fatalf("gateway reload of an invalid file said %q, %v", out, err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// selfSigned writes a fresh self-signed certificate for 127.0.0.1 into dir
// and returns it parsed.
func selfSigned(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "gateway-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	writeFile(t, filepath.Join(dir, "cert.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, filepath.Join(dir, "key.pem"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// TestTLSAndCertificateReload: the gateway serves wss:// from certificate
// files, and SIGHUP picks up a renewed certificate.
func TestTLSAndCertificateReload(t *testing.T) {
	key, hash := newKey(t)
	dir := t.TempDir()
	first := selfSigned(t, dir)
	cfg := strings.Replace(oneTenantConfig(hash), "listen: 127.0.0.1:0\n",
		fmt.Sprintf("listen: 127.0.0.1:0\ntls:\n  certFile: %s\n  keyFile: %s\n", filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")), 1)
	gw := startGatewayProcess(t, cfg)
	if !strings.HasPrefix(gw.url, "https://") {
		t.Fatalf("the gateway serves %s, want https", gw.url)
	}
	served := func() *x509.Certificate {
		conn, err := tls.Dial("tcp", strings.TrimPrefix(gw.url, "https://"), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	if served().SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("the gateway does not serve the configured certificate")
	}
	pool := x509.NewCertPool()
	pool.AddCert(first)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := remote.Dial(ctx, "wss"+strings.TrimPrefix(gw.url, "https")+"/v1/executor",
		remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	if res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 'over tls'"}); err != nil || res.ResultJSON != `"over tls"` {
		t.Fatalf("%+v %v", res, err)
	}
	second := selfSigned(t, dir)
	gw.proc.cmd.Process.Signal(syscall.SIGHUP)
	testutil.WaitFor(t, 15*time.Second, func() bool { return served().SerialNumber.Cmp(second.SerialNumber) == 0 }, "the renewed certificate to be served")
}

// TestTwoReplicasRouteOneHandle: two gateway processes with one
// configuration and one id key; a handle granted through replica A is
// invoked through replica B, which never saw the grant; a forged id meets
// HANDLES_CLOSED.
func TestTwoReplicasRouteOneHandle(t *testing.T) {
	memberKey, memberHash := newKey(t)
	member := startExecutorServer(t, "--key-hash", memberHash)
	key, hash := newKey(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
executionIds: {keyEnv: GATEWAY_ID_KEY}
backends:
  - name: pool
    type: remote
    remote:
      members: [{url: %q, keyEnv: MEMBER_KEY}]
tenants:
  - name: app
    backend: pool
    keys: [{name: app-key, hash: %s}]
routes:
  - {path: /v1/executor, kind: executor}
`, member.url, hash)
	env := []string{"MEMBER_KEY=" + memberKey, "GATEWAY_ID_KEY=" + strings.Repeat("shared-id-key-", 3)}
	a := startGatewayProcess(t, cfg, env...)
	b := startGatewayProcess(t, cfg, env...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial := func(gw *runningGateway) *remote.Executor {
		ex, err := remote.Dial(ctx, "ws"+strings.TrimPrefix(gw.url, "http")+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		return ex
	}
	viaA, viaB := dial(a), dial(b)
	res, err := viaA.Execute(ctx, &protocol.ExecuteRequest{
		Code:          `async () => { let n = 0; return (req) => new Response(String(++n)) }`,
		RetainHandles: true,
	})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant through replica A: %+v, %v", res, err)
	}
	for i, ex := range []*remote.Executor{viaA, viaB, viaB} {
		resp, err := ex.InvokeHandle(ctx, res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
		if err != nil || string(resp.Body) != strconv.Itoa(i+1) {
			t.Fatalf("invocation %d: %+v, %v", i+1, resp, err)
		}
	}
	forged := res.ExecutionID[:len(res.ExecutionID)-4] + "AAAA"
	if forged == res.ExecutionID {
		forged = res.ExecutionID[:len(res.ExecutionID)-4] + "BBBB"
	}
	if _, err := viaB.InvokeHandle(ctx, forged, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"}); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("a forged id gave %v, want HANDLES_CLOSED", err)
	}
	if err := viaB.CloseHandles(ctx, res.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if _, err := viaA.InvokeHandle(ctx, res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"}); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("after replica B closed the handles, replica A gave %v", err)
	}
}

// TestExecutorServerAdminEndpoints: `gateway serve --executor-server
// --admin-listen` answers the probes and counts the executions it ran.
func TestExecutorServerAdminEndpoints(t *testing.T) {
	key, hash := newKey(t)
	srv, admin := startExecutorServerWithAdmin(t, "--key-hash", hash)
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		if code, body := testutil.Get(t, admin+path); code != 200 || body != want {
			t.Fatalf("%s answered %d %q, want 200 %q", path, code, body, want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex := dialWithKey(ctx, t, srv.url, key)
	for _, code := range []string{"async () => 1", "async () => 2", "async () => { throw new Error('x') }"} {
		if _, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: code}); err != nil {
			t.Fatal(err)
		}
	}
	code, body := testutil.Get(t, admin+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d", code)
	}
	for series, want := range map[string]float64{
		// A caller that names no tenant (no gateway) is tenant "".
		`codemode_executions_total{backend="local",outcome="ok",tenant=""}`:         2,
		`codemode_executions_total{backend="local",outcome="user_error",tenant=""}`: 1,
		`codemode_execution_wall_seconds_count{backend="local",tenant=""}`:          3,
		`codemode_executions_in_flight{tenant=""}`:                                  0,
		`codemode_queue_overflows_total{backend="local"}`:                           0,
	} {
		if got := metric(t, body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if started := metric(t, body, `codemode_workers_started_total{backend="local"}`); started < 1 {
		t.Errorf("codemode_workers_started_total = %v, want at least 1", started)
	}
	checkProcessSeries(t, body)
	// The admin listener is the operator's: it serves no ExecutorApi, and
	// an executor server has no configuration to reload.
	// (No body type: the admin guard refuses the ones a browser's form
	// could send before any route is looked up.)
	if status := adminStatus(t, http.MethodPost, admin+"/reload", ""); status != http.StatusNotFound {
		t.Fatalf("POST /reload on an executor server answered %d", status)
	}
}

// adminStatus is the status an admin listener answers method on url with,
// with auth as the Authorization header when it is not empty.
func adminStatus(t *testing.T, method, url, auth string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestExecutorServerAdminToken: with --admin-token-env the executor
// server's /metrics asks for the token, and the probes answer without it.
func TestExecutorServerAdminToken(t *testing.T) {
	const token = "exec-admin-token-0123456789"
	t.Setenv("CODEMODE_EXEC_ADMIN_TOKEN", token)
	_, admin := startExecutorServerWithAdmin(t, "--admin-token-env", "CODEMODE_EXEC_ADMIN_TOKEN")
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"} {
		if code, body := testutil.Get(t, admin+path); code != 200 || body != want {
			t.Errorf("%s without the token answered %d %q, want 200 %q", path, code, body, want)
		}
	}
	if code, body := testutil.Get(t, admin+"/metrics"); code != http.StatusUnauthorized || body != gateway.AdminTokenRequired+"\n" {
		t.Errorf("/metrics without the token answered %d %q", code, body)
	}
	if status := adminStatus(t, http.MethodGet, admin+"/metrics", "Bearer "+token); status != http.StatusOK {
		t.Errorf("/metrics with the token answered %d", status)
	}
}
