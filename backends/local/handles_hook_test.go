package local

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// TestHandlesClosedHookFires: the policy's HandlesClosed is called once,
// with the executionId, whatever closed the handles: here the idle bound
// and CloseHandles.
func TestHandlesClosedHookFires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	grant := func(ex *Executor, closed chan string) string {
		t.Helper()
		res, err := ex.ExecuteWith(ctx, &protocol.ExecuteRequest{
			Code:          "async () => (req) => new Response('ok')",
			RetainHandles: true,
		}, protocol.Policy{HandlesClosed: func(id string) { closed <- id }})
		if err != nil || res.ExecutionID == "" {
			t.Fatalf("no grant: %+v, %v", res, err)
		}
		return res.ExecutionID
	}
	idle := make(chan string, 2)
	short := newPool(t, Options{PoolSize: 1, HandlesIdleTimeout: 300 * time.Millisecond})
	id := grant(short, idle)
	expectHook(t, idle, id, "the idle bound")
	// CloseHandles on an executor whose idle bound cannot come first.
	ex := newPool(t, Options{PoolSize: 1})
	closed := make(chan string, 2)
	id = grant(ex, closed)
	if err := ex.CloseHandles(ctx, id); err != nil {
		t.Fatal(err)
	}
	expectHook(t, closed, id, "CloseHandles")
	time.Sleep(100 * time.Millisecond)
	if len(idle)+len(closed) != 0 {
		t.Fatal("the hook was called more than once")
	}
}

// expectHook waits for a HandlesClosed hook to name id after what closed
// the handles.
func expectHook(t *testing.T, hook <-chan string, id, what string) {
	t.Helper()
	select {
	case got := <-hook:
		if got != id {
			t.Fatalf("after %s the hook named %q, want %q", what, got, id)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s closed nothing, or did not tell", what)
	}
}
