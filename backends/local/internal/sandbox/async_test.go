package sandbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// asyncHost answers tool calls through DispatchAsync: each answer comes
// from a goroutine of the host's, after delay, echoing the arguments.
type asyncHost struct {
	fakeHost
	delay time.Duration
	mu    sync.Mutex
	async int
}

func (h *asyncHost) DispatchAsync(ctx context.Context, provider, tool, args string, done func(string, error)) {
	h.mu.Lock()
	h.async++
	h.mu.Unlock()
	go func() {
		select {
		case <-time.After(h.delay):
			done(`{"result":`+args+`}`, nil)
		case <-ctx.Done():
			done("", ctx.Err())
		}
	}()
}

// A host that answers asynchronously gets every call through
// DispatchAsync, and 200 answers landing at once (past the loop's queue
// and MaxConcurrentHostCalls) all reach their promises.
func TestAsyncHostAnswersEveryCall(t *testing.T) {
	h := &asyncHost{delay: 20 * time.Millisecond}
	j := job(`async () => { const r = await Promise.all(Array.from({length: 200}, (_, i) => store.get(i))); return r.reduce((a, b) => a + b[0], 0) }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store", PositionalArgs: true}}
	j.HasDispatch = true
	res := runJob(t, j, h)
	if got := result(t, res); got != float64(199*200/2) {
		t.Fatalf("sum %v", got)
	}
	if h.async != 200 || len(h.seen()) != 0 {
		t.Fatalf("%d async calls, %d sync calls", h.async, len(h.seen()))
	}
}

// Answers that come after the run ended are dropped, and the run does not
// wait for them.
func TestAsyncHostLateAnswersAreDropped(t *testing.T) {
	h := &asyncHost{delay: time.Second}
	j := job(`async () => { store.get(1); store.get(2); return 'done' }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store", PositionalArgs: true}}
	j.HasDispatch = true
	start := time.Now()
	if got := result(t, runJob(t, j, h)); got != "done" {
		t.Fatalf("result %v", got)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("the run waited %v for answers it did not await", took)
	}
}
