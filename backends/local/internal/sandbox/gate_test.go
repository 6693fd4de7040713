package sandbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// gatedHost is a fakeHost whose process is shared: it records how the run
// takes the gate, and can hold the gate "for a sibling" before letting the
// run in.
type gatedHost struct {
	fakeHost
	mu      sync.Mutex
	held    bool
	enters  int
	lefts   []time.Duration // what remained of the bound at each entry
	sibling func(n int) time.Duration
	fault   string
}

func (h *gatedHost) Enter(ctx context.Context, left time.Duration) bool {
	h.mu.Lock()
	if h.held {
		h.fault = "entered twice"
	}
	h.enters++
	n := h.enters
	h.lefts = append(h.lefts, left)
	h.mu.Unlock()
	if h.sibling != nil {
		select {
		case <-time.After(h.sibling(n)):
		case <-ctx.Done():
			return false
		}
	}
	h.mu.Lock()
	h.held = true
	h.mu.Unlock()
	return true
}

func (h *gatedHost) Leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.held {
		h.fault = "left without entering"
	}
	h.held = false
}

func (h *gatedHost) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fault != "" {
		t.Fatal(h.fault)
	}
	if h.held {
		t.Fatal("the run returned holding the gate")
	}
}

// A run takes the gate to compile and start, lets it go while its tool
// call is open, and takes it again for the answer; the time it waits for
// a sibling to let go never counts on its clock.
func TestGateWaitsDoNotSpendTheBound(t *testing.T) {
	h := &gatedHost{sibling: func(n int) time.Duration {
		if n > 1 {
			return 800 * time.Millisecond // a sibling holds the CPU
		}
		return 0
	}}
	h.answer = func(call) (string, error) { return `{"result":41}`, nil }
	j := job("async () => (await t.get()) + 1")
	j.Providers = []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"get"}}}
	j.HasDispatch = true
	// The bound leaves a busy machine room for the run's own work; the
	// sibling's hold alone is past it.
	j.TimeoutMs = 600
	for _, wall := range []bool{false, true} {
		j.CountHostWaits = wall
		res := runJob(t, j, h)
		if res.HasError || res.ResultJSON != "42" {
			t.Fatalf("countHostWaits %v: %+v, want 42 inside a 600 ms bound", wall, res)
		}
		h.check(t)
	}
	if h.lefts[0] != 600*time.Millisecond || h.lefts[1] <= 0 || h.lefts[1] > 600*time.Millisecond {
		t.Fatalf("bounds at entry %v: the first is the whole bound, the next what remains", h.lefts)
	}
}

// A run cancelled while it waits for the gate stops without touching its
// runtime again, with its context's cause as the text.
func TestGateCancelWhileWaiting(t *testing.T) {
	h := &gatedHost{sibling: func(n int) time.Duration {
		if n > 1 {
			return time.Hour
		}
		return 0
	}}
	j := job("async () => { await t.get(); return 1 }")
	j.Providers = []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"get"}}}
	j.HasDispatch = true
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(200*time.Millisecond, func() { cancel(protocol.NewMemoryLimitError(64)) })
	res := envelope(t)(Run(ctx, j, h))
	if res.Error != protocol.NewMemoryLimitError(64).Error() {
		t.Fatalf("got %+v, want the cancel's cause", res)
	}
	h.check(t)

	// Cancelled before it could even start.
	ctx, cancel = context.WithCancelCause(context.Background())
	cancel(errors.New("gone"))
	h2 := &gatedHost{sibling: func(int) time.Duration { return time.Hour }}
	if res := envelope(t)(Run(ctx, job("async () => 1"), h2)); res.Error != "gone" {
		t.Fatalf("got %+v", res)
	}
	h2.check(t)
}

// Between a retained session's invocations a timer callback that runs past
// the execution's whole bound is interrupted, in a shared process: it ends
// the session with the timeout text, reported to the next invocation.
func TestGateBoundsACallbackBetweenInvocations(t *testing.T) {
	h := &gatedHost{}
	j := job(`async () => { setTimeout(() => { while (true) {} }, 50); return () => new Response("x") }`)
	j.TimeoutMs = 300
	j.RetainHandles = true
	res, kept := runRetained(t, context.Background(), j, h)
	if kept == nil || res.HasError {
		t.Fatalf("no grant: %+v", res)
	}
	select {
	case <-kept.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the spinning callback was never stopped")
	}
	if got := kept.EndText(); got != protocol.NewExecutionTimeoutError(300).Error() {
		t.Fatalf("end text %q", got)
	}
	inv := kept.Invoke(protocol.OutboundRequest{Method: "GET", URL: "https://h.test/"})
	if !inv.Ended || inv.Err != protocol.NewExecutionTimeoutError(300).Error() {
		t.Fatalf("the next invocation: %+v", inv)
	}
	h.check(t)
}
