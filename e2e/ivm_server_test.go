package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/protocol"
)

// startIVMExecutorServer runs peers/ivm-executor-server.mjs, the
// isolate-per-run peer of the capacity benchmark. Its isolated-vm addon is
// installed by `make peers-deps` (make bench) only, so without it the test
// is skipped, not failed: make test stays free of the native build.
func startIVMExecutorServer(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("peers/node_modules/isolated-vm/package.json"); err != nil {
		t.Skip("e2e/peers/node_modules is missing: run `make peers-deps` to test the isolated-vm peer")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed")
	}
	cmd := exec.Command("node", "--no-node-snapshot", "peers/ivm-executor-server.mjs")
	return startProcess(t, "the isolated-vm executor server", cmd, nil).url
}

// TestRemoteBackendAgainstTheIsolatedVMServer holds the benchmark's
// isolated-vm peer to the contract as far as it goes: tools, console, the
// codec, outbound modes, a fresh isolate per run, both run bounds and the
// handles fault.
func TestRemoteBackendAgainstTheIsolatedVMServer(t *testing.T) {
	url := startIVMExecutorServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := remote.Dial(ctx, url, remote.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	run := func(req *protocol.ExecuteRequest) *protocol.ExecuteResult {
		t.Helper()
		res, err := ex.Execute(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", req.Code, err)
		}
		return res
	}

	var mu sync.Mutex
	var seen [][3]string
	res := run(&protocol.ExecuteRequest{
		Code:      `async () => { console.log('start', 1); console.warn({ w: true }); const o = await store.listOrders('ada', 3); return { o, bytes: new Uint8Array([1, 2, 250]) } }`,
		Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"listOrders"}, PositionalArgs: true}},
		Dispatch: func(_ context.Context, provider, tool, args string) (string, error) {
			mu.Lock()
			seen = append(seen, [3]string{provider, tool, args})
			mu.Unlock()
			return `{"result":{"id":"o1","total":42,"raw":{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}}}`, nil
		},
		Timeout: protocol.TimeoutOf(5000),
	})
	v, err := res.Value()
	want := map[string]any{"o": map[string]any{"id": "o1", "total": 42.0, "raw": []byte{1, 2, 3, 255}}, "bytes": []byte{1, 2, 250}}
	if err != nil || !reflect.DeepEqual(v, want) {
		t.Fatalf("result %#v (%v), want %#v", v, err, want)
	}
	if want := []protocol.LogLine{{Level: "log", Text: "start 1"}, {Level: "warn", Text: `{"w":true}`}}; !reflect.DeepEqual(res.Logs, want) {
		t.Fatalf("logs %v, want %v", res.Logs, want)
	}
	if !reflect.DeepEqual(seen, [][3]string{{"store", "listOrders", `["ada",3]`}}) {
		t.Fatalf("dispatch saw %v", seen)
	}

	// Many runs parked on tool calls at once, each in its own isolate, each
	// with its own answer.
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := ex.Execute(ctx, &protocol.ExecuteRequest{
				Code:      `async () => { globalThis.n = (globalThis.n ?? 0) + 1; return (await t.wait()) + n }`,
				Providers: []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"wait"}}},
				Dispatch: func(context.Context, string, string, string) (string, error) {
					time.Sleep(100 * time.Millisecond)
					return fmt.Sprintf(`{"result":%d}`, i), nil
				},
			})
			if err != nil || res.ResultJSON != fmt.Sprint(i+1) {
				errs <- fmt.Errorf("run %d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Declared failures arrive in the envelope with the contract's texts.
	for _, c := range []struct {
		code, want string
		timeoutMs  float64
	}{
		{`async () => { throw new Error('No such customer.') }`, "No such customer.", 5000},
		{`async () => { await Promise.resolve(); while (true) {} }`, protocol.NewExecutionTimeoutError(300).Error(), 300},
		{`async () => { const a = []; for (;;) a.push(new Array(1e6).fill(1)) }`, protocol.NewMemoryLimitError(128).Error(), 20000},
		{`async () => t.x()`, protocol.NewToolNotFoundError("x").Error(), 5000},
	} {
		res := run(&protocol.ExecuteRequest{Code: c.code, Timeout: protocol.TimeoutOf(c.timeoutMs),
			Providers: []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"x"}}}})
		if !res.HasError || res.Error != c.want {
			t.Errorf("%s: %+v, want the error %q", c.code, res, c.want)
		}
	}

	// Outbound: the caller's function, and the disabled mode's text.
	res = run(&protocol.ExecuteRequest{
		Code: `async () => (await fetch('https://api.example/x', { method: 'POST', body: 'hello' })).text()`,
		Outbound: protocol.OutboundVia(func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			return protocol.OutboundResponse{Status: 200, Body: []byte(req.Method + " " + req.URL + " " + string(req.Body))}, nil
		}),
	})
	if res.ResultJSON != `"POST https://api.example/x hello"` {
		t.Fatalf("outbound stub: %+v", res)
	}
	res = run(&protocol.ExecuteRequest{Code: `async () => { try { await fetch('https://x/') } catch (e) { return e.message } }`, Outbound: protocol.NoOutbound()})
	if res.ResultJSON != strconv.Quote(protocol.NewOutboundDisabledError().Error()) {
		t.Fatalf("disabled outbound: %+v", res)
	}

	if err := ex.CloseHandles(ctx, "nope"); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("closeHandles gave %v, want HANDLES_CLOSED", err)
	}
}
