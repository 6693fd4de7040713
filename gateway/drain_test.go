package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// drainingRecorder is a Recorder that, once draining is set, refuses new
// executions as a draining executor server does, and serves the rest.
type drainingRecorder struct {
	*executortest.Recorder
	draining atomic.Bool
	refused  atomic.Int64 // executions turned away as draining
}

func (d *drainingRecorder) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	if d.draining.Load() {
		d.refused.Add(1)
		return nil, protocol.NewExecutorDrainingError()
	}
	return d.Recorder.ExecuteWith(ctx, req, p)
}

func (d *drainingRecorder) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return d.ExecuteWith(ctx, req, protocol.Policy{})
}

func drainingServer(t *testing.T) (string, *drainingRecorder) {
	rec := &drainingRecorder{Recorder: executortest.NewRecorder()}
	srv := executorapi.NewServer(rec, executorapi.ServerOptions{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/", rec
}

// A run a draining member refuses is run on another member, unseen by the
// tenant; the draining member gets no new runs and keeps serving the
// handle pinned to it; with every member draining the tenant reads the
// retryable draining refusal.
func TestDrainingMemberGetsNoNewRuns(t *testing.T) {
	urlA, recA := drainingServer(t)
	urlB, recB := drainingServer(t)
	g := newGateway(t, remoteGroupConfig(t, "1h", urlA, urlB), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	app := g.state.Load().tenants["app"]
	// With nothing in flight the first member listed takes the run.
	grant, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || grant.ExecutionID == "" || recA.Held() != 1 {
		t.Fatalf("no grant on A: %+v, %v (A holds %d)", grant, err, recA.Held())
	}
	a := g.groups["pool"].current()[0]

	recA.draining.Store(true)
	for i, code := range []string{"result:1", "result:2", "result:3"} {
		res, err := app.Execute(ctx, &protocol.ExecuteRequest{Code: code})
		if err != nil || res.ResultJSON != strings.TrimPrefix(code, "result:") {
			t.Fatalf("run %d while A drains: %+v, %v", i, res, err)
		}
		if last := recB.Last().Code; last != code {
			t.Fatalf("run %d did not reach B (B last ran %q)", i, last)
		}
	}
	if !a.draining() || a.takesRuns() || !g.groups["pool"].usable() {
		t.Fatalf("A draining %v, takes runs %v; group usable %v", a.draining(), a.takesRuns(), g.groups["pool"].usable())
	}
	if n := recA.refused.Load(); n != 1 {
		t.Fatalf("A was asked %d times to run while draining, want once (the refusal that told the gateway)", n)
	}
	resp, err := app.InvokeHandle(ctx, grant.ExecutionID, "fetch", protocol.OutboundRequest{Method: "POST", URL: "https://app.example/", Body: []byte("x")})
	if err != nil || string(resp.Body) != "echo:x" {
		t.Fatalf("the handle pinned to the draining member: %+v, %v", resp, err)
	}

	recB.draining.Store(true)
	_, err = app.Execute(ctx, &protocol.ExecuteRequest{Code: "result:4"})
	if err == nil || err.Error() != protocol.NewExecutorDrainingError().Error() || !protocol.CodeOf(err).Retryable() {
		t.Fatalf("with every member draining the tenant read %v (code %q)", err, protocol.CodeOf(err))
	}
	if g.groups["pool"].usable() {
		t.Fatal("a group whose members all drain reads as usable")
	}
}
