package remote

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Each wait lies in the upper half of its step, the steps double from
// BaseDelay up to MaxDelay, and a hint longer than the wait raises it.
func TestRetryWaits(t *testing.T) {
	r := Retry{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}.withDefaults()
	refused := protocol.NewNoExecutorError()
	for n, step := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 40: time.Second} {
		for range 50 {
			d, ok := r.wait(n, refused)
			if !ok || d < step/2 || d > step {
				t.Fatalf("retry %d waits %v (%v), want between %v and %v", n, d, ok, step/2, step)
			}
		}
	}
	hinted := protocol.NewQueueOverflowError(4, 900*time.Millisecond)
	if d, ok := r.wait(1, hinted); !ok || d != 900*time.Millisecond {
		t.Fatalf("a 900 ms hint gave %v (%v), want 900ms", d, ok)
	}
	if _, ok := r.wait(1, protocol.NewQueueOverflowError(4, 2*time.Second)); ok {
		t.Fatal("a hint past MaxDelay was waited for")
	}
}

// The context ending while retrying waits returns the last fault at once.
func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	_, err := retrying(ctx, Retry{Attempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour}, func() (int, error) {
		calls++
		cancel()
		return 0, protocol.NewNoExecutorError()
	})
	if calls != 1 || err == nil || err.Error() != protocol.NewNoExecutorError().Error() {
		t.Fatalf("after %d attempts: %v; want the refusal after one", calls, err)
	}
}
