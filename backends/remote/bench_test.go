package remote_test

import (
	"context"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// The wire's cost, side by side in one run: the same programs on the local
// backend called directly and through Go client → executor server → the
// same local backend over loopback WebSocket. Each reports p50 and p99.

var benchPrograms = []struct {
	name string
	req  func() *protocol.ExecuteRequest
}{
	{"trivial", func() *protocol.ExecuteRequest { return &protocol.ExecuteRequest{Code: "async () => 1"} }},
	{"ten-tool-calls", func() *protocol.ExecuteRequest {
		return &protocol.ExecuteRequest{
			Code:      "async () => { let s = 0; for (let i = 0; i < 10; i++) s += await calc.add(i, 1); return s }",
			Providers: []protocol.ProviderDescriptor{{Name: "calc", Tools: []string{"add"}, PositionalArgs: true}},
			Dispatch: protocol.NewEnvelopeDispatch(protocol.NewEnvelopeState(), func(_ context.Context, _, _ string, args []any) (any, error) {
				return args[0].(float64) + args[1].(float64), nil
			}),
		}
	}},
}

func benchBackend(b *testing.B) *local.Executor {
	ex, err := local.New(local.Options{MaxWorkers: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	return ex
}

func runBench(b *testing.B, ex protocol.Executor, req func() *protocol.ExecuteRequest, parallel int) {
	ctx := context.Background()
	// Warm the pool's workers.
	for i := 0; i < 4; i++ {
		if _, err := ex.Execute(ctx, req()); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	var wg sync.WaitGroup
	next := make(chan struct{})
	go func() {
		for i := 0; i < b.N; i++ {
			next <- struct{}{}
		}
		close(next)
	}()
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				start := time.Now()
				res, err := ex.Execute(ctx, req())
				d := time.Since(start)
				if err != nil || res.HasError {
					b.Errorf("execute: %v %s", err, res.Error)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

func BenchmarkExecute(b *testing.B) {
	backend := benchBackend(b)
	srv := executorapi.NewServer(backend, executorapi.ServerOptions{})
	hsURL := startBenchServer(b, srv)
	client, err := remote.Dial(context.Background(), hsURL, remote.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	for _, p := range benchPrograms {
		for _, par := range []int{1, 16} {
			b.Run(p.name+"/direct/inflight="+itoa(par), func(b *testing.B) { runBench(b, backend, p.req, par) })
			b.Run(p.name+"/wire/inflight="+itoa(par), func(b *testing.B) { runBench(b, client, p.req, par) })
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func startBenchServer(b *testing.B, srv *executorapi.Server) string {
	hs := httptest.NewServer(srv)
	b.Cleanup(func() { hs.Close(); srv.Close() })
	return "ws" + strings.TrimPrefix(hs.URL, "http")
}
