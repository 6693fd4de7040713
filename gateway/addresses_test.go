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
// given, logging into logs; it returns the tenant's executor.
func remoteTenantGateway(t *testing.T, logs *testutil.Buffer, members ...string) *remote.Executor {
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
	ex, err := remote.Dial(testCtx(t), wsURL(hs.URL)+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// A remote member that cannot be reached is reported to the tenant without
// its address; the operator's log keeps it.
func TestTenantsNeverReadAnUnreachableMembersAddress(t *testing.T) {
	var logs testutil.Buffer
	dead := deadURL(t)
	ex := remoteTenantGateway(t, &logs, dead)
	_, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"})
	want := "The executor server behind this gateway could not be reached, so the call did not start. The gateway's operator has the details in its log."
	if protocol.CodeOf(err) != protocol.CodeConnectionRejected || executorapi.Message(err) != want {
		t.Fatalf("the tenant read %v (%s), want CONNECTION_REJECTED %q", err, protocol.CodeOf(err), want)
	}
	line := regexp.MustCompile(`(?m)^.* level=WARN msg="executor server call failed; the tenant was told without its address" backend=far member=0 url=` + regexp.QuoteMeta(dead) + ` error=.*` + regexp.QuoteMeta(strings.TrimSuffix(strings.TrimPrefix(dead, "ws://"), "/")) + `.*$`)
	if !line.MatchString(logs.String()) {
		t.Fatalf("the log does not keep the address:\n%s", logs.String())
	}
	// No member took it: its execution line names the group it was for.
	execution := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=execution tenant=globex connection=[0-9a-f]+ request=[0-9a-f]{16} backend=far outcome=connection_rejected wallMs=\S+ retained=false$`)
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
	ex := remoteTenantGateway(t, &logs, wsURL(hs.URL)+"/")
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
