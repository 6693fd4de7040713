package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
	"github.com/supolka/codemode-gateway/protocol"
)

// The gateway's cost per execution on the capacity benchmark's tool-wait
// load (e2e/bench-capacity.mjs step a): a program making three sequential
// tool calls, through the real handler, a capnweb session over loopback
// WebSocket and the local backend. allocs/op and B/op count the whole test
// process: the Go client, the gateway and the local backend's parent side
// (the JavaScript runs in worker processes, which are not counted).

const benchThreeCalls = `async () => {
  let s = 0
  for (let i = 0; i < 3; i++) s += await store.get(i)
  return s
}`

var benchStore = []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"get"}}}

// benchGateway serves one tenant on the local backend with the capacity
// benchmark's policy and returns connections to it.
func benchGateway(b *testing.B, conns int) []*remote.Executor {
	key := auth.NewAPIKey()
	hash, _ := auth.HashAPIKey(key)
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
limits: {maxConcurrent: 1024, maxConnections: 1024}
backends:
  - {name: local, type: local}
tenants:
  - name: bench
    backend: local
    keys: [{name: k, hash: %s}]
    policy: {maxConcurrent: 1024, rate: 0}
routes:
  - {path: /v1/executor, kind: executor}
`, hash)
	cfg, err := config.Parse("bench.yaml", []byte(yaml), os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{Getenv: os.Getenv, Logger: slog.New(slog.DiscardHandler), Kinds: kinds.All()})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(gw.Handler())
	b.Cleanup(func() { hs.Close(); gw.Close() })
	out := make([]*remote.Executor, conns)
	for i := range out {
		ex, err := remote.Dial(context.Background(), wsURL(hs.URL)+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, Retry: remote.Retry{Attempts: 1}})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { ex.Close() })
		out[i] = ex
	}
	return out
}

func benchRequest(dispatch protocol.DispatchFunc) *protocol.ExecuteRequest {
	return &protocol.ExecuteRequest{Code: benchThreeCalls, Providers: benchStore, Dispatch: dispatch}
}

func answerOne(context.Context, string, string, string) (string, error) {
	return `{"result":1}`, nil
}

func executeThree(ex *remote.Executor, dispatch protocol.DispatchFunc) error {
	res, err := ex.Execute(context.Background(), benchRequest(dispatch))
	if err != nil {
		return err
	}
	if res.HasError || res.ResultJSON != "3" {
		return fmt.Errorf("unexpected result %+v", res)
	}
	return nil
}

// BenchmarkGatewayThreeToolCalls runs the program from 8 callers at once on
// 2 connections, tool calls answered at once.
func BenchmarkGatewayThreeToolCalls(b *testing.B) {
	conns := benchGateway(b, 2)
	for i := range 16 { // start the workers
		if err := executeThree(conns[i%2], answerOne); err != nil {
			b.Fatal(err)
		}
	}
	const callers = 8
	next := make(chan int, callers)
	go func() {
		for i := range b.N {
			next <- i
		}
		close(next)
	}()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if err := executeThree(conns[c%2], answerOne); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkGatewayParkedRuns parks 64 runs on their first tool call and
// reports the goroutines of the test process per parked run (client,
// gateway and the backend's parent side). BENCH_GOROUTINES=file writes the
// goroutine profile taken while they are parked.
func BenchmarkGatewayParkedRuns(b *testing.B) {
	conns := benchGateway(b, 8)
	for i := range 16 {
		if err := executeThree(conns[i%8], answerOne); err != nil {
			b.Fatal(err)
		}
	}
	const parked = 64
	for range b.N {
		time.Sleep(50 * time.Millisecond) // let the warm-up's goroutines end
		before := runtime.NumGoroutine()
		arrived := make(chan struct{}, parked)
		release := make(chan struct{})
		var once sync.Once
		wait := func(ctx context.Context, p, t, args string) (string, error) {
			arrived <- struct{}{}
			<-release
			return `{"result":1}`, nil
		}
		var wg sync.WaitGroup
		for i := range parked {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := executeThree(conns[i%8], func(ctx context.Context, p, t, args string) (string, error) {
					select {
					case <-release:
						return `{"result":1}`, nil
					default:
					}
					return wait(ctx, p, t, args)
				}); err != nil {
					b.Error(err)
				}
			}()
		}
		for range parked {
			<-arrived
		}
		time.Sleep(20 * time.Millisecond)
		during := runtime.NumGoroutine()
		if f := os.Getenv("BENCH_GOROUTINES"); f != "" {
			if out, err := os.Create(f); err == nil {
				pprof.Lookup("goroutine").WriteTo(out, 1)
				out.Close()
			}
		}
		once.Do(func() { close(release) })
		wg.Wait()
		// The callers' own goroutines (one each, plus the one waiting in
		// dispatch) are the benchmark's, not the path's.
		b.ReportMetric(float64(during-before-parked)/parked, "goroutines/run")
	}
}
