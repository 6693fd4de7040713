package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// fakeResolver answers what the test last told it, and counts the
// questions.
type fakeResolver struct {
	mu    sync.Mutex
	addrs []net.IPAddr
	err   error
	asked []string
}

func (r *fakeResolver) answer(err error, ips ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err, r.addrs = err, nil
	for _, ip := range ips {
		r.addrs = append(r.addrs, net.IPAddr{IP: net.ParseIP(ip)})
	}
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, host)
	return slices.Clone(r.addrs), r.err
}

func (r *fakeResolver) questions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.asked)
}

// countingExecutor counts the executions a recorder server ran.
type countingExecutor struct {
	*executortest.Recorder
	runs atomic.Int64
}

func (c *countingExecutor) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	c.runs.Add(1)
	return c.Recorder.ExecuteWith(ctx, req, p)
}

// loopbackPair starts a recorder executor server on 127.0.0.1 and another
// on ::1, at one port, as the members behind one DNS name listen.
func loopbackPair(t *testing.T) (port int, v4, v6 *countingExecutor) {
	t.Helper()
	for range 10 {
		l4, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l4.Addr().(*net.TCPAddr).Port
		l6, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", port))
		if err != nil {
			l4.Close() // the port is taken on ::1: try another
			continue
		}
		v4, v6 = serveRecorder(t, l4), serveRecorder(t, l6)
		return port, v4, v6
	}
	t.Fatal("found no port free on both 127.0.0.1 and ::1")
	return 0, nil, nil
}

func serveRecorder(t *testing.T, l net.Listener) *countingExecutor {
	c := &countingExecutor{Recorder: executortest.NewRecorder()}
	srv := executorapi.NewServer(c, executorapi.ServerOptions{})
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener.Close()
	hs.Listener = l
	hs.Start()
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return c
}

