package local

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// The run-clock rows that depend on the executor's construction options,
// through the pool and a real worker.

// slowTool answers every tool call after delay.
func slowTool(delay time.Duration) protocol.DispatchFunc {
	return func(ctx context.Context, provider, tool, args string) (string, error) {
		select {
		case <-time.After(delay):
			return `{"result":"tool"}`, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// A null timeout lifts the bound past the executor's configured default: a
// run that waits 600 ms on its own timer outlives a 200 ms default, which
// ends the same run with the timeout absent.
func TestNullTimeoutLiftsTheConfiguredDefault(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, DefaultTimeoutMs: 200})
	code := `async () => { await new Promise((r) => setTimeout(r, 600)); return 'waited' }`
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: code, Timeout: protocol.TimeoutLifted()})
	if err != nil {
		t.Fatal(err)
	}
	if res.HasError || res.ResultJSON != `"waited"` {
		t.Fatalf("null timeout: %+v", res)
	}
	res, err = e.Execute(context.Background(), &protocol.ExecuteRequest{Code: code})
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.NewExecutionTimeoutError(200).Error(); res.Error != want {
		t.Fatalf("absent timeout: got %q, want %q", res.Error, want)
	}
}

// countHostWaits set on the executor's construction options restores the
// wall clock for every request that leaves the field out, and a request
// that sets it false wins over that default.
func TestCountHostWaitsAsAConstructionOption(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, CountHostWaits: true})
	req := func() *protocol.ExecuteRequest {
		return &protocol.ExecuteRequest{
			Code:      `async () => await store.slow()`,
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"slow"}}},
			Dispatch:  slowTool(time.Second),
			Timeout:   protocol.TimeoutOf(300),
		}
	}
	res, err := e.Execute(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.NewExecutionTimeoutError(300).Error(); res.Error != want {
		t.Fatalf("the default counts host waits: got %+v, want %q", res, want)
	}
	no := false
	r := req()
	r.CountHostWaits = &no
	res, err = e.Execute(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if res.HasError || res.ResultJSON != `"tool"` {
		t.Fatalf("the request's false wins: %+v", res)
	}
}
