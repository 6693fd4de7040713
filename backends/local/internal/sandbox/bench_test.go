package sandbox

import (
	"context"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// instantHost answers every tool call at once with a fixed envelope.
type instantHost struct{}

func (instantHost) Dispatch(ctx context.Context, provider, tool, argsJSON string) (string, error) {
	return `{"result":{"id":"o1","total":42}}`, nil
}

func (instantHost) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{}, context.Canceled
}

// BenchmarkRunTrivial is one whole in-process run of async () => 1: fresh
// runtime, bootstrap, entry (compiled once, then cached), result.
func BenchmarkRunTrivial(b *testing.B) {
	j := job("async () => 1")
	for b.Loop() {
		r := runJob(b, j, nil)
		if r.ResultJSON != "1" {
			b.Fatalf("%+v", r)
		}
	}
}

// BenchmarkRunTrivialUncached is BenchmarkRunTrivial with a program the
// compile cache has never seen, so each run parses and compiles its entry.
func BenchmarkRunTrivialUncached(b *testing.B) {
	i := 0
	for b.Loop() {
		i++
		r := runJob(b, job("async () => "+strconv.Itoa(i)), nil)
		if r.ResultJSON != strconv.Itoa(i) {
			b.Fatalf("%+v", r)
		}
	}
}

// BenchmarkRunTenToolCalls is one run making ten awaited tool calls through
// a provider proxy, the host answering at once on its own goroutine.
func BenchmarkRunTenToolCalls(b *testing.B) {
	j := job(`async () => {
  let total = 0
  for (let i = 0; i < 10; i++) total += (await store.getOrder({ id: 'o' + i })).total
  return total
}`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"getOrder"}}}
	j.HasDispatch = true
	for b.Loop() {
		r := runJob(b, j, instantHost{})
		if r.ResultJSON != "420" {
			b.Fatalf("%+v", r)
		}
	}
}

// BenchmarkRunWithImport is a run whose entry imports a module, so the
// entry goes through esbuild once and the module is cached.
func BenchmarkRunWithImport(b *testing.B) {
	j := job("import { greet } from 'greeter'\nasync () => greet('ada')")
	j.Modules = greeter
	for b.Loop() {
		r := runJob(b, j, nil)
		if r.ResultJSON != `"hello ada"` {
			b.Fatalf("%+v", r)
		}
	}
}

// BenchmarkRetainedInvoke is one invocation of a trivial retained handler
// in process: Request built, handler called, Response read back.
func BenchmarkRetainedInvoke(b *testing.B) {
	j := job("async () => () => new Response('ok')")
	j.RetainHandles = true
	_, r := runRetained(b, context.Background(), j, nil)
	if r == nil {
		b.Fatal("no grant")
	}
	defer r.Close()
	req := protocol.OutboundRequest{Method: "GET", URL: "https://handler.test/"}
	for b.Loop() {
		if inv := r.Invoke(req); inv.HasErr || string(inv.Response.Body) != "ok" {
			b.Fatalf("%+v", inv)
		}
	}
}

// BenchmarkPrepare is building one prepared runtime (Prepare), guarded and
// unguarded: its time, what it allocates, and (live-B/runtime) what a
// prepared runtime keeps on the heap while it waits for its job.
func BenchmarkPrepare(b *testing.B) {
	for _, guarded := range []bool{true, false} {
		name := "guarded"
		if !guarded {
			name = "unguarded"
		}
		b.Run(name, func(b *testing.B) {
			kept := make([]*session, 0, 256)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			cpu0 := processCPU()
			b.ReportAllocs()
			for b.Loop() {
				s := prepareSession(!guarded)
				if s.stopped {
					b.Fatal("the scope did not install")
				}
				if len(kept) < cap(kept) {
					kept = append(kept, s)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(kept)), "live-B/runtime")
			runtime.KeepAlive(kept)
		})
	}
}

// processCPU is the CPU time this process has used, in nanoseconds: a
// figure that other processes on the machine leave alone, unlike ns/op.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
