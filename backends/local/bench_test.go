package local

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/protocol"
)

// The benchmarks compare the pool at its defaults with sandbox.Run in
// plain goroutines, at the same concurrency (one per CPU), so their ratio is
// the cost of isolation. The pool's one tenant holds its default share:
// one worker process per CPU but one. Each reports executions per second and
// p50/p99 latency.

const benchTenCalls = `async () => {
  let sum = 0
  for (let i = 0; i < 10; i++) sum += (await store.get(i)).n
  return sum
}`

var benchProviders = []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"get"}}}

func benchDispatch(ctx context.Context, provider, tool, args string) (string, error) {
	return `{"result":{"n":1}}`, nil
}

// directHost is the in-process Host: it calls the dispatch function itself.
type directHost struct{}

func (directHost) Dispatch(ctx context.Context, provider, tool, args string) (string, error) {
	return benchDispatch(ctx, provider, tool, args)
}

func (directHost) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{}, nil
}

// measure runs op from size goroutines b.N times in all and reports
// throughput and latency percentiles.
func measure(b *testing.B, size int, op func() error) {
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	next := make(chan struct{}, b.N)
	for range b.N {
		next <- struct{}{}
	}
	close(next)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				t0 := time.Now()
				if err := op(); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "exec/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func checkResult(res *protocol.ExecuteResult, want string) error {
	if res.HasError || res.ResultJSON != want {
		return &benchError{res}
	}
	return nil
}

type benchError struct{ res *protocol.ExecuteResult }

func (e *benchError) Error() string { return "unexpected result: " + e.res.ResultJSON + e.res.Error }

func benchPool(b *testing.B, req *protocol.ExecuteRequest, want string) {
	benchPoolAt(b, 0, req, want)
}

// benchPoolAt is benchPool with inFlight executions at once (0: one per
// CPU). One at a time measures latency alone, without the workers and the
// parent contending for the CPUs.
func benchPoolAt(b *testing.B, inFlight int, req *protocol.ExecuteRequest, want string) {
	e := newPool(b, Options{})
	if inFlight == 0 {
		inFlight = runtime.NumCPU()
	}
	// Warm the workers before measuring.
	for range 4 * inFlight {
		if _, err := e.Execute(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	measure(b, inFlight, func() error {
		res, err := e.Execute(context.Background(), req)
		if err != nil {
			return err
		}
		return checkResult(res, want)
	})
}

func benchInProcess(b *testing.B, job sandbox.Job, want string) {
	benchInProcessAt(b, runtime.NumCPU(), job, want)
}

func benchInProcessAt(b *testing.B, inFlight int, job sandbox.Job, want string) {
	measure(b, inFlight, func() error {
		res, err := sandbox.Run(context.Background(), job, directHost{})
		if err != nil {
			return err
		}
		return checkResult(res, want)
	})
}

// BenchmarkPoolTrivial: async () => 1, through the pool and in-process.
func BenchmarkPoolTrivial(b *testing.B) {
	b.Run("pool", func(b *testing.B) {
		benchPool(b, &protocol.ExecuteRequest{Code: "async () => 1"}, "1")
	})
	b.Run("pool-serial", func(b *testing.B) {
		benchPoolAt(b, 1, &protocol.ExecuteRequest{Code: "async () => 1"}, "1")
	})
	trivial := sandbox.Job{Code: "async () => 1", TimeoutMs: protocol.DefaultTimeout,
		MemoryLimitMB: protocol.DefaultMemoryLimitMB, OutboundMode: protocol.OutboundNative}
	b.Run("in-process", func(b *testing.B) {
		benchInProcess(b, trivial, "1")
	})
	b.Run("in-process-serial", func(b *testing.B) {
		benchInProcessAt(b, 1, trivial, "1")
	})
}

// BenchmarkPoolTenToolCalls: ten awaited tool calls, through the pool (each
// call crosses the pipe twice) and in-process.
func BenchmarkPoolTenToolCalls(b *testing.B) {
	b.Run("pool", func(b *testing.B) {
		benchPool(b, &protocol.ExecuteRequest{Code: benchTenCalls, Providers: benchProviders, Dispatch: benchDispatch}, "10")
	})
	b.Run("pool-serial", func(b *testing.B) {
		benchPoolAt(b, 1, &protocol.ExecuteRequest{Code: benchTenCalls, Providers: benchProviders, Dispatch: benchDispatch}, "10")
	})
	tenCalls := sandbox.Job{Code: benchTenCalls, Providers: benchProviders, HasDispatch: true,
		TimeoutMs: protocol.DefaultTimeout, MemoryLimitMB: protocol.DefaultMemoryLimitMB, OutboundMode: protocol.OutboundNative}
	b.Run("in-process", func(b *testing.B) {
		benchInProcess(b, tenCalls, "10")
	})
	b.Run("in-process-serial", func(b *testing.B) {
		benchInProcessAt(b, 1, tenCalls, "10")
	})
}

// BenchmarkPoolTenants: the cost of keeping tenants apart. Trivial runs,
// two in flight, from one tenant, and from two tenants interleaved (each
// caller alternating between them): every tenant runs on worker processes
// of its own, so the second case keeps two tenants' workers and their
// prepared runtimes warm instead of one.
func BenchmarkPoolTenants(b *testing.B) {
	for _, c := range []struct {
		name    string
		tenants []string
	}{{"one-tenant", []string{"a"}}, {"two-tenants", []string{"a", "b"}}} {
		b.Run(c.name, func(b *testing.B) {
			e := newPool(b, Options{})
			for range 8 {
				for _, t := range c.tenants {
					if _, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => 1"}, protocol.Policy{Tenant: t}); err != nil {
						b.Fatal(err)
					}
				}
			}
			var next atomic.Uint64
			measure(b, runtime.NumCPU(), func() error {
				t := c.tenants[next.Add(1)%uint64(len(c.tenants))]
				res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => 1"}, protocol.Policy{Tenant: t})
				if err != nil {
					return err
				}
				return checkResult(res, "1")
			})
		})
	}
}
