package executorapi

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// renamingExecutor grants handles under one id and, when asked to, closes
// them by itself calling HandlesClosed with another: the shape of an
// executor in front of a backend that names the execution its own way.
type renamingExecutor struct {
	closed chan func(string)
}

func (e *renamingExecutor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return e.ExecuteWith(ctx, req, protocol.Policy{})
}
func (e *renamingExecutor) ExecuteWith(_ context.Context, _ *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	e.closed <- p.HandlesClosed
	return &protocol.ExecuteResult{ExecutionID: "outer", Handles: []string{"fetch"}}, nil
}
func (*renamingExecutor) InvokeHandle(context.Context, string, string, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{}, protocol.NewHandlesClosedError("outer")
}
func (*renamingExecutor) CloseHandles(context.Context, string) error { return nil }
func (*renamingExecutor) Close() error                               { return nil }

// The duplicated outbound stub a retained execution keeps leaves the
// table, and is released, when the executor closes the handles by itself,
// whatever id it names them by; the client's HandlesClosed hears of it.
func TestKeptStubGoesWhenTheExecutorClosesTheHandles(t *testing.T) {
	ex := &renamingExecutor{closed: make(chan func(string), 1)}
	srv := NewServer(ex, ServerOptions{})
	ctx, client := connect(t, srv)
	heard := make(chan string, 1)
	res, err := client.ExecuteWith(ctx, &protocol.ExecuteRequest{
		Code:          "async () => () => new Response('')",
		RetainHandles: true,
		Outbound: protocol.OutboundVia(func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			return protocol.OutboundResponse{Status: 200}, nil
		}),
	}, protocol.Policy{HandlesClosed: func(id string) { heard <- id }})
	if err != nil || res.ExecutionID != "outer" {
		t.Fatalf("%+v, %v", res, err)
	}
	if n := srv.Kept(); n != 1 {
		t.Fatalf("kept %d stubs after the grant, want 1", n)
	}
	(<-ex.closed)("inner")
	select {
	case id := <-heard:
		if id != "outer" {
			t.Fatalf("HandlesClosed(%q), want %q", id, "outer")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client never heard the handles close")
	}
	if n := srv.Kept(); n != 0 {
		t.Fatalf("kept %d stubs after the handles closed, want 0", n)
	}
}
