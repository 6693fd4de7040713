package gateway_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// remoteTenantGateway serves one tenant on a remote group of the members
// given, logging into logs; it returns the tenant's executor, which does
// not retry (each call reads the gateway's one answer), and the route's
// URL.
func remoteTenantGateway(t *testing.T, logs *testutil.Buffer, members ...string) (*remote.Executor, string) {
	t.Helper()
	key := auth.NewAPIKey()
	hash, _ := auth.HashAPIKey(key)
	var list []string
	for _, m := range members {
		list = append(list, fmt.Sprintf("{url: %q}", m))
	}
	src := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: far
    type: remote
    remote: {members: [%s], dialTimeout: 2s, healthInterval: 1h}
tenants:
  - {name: globex, backend: far, keys: [{name: g, hash: %s}]}
routes:
  - {path: /v1/executor, kind: executor}
`, strings.Join(list, ", "), hash)
	_, hs, _ := serveConfig(t, src, logs)
	route := wsURL(hs.URL) + "/v1/executor"
	ex, err := remote.Dial(testCtx(t), route, remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, Retry: remote.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex, route
}

// A remote member that cannot be reached is reported to the tenant on its
// open connection without its address, as the retryable QUEUE_OVERFLOW
// of NoExecutorError (it heals once the member is back); the operator's
// log keeps the address. A wrong key at connect time is still
// CONNECTION_REJECTED, which no retry fixes.
func TestTenantsNeverReadAnUnreachableMembersAddress(t *testing.T) {
	var logs testutil.Buffer
	dead := deadURL(t)
	ex, route := remoteTenantGateway(t, &logs, dead)
	_, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"})
	want := "No executor server behind this gateway could take the execution, so it did not start. Retry it in a few seconds; an executor server that is down or restarting takes executions again once it is back."
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || !protocol.CodeOf(err).Retryable() || executorapi.Message(err) != want {
		t.Fatalf("the tenant read %v (%s), want QUEUE_OVERFLOW %q", err, protocol.CodeOf(err), want)
	}
	wrong := http.Header{"Authorization": {"Bearer " + auth.NewAPIKey()}}
	if _, err := remote.Dial(testCtx(t), route, remote.Options{Header: wrong}); protocol.CodeOf(err) != protocol.CodeConnectionRejected || protocol.CodeOf(err).Retryable() {
		t.Fatalf("a wrong key at connect time read %v (%s), want CONNECTION_REJECTED", err, protocol.CodeOf(err))
	}
	line := regexp.MustCompile(`(?m)^.* level=WARN msg="executor server call failed; the tenant was told without its address" backend=far member=0 url=` + regexp.QuoteMeta(dead) + ` error=.*` + regexp.QuoteMeta(strings.TrimSuffix(strings.TrimPrefix(dead, "ws://"), "/")) + `.*$`)
	if !line.MatchString(logs.String()) {
		t.Fatalf("the log does not keep the address:\n%s", logs.String())
	}
	// No member took it: its execution line names the group it was for.
	execution := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=execution tenant=globex connection=[0-9a-f]+ request=[0-9a-f]{16} backend=far outcome=queue_overflow wallMs=\S+ retained=false$`)
	if !execution.MatchString(logs.String()) {
		t.Fatalf("no execution line naming the group:\n%s", logs.String())
	}
}

// A member whose connection breaks under a run: the tenant reads
// CONNECTION_BROKEN without the addresses of the socket.
func TestTenantsNeverReadABrokenMembersAddress(t *testing.T) {
	rec := executortest.NewRecorder()
	srv := executorapi.NewServer(rec, executorapi.ServerOptions{})
	hs := httptest.NewUnstartedServer(srv)
	conns := &trackingListener{Listener: hs.Listener}
	hs.Listener = conns
	hs.Start()
	defer func() { hs.Close(); srv.Close() }()
	var logs testutil.Buffer
	ex, _ := remoteTenantGateway(t, &logs, wsURL(hs.URL)+"/")
	done := make(chan error, 1)
	go func() {
		_, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "block"})
		done <- err
	}()
	<-rec.Started
	conns.closeAll() // hijacked WebSocket connections included
	err := <-done
	want := "The connection to the executor server behind this gateway broke during the call, so its outcome is unknown. The gateway's operator has the details in its log."
	if protocol.CodeOf(err) != protocol.CodeConnectionBroken || executorapi.Message(err) != want {
		t.Fatalf("the tenant read %v (%s), want CONNECTION_BROKEN %q", err, protocol.CodeOf(err), want)
	}
	if !strings.Contains(logs.String(), "url="+wsURL(hs.URL)+"/") {
		t.Fatalf("the log does not keep the address:\n%s", logs.String())
	}
}

// trackingListener remembers the connections it accepted, so a test can
// cut them all, WebSocket ones (which the HTTP server no longer tracks)
// included.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
}
