package gateway

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	itestutil "github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// forwarder is a loopback TCP forwarder between the gateway and a member:
// switched off it cuts the connections it carries and closes each new one
// at once, so the member cannot be reached while its process runs on.
type forwarder struct {
	ln     net.Listener
	mu     sync.Mutex
	target string // host:port of the member
	off    bool
	conns  map[net.Conn]struct{}
}

func startForwarder(t *testing.T, target string) *forwarder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.carry(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		f.switchOff()
	})
	return f
}

// url is the member's WebSocket URL through the forwarder.
func (f *forwarder) url() string { return "ws://" + f.ln.Addr().String() + "/" }

// carry forwards c to the target, or closes it while switched off.
func (f *forwarder) carry(c net.Conn) {
	f.mu.Lock()
	off, target := f.off, f.target
	f.mu.Unlock()
	if off {
		c.Close()
		return
	}
	u, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	f.mu.Lock()
	if f.off { // switched off while dialing
		f.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	f.conns[c], f.conns[u] = struct{}{}, struct{}{}
	f.mu.Unlock()
	go func() { io.Copy(u, c); u.Close(); c.Close() }()
	io.Copy(c, u)
	c.Close()
	u.Close()
}

// switchOff cuts every carried connection and refuses new ones.
func (f *forwarder) switchOff() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off = true
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
}

// switchOn carries new connections to target.
func (f *forwarder) switchOn(target string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off, f.target = false, target
}

// memberServer is an executor server on loopback that records what it is
// asked, with its host:port and a func that ends it.
func memberServer(t *testing.T) (addr string, rec *executortest.Recorder, stop func()) {
	rec = executortest.NewRecorder()
	srv := executorapi.NewServer(rec, executorapi.ServerOptions{})
	hs := httptest.NewServer(srv)
	var once sync.Once
	stop = func() { once.Do(func() { srv.Close(); hs.Close() }) }
	t.Cleanup(stop)
	return strings.TrimPrefix(hs.URL, "http://"), rec, stop
}

// invokeUntil calls the handle until the call ends other than as passing
// says, and returns that outcome; it fails t after 20 s (the gateway's
// session to a member waits up to 5 s between reconnection attempts).
func invokeUntil(ctx context.Context, t *testing.T, app *tenant, id string, passing func(error) bool) (protocol.OutboundResponse, error) {
	t.Helper()
	req := protocol.OutboundRequest{Method: "POST", URL: "https://app.example/", Body: []byte("x")}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := app.InvokeHandle(ctx, id, "fetch", req)
		if !passing(err) {
			return resp, err
		}
		if time.Now().After(deadline) {
			t.Fatalf("handle calls still end with %v after 20 s", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isCode(code protocol.Code) func(error) bool {
	return func(err error) bool { return protocol.CodeOf(err) == code }
}

// unreachable: the tenant's retryable refusal of a call on a retained
// execution whose member cannot be reached.
func unreachable(err error) bool {
	return protocol.CodeOf(err) == protocol.CodeQueueOverflow && err.Error() == protocol.NewHandlesUnreachableError().Error()
}

// A call on a retained execution whose member cannot be reached (its
// process runs on) reads the retryable QUEUE_OVERFLOW of
// HandlesUnreachableError, never CONNECTION_REJECTED, and the operator's
// log keeps the member's address; the handles stay pinned, and once the
// member is reachable again the same call reaches them.
func TestHandleCallOnAnUnreachableMemberIsRetryable(t *testing.T) {
	addr, rec, _ := memberServer(t)
	fwd := startForwarder(t, addr)
	var logs itestutil.Buffer
	g := newGateway(t, remoteGroupConfig(t, "1h", fwd.url()), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := tenancyCtx(t)
	app := g.state.Load().tenants["app"]
	grant, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || grant.ExecutionID == "" || rec.Held() != 1 {
		t.Fatalf("no grant: %+v, %v (the member holds %d)", grant, err, rec.Held())
	}

	fwd.switchOff()
	// A call sent before the gateway saw its session end breaks, its
	// outcome unknown; once it has, the member cannot be reached.
	_, err = invokeUntil(ctx, t, app, grant.ExecutionID, isCode(protocol.CodeConnectionBroken))
	want := "The executor server that holds this execution's handles could not be reached, so the call did not start. Retry it in a few seconds; if that server restarted meanwhile, its handles are gone and the retry reads HANDLES_CLOSED."
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || !protocol.CodeOf(err).Retryable() || err.Error() != want {
		t.Fatalf("invokeHandle on the unreachable member: %v (%s), want QUEUE_OVERFLOW %q", err, protocol.CodeOf(err), want)
	}
	if err := app.CloseHandles(ctx, grant.ExecutionID); protocol.CodeOf(err) != protocol.CodeQueueOverflow || err.Error() != want {
		t.Fatalf("closeHandles on the unreachable member: %v (%s), want QUEUE_OVERFLOW %q", err, protocol.CodeOf(err), want)
	}
	line := regexp.MustCompile(`(?m)^.* level=WARN msg="executor server call failed; the tenant was told without its address" backend=pool member=0 url=` +
		regexp.QuoteMeta(fwd.url()) + ` error=.*` + regexp.QuoteMeta(fwd.ln.Addr().String()) + `.*$`)
	if !line.MatchString(logs.String()) {
		t.Fatalf("the log does not keep the address:\n%s", logs.String())
	}

	fwd.switchOn(addr)
	// Until the gateway's session reconnects (after its backoff) the call
	// is still refused as unreachable, and then it reaches the handles.
	resp, err := invokeUntil(ctx, t, app, grant.ExecutionID, unreachable)
	if err != nil || string(resp.Body) != "echo:x" {
		t.Fatalf("invokeHandle once the member is back: %+v, %v; want the handle's echo:x", resp, err)
	}
	if rec.Held() != 1 {
		t.Fatalf("the member holds %d executions, want the one retained", rec.Held())
	}
}

// A member whose process is gone, replaced by a new one at its address:
// the call is refused as unreachable while nothing answers, and the retry
// that reaches the new process reads HANDLES_CLOSED, since the handles
// died with the old one; the gateway then forgets the execution.
func TestHandleCallAfterTheMemberWasReplacedReadsHandlesClosed(t *testing.T) {
	oldAddr, _, stopOld := memberServer(t)
	newAddr, _, _ := memberServer(t)
	fwd := startForwarder(t, oldAddr)
	g := newGateway(t, remoteGroupConfig(t, "1h", fwd.url()), Options{})
	ctx := tenancyCtx(t)
	app := g.state.Load().tenants["app"]
	grant, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || grant.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", grant, err)
	}

	fwd.switchOff()
	stopOld()
	if _, err := invokeUntil(ctx, t, app, grant.ExecutionID, isCode(protocol.CodeConnectionBroken)); !unreachable(err) {
		t.Fatalf("invokeHandle with the member gone: %v (%s), want the unreachable refusal", err, protocol.CodeOf(err))
	}

	fwd.switchOn(newAddr)
	_, err = invokeUntil(ctx, t, app, grant.ExecutionID, unreachable)
	closed := protocol.NewHandlesClosedError(grant.ExecutionID).Error()
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != closed {
		t.Fatalf("invokeHandle on the new process: %v (%s), want HANDLES_CLOSED %q", err, protocol.CodeOf(err), closed)
	}
	if err := app.CloseHandles(ctx, grant.ExecutionID); protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != closed {
		t.Fatalf("closeHandles after HANDLES_CLOSED: %v, want HANDLES_CLOSED %q", err, closed)
	}
}
