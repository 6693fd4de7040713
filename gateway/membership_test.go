package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// recorderServer is an executor server on loopback that records what it
// is asked.
func recorderServer(t *testing.T) (string, *executortest.Recorder) {
	rec := executortest.NewRecorder()
	srv := executorapi.NewServer(rec, executorapi.ServerOptions{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/", rec
}

// newGateway is New(cfg, o), with a silent logger unless o names one and
// every backend kind unless o names some, closed when the test ends.
func newGateway(t *testing.T, cfg *config.Config, o Options) *Gateway {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Kinds == nil {
		o.Kinds = kinds.All()
	}
	g, err := New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// waitForgotten waits until grp keeps m no longer as a retired member and
// the handles' table no longer knows m's name: m was closed.
func waitForgotten(t *testing.T, g *Gateway, grp *group, m *member) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, func() bool {
		grp.mu.Lock()
		_, retired := grp.retired[m]
		grp.mu.Unlock()
		g.handles.mu.RLock()
		known := g.handles.members[m.name] != nil
		g.handles.mu.RUnlock()
		return !retired && !known
	}, "the removed member to be closed after its last handle closed")
}

func remoteGroupConfig(t *testing.T, interval string, members ...string) *config.Config {
	t.Helper()
	var list []string
	for _, m := range members {
		list = append(list, fmt.Sprintf("{url: %q}", m))
	}
	cfg, err := config.Parse("m.yaml", []byte(fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - {name: pool, type: remote, remote: {members: [%s], healthInterval: %s}}
tenants:
  - {name: app, backend: pool, keys: [{name: k, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]}
routes:
  - {path: /v1/executor, kind: executor}
`, strings.Join(list, ", "), interval)), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A member a reload removed is closed, and forgotten, once the handles
// pinned to it close; until then ids still route to it.
func TestRemovedMemberClosesWhenItsHandlesDo(t *testing.T) {
	urlA, recA := recorderServer(t)
	urlB, _ := recorderServer(t)
	g := newGateway(t, remoteGroupConfig(t, "1h", urlA), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := g.state.Load().tenants["app"]
	res, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	a := g.groups["pool"].current()[0]
	if err := g.Reload(remoteGroupConfig(t, "1h", urlB)); err != nil {
		t.Fatal(err)
	}
	grp := g.groups["pool"]
	if m := grp.current(); len(m) != 1 || m[0].entry.URL != urlB {
		t.Fatalf("after the reload the group is %v", m)
	}
	time.Sleep(300 * time.Millisecond) // time for a wrong close to happen
	grp.mu.Lock()
	_, retired := grp.retired[a]
	grp.mu.Unlock()
	g.handles.mu.RLock()
	routed := g.handles.members[a.name] == a
	g.handles.mu.RUnlock()
	if !retired || !routed {
		t.Fatal("the removed member was closed while a handle was pinned to it")
	}
	if err := app.CloseHandles(ctx, res.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if closed := recA.Closed(); len(closed) != 1 {
		t.Fatalf("the removed member closed %v", closed)
	}
	waitForgotten(t, g, grp, a)
	// Its executor is closed: a call on it fails at once.
	if _, err := a.exec.Execute(ctx, &protocol.ExecuteRequest{Code: "result:1"}); protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("the removed member's executor answered %v", err)
	}
}

// A reload may change a remote group's members and nothing else about the
// backends.
func TestReloadRefusesOtherBackendChanges(t *testing.T) {
	urlA, _ := recorderServer(t)
	g := newGateway(t, remoteGroupConfig(t, "1h", urlA), Options{})
	err := g.Reload(remoteGroupConfig(t, "2h", urlA))
	if want := "backends (other than the members of a remote group) changed, which takes a restart"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	// Every change that takes a restart is named, not the first alone.
	cfg := remoteGroupConfig(t, "2h", urlA)
	cfg.Listen, cfg.Limits.WireMemoryMB = "127.0.0.1:1", cfg.Limits.WireMemoryMB+1
	err = g.Reload(cfg)
	if want := "listen, backends (other than the members of a remote group) and limits.wireMemoryMB changed, which takes a restart"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