func discoverConfig(t *testing.T, dns string, port int, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("d.yaml", []byte(fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - {name: pool, type: remote, remote: {discover: {dns: %s, port: %d%s}, healthInterval: 1h}}
tenants:
  - {name: app, backend: pool, keys: [{name: k, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]}
routes:
  - {path: /v1/executor, kind: executor}
`, dns, port, extra)), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// urls are the URLs of grp's members, in their order.
func urls(grp *group) []string {
	var out []string
	for _, m := range grp.current() {
		out = append(out, m.entry.URL)
	}
	return out
}

// logLines records the messages logged at warning and above.
type logLines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logLines) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }
func (l *logLines) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.msgs) == 0 {
		return ""
	}
	return l.msgs[len(l.msgs)-1]
}

// Members follow the name's addresses without a reload: an added address
// takes executions, a removed one takes none and keeps the handle pinned
// to it until the handle closes, and is then closed.
func TestDiscoveredMembersFollowTheName(t *testing.T) {
	port, v4, v6 := loopbackPair(t)
	r := &fakeResolver{}
	r.answer(nil, "127.0.0.1")
	g := newGateway(t, discoverConfig(t, "executors.test", port, ", interval: 1h"), Options{Resolver: r})
	grp := g.groups["pool"]
	a4 := fmt.Sprintf("ws://127.0.0.1:%d/", port)
	a6 := fmt.Sprintf("ws://[::1]:%d/", port)
	if got := urls(grp); !slices.Equal(got, []string{a4}) || !grp.current()[0].healthy.Load() || r.asked[0] != "executors.test" {
		t.Fatalf("at start the members are %v (asked %v), want %s, healthy", got, r.asked, a4)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := g.state.Load().tenants["app"]
	grant, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || grant.ExecutionID == "" || v4.runs.Load() != 1 {
		t.Fatalf("no grant on the first member: %+v, %v", grant, err)
	}
	a := grp.current()[0]

	// An address added, in any order and twice: one more member.
	r.answer(nil, "::1", "127.0.0.1", "::1")
	g.discover(grp)
	if got := urls(grp); !slices.Equal(got, []string{a4, a6}) || grp.current()[0] != a || !grp.current()[1].healthy.Load() {
		t.Fatalf("after ::1 was added the members are %v, want %v with the first kept and the second admitted", got, []string{a4, a6})
	}

	// The first address removed: its member takes no new executions but
	// keeps the handle pinned to it.
	r.answer(nil, "::1")
	g.discover(grp)
	if got := urls(grp); !slices.Equal(got, []string{a6}) {
		t.Fatalf("after 127.0.0.1 was removed the members are %v, want [%s]", got, a6)
	}
	for i := range 3 {
		if res, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "result:1"}); err != nil || res.ResultJSON != "1" {
			t.Fatalf("execution %d: %+v, %v", i, res, err)
		}
	}
	if n4, n6 := v4.runs.Load(), v6.runs.Load(); n4 != 1 || n6 != 3 {
		t.Fatalf("127.0.0.1 ran %d and ::1 %d executions, want the grant alone on the first and the three new ones on the second", n4, n6)
	}
	grp.mu.Lock()
	_, retired := grp.retired[a]
	grp.mu.Unlock()
	g.handles.mu.RLock()
	routed := g.handles.members[a.name] == a
	g.handles.mu.RUnlock()
	if !retired || !routed || !g.handles.pins.holds(a) {
		t.Fatalf("the removed member: retired %v, routed %v, pinned %v; want all three while its handle is open", retired, routed, g.handles.pins.holds(a))
	}
	if err := app.CloseHandles(ctx, grant.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if closed := v4.Closed(); len(closed) != 1 {
		t.Fatalf("the removed member closed %v, want the grant's execution", closed)
	}
	waitForgotten(t, g, grp, a)
}

// A failed resolution keeps the members; an answer with no address keeps
// them for emptyGrace and then empties the group, whose executions fail
// as with an unreachable server, until the name resolves again. Each is
// logged and counted.
func TestDiscoveryKeepsMembersThroughFailures(t *testing.T) {
	port, v4, _ := loopbackPair(t)
	r := &fakeResolver{}
	r.answer(nil, "127.0.0.1")
	logs := &logLines{}
	g := newGateway(t, discoverConfig(t, "executors.test", port, ", interval: 1h, emptyGrace: 1m"), Options{Resolver: r, Logger: slog.New(logs)})
	grp := g.groups["pool"]
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	grp.discovery.now = func() time.Time { return now }
	a4 := fmt.Sprintf("ws://127.0.0.1:%d/", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := g.state.Load().tenants["app"]
	metric := func(reason string) string {
		srv := httptest.NewServer(g.AdminHandler())
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		prefix := `codemode_discovery_failures_total{backend="pool",reason="` + reason + `"} `
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, prefix); ok {
				return v
			}
		}
		return "absent"
	}

	r.answer(&net.DNSError{Err: "server misbehaving", Name: "executors.test", IsTemporary: true})
	g.discover(grp)
	if got := urls(grp); !slices.Equal(got, []string{a4}) {
		t.Fatalf("after a failed resolution the members are %v, want [%s]", got, a4)
	}
	if want := "resolving the executor servers' name failed; the members stay as they were"; logs.last() != want {
		t.Fatalf("logged %q, want %q", logs.last(), want)
	}
	if e, m := metric("error"), metric("empty"); e != "1" || m != "0" {
		t.Fatalf("failures counted: error %s, empty %s; want 1 and 0", e, m)
	}

	notFound := &net.DNSError{Err: "no such host", Name: "executors.test", IsNotFound: true}
	r.answer(notFound)
	g.discover(grp)
	now = now.Add(59 * time.Second)
	r.answer(nil) // no address, and no error
	g.discover(grp)
	if got := urls(grp); !slices.Equal(got, []string{a4}) {
		t.Fatalf("within emptyGrace the members are %v, want [%s]", got, a4)
	}
	if want := "the executor servers' name resolves to no address; the members stay until emptyGrace has passed"; logs.last() != want {
		t.Fatalf("logged %q, want %q", logs.last(), want)
	}
	if res, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "result:1"}); err != nil || res.ResultJSON != "1" {
		t.Fatalf("execution within emptyGrace: %+v, %v", res, err)
	}

	now = now.Add(time.Second)
	r.answer(notFound)
	g.discover(grp)
	if got := urls(grp); len(got) != 0 {
		t.Fatalf("past emptyGrace the members are %v, want none", got)
	}
	if want := "the executor servers' name has resolved to no address for emptyGrace; the group has no members until it resolves again"; logs.last() != want {
		t.Fatalf("logged %q, want %q", logs.last(), want)
	}
	_, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "result:2"})
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || err.Error() != protocol.NewNoExecutorError().Error() {
		t.Fatalf("an execution on the empty group: %v, want %s %q", err, protocol.CodeQueueOverflow, protocol.NewNoExecutorError())
	}
	if e, m := metric("error"), metric("empty"); e != "1" || m != "3" {
		t.Fatalf("failures counted: error %s, empty %s; want 1 and 3", e, m)
	}

	r.answer(nil, "127.0.0.1")
	g.discover(grp)
	if res, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "result:3"}); err != nil || res.ResultJSON != "3" {
		t.Fatalf("execution once the name resolves again: %+v, %v", res, err)
	}
	if n := v4.runs.Load(); n != 2 {
		t.Fatalf("the member ran %d executions, want 2 (none while the group was empty)", n)
	}
}

// A reload may change discover's settings, which takes effect with a
// resolution at once; it may not turn discovery into a list.
func TestReloadOfADiscoveredGroup(t *testing.T) {
	port, _, _ := loopbackPair(t)
	r := &fakeResolver{}
	r.answer(nil, "127.0.0.1")
	g := newGateway(t, discoverConfig(t, "executors.test", port, ", interval: 1h"), Options{Resolver: r})
	grp := g.groups["pool"]
	r.answer(nil, "127.0.0.1", "::1")
	if err := g.Reload(discoverConfig(t, "executors.test", port, ", interval: 2h")); err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("ws://127.0.0.1:%d/", port), fmt.Sprintf("ws://[::1]:%d/", port)}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(urls(grp), want) {
		if time.Now().After(deadline) {
			t.Fatalf("after the reload the members are %v (%d questions), want %v", urls(grp), r.questions(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if iv := grp.discovery.settings.Load().Interval; iv != config.Duration(2*time.Hour) {
		t.Fatalf("the interval is %v after the reload, want 2h", iv.Std())
	}
	err := g.Reload(remoteGroupConfig(t, "1h", want[0]))
	if w := "backends (other than the members of a remote group) changed, which takes a restart"; err == nil || err.Error() != w {
		t.Fatalf("turning discovery into a list: %v, want %q", err, w)
	}
}

// With the system's resolver, "localhost" names the executor servers on
// loopback that /etc/hosts gives it.
func TestDiscoveryWithTheSystemResolver(t *testing.T) {
	port, _, _ := loopbackPair(t)
	addrs, err := net.DefaultResolver.LookupIPAddr(context.Background(), "localhost")
	if err != nil || len(addrs) == 0 {
		t.Fatalf("localhost does not resolve here: %v, %v", addrs, err)
	}
	var want []string
	for _, a := range addrs {
		switch a.IP.String() {
		case "127.0.0.1":
			want = append(want, fmt.Sprintf("ws://127.0.0.1:%d/", port))
		case "::1":
			want = append(want, fmt.Sprintf("ws://[::1]:%d/", port))
		default:
			t.Fatalf("localhost resolves to %v, off loopback", a)
		}
	}
	slices.Sort(want) // 127.0.0.1 sorts before ::1, as the members do
	g := newGateway(t, discoverConfig(t, "localhost", port, ""), Options{})
	if got := urls(g.groups["pool"]); !slices.Equal(got, want) {
		t.Fatalf("the members are %v, want %v", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if res, err := g.state.Load().tenants["app"].Execute(ctx, &protocol.ExecuteRequest{Code: "result:7"}); err != nil || res.ResultJSON != "7" {
		t.Fatalf("execution: %+v, %v", res, err)
	}
}
