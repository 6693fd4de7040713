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
// brackets its pieces of work, and can hold a piece back "for a sibling"
// or give time back to the piece's clock.
type gatedHost struct {
	fakeHost
	mu      sync.Mutex
	held    bool
	enters  int
	lefts   []time.Duration // what remained of the bound at each entry
	sibling func(n int) time.Duration
	// credit, when set, is given back to the piece's clock every 100 ms
	// while it is in flight, as a meter gives back time its process's CPU
	// served others.
	credit   time.Duration
	stopTick chan struct{}
	fault    string
}

func (h *gatedHost) Enter(ctx context.Context, clock Clock) bool {
	h.mu.Lock()
	if h.held {
		h.fault = "entered twice"
	}
	h.enters++
	n := h.enters
	left := time.Duration(-1)
	if clock != nil {
		left = clock.Left()
	}
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
	if h.credit > 0 && clock != nil {
		stop := make(chan struct{})
		h.stopTick = stop
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-tick.C:
					clock.Credit(h.credit)
				case <-stop:
					return
				}
			}
		}()
	}
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
	if h.stopTick != nil {
		close(h.stopTick)
		h.stopTick = nil
	}
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

// A run brackets compiling and starting, and then the answer of its tool
// call, as pieces of work, never one inside another: the first sees the
// whole bound, the next what remains of it.
func TestPiecesBracketTheRunsWork(t *testing.T) {
	h := &gatedHost{}
	h.answer = func(call) (string, error) { return `{"result":41}`, nil }
	j := job("async () => (await t.get()) + 1")
	j.Providers = []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"get"}}}
	j.HasDispatch = true
	j.TimeoutMs = 600
	res := runJob(t, j, h)
	if res.HasError || res.ResultJSON != "42" {
		t.Fatalf("got %+v, want 42", res)
	}
	h.check(t)
	if len(h.lefts) < 2 || h.lefts[0] != 600*time.Millisecond || h.lefts[1] <= 0 || h.lefts[1] > 600*time.Millisecond {
		t.Fatalf("bounds at entry %v: the first is the whole bound, the next what remains", h.lefts)
	}
}

// Time the gate gives back to a piece's clock (its process's CPU served
// others meanwhile) does not spend the bound: a program that computes for
// 450 ms of wall time completes inside a 300 ms bound when three quarters
// of that are given back as it goes, and times out when nothing is.
func TestCreditedTimeDoesNotSpendTheBound(t *testing.T) {
	code := "async () => { const t = Date.now(); while (Date.now() - t < 450) {} return 'done' }"
	j := job(code)
	j.TimeoutMs = 300
	h := &gatedHost{credit: 75 * time.Millisecond}
	if res := runJob(t, j, h); res.HasError || res.ResultJSON != `"done"` {
		t.Fatalf("with the time given back: %+v", res)
	}
	h.check(t)
	h = &gatedHost{}
	if res := runJob(t, j, h); res.Error != protocol.NewExecutionTimeoutError(300).Error() {
		t.Fatalf("without: %+v, want the timeout text", res)
	}
	h.check(t)
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
