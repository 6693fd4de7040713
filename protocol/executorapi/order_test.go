package executorapi

import (
	"context"
	"testing"
	"time"
)

// A turn given up while an earlier one still runs passes on only after it:
// the invocation behind both never starts beside the earlier one.
func TestInvokeOrderHoldsWhenACallerGivesUp(t *testing.T) {
	var o invokeOrder
	first, second, third := o.take("x"), o.take("x"), o.take("x")
	if err := first.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := second.wait(ctx); err == nil {
		t.Fatal("a cancelled wait behind a running invocation returned nil")
	}
	second.done()
	started := make(chan struct{})
	go func() {
		_ = third.wait(context.Background())
		close(started)
	}()
	select {
	case <-started:
		t.Fatal("the third invocation started while the first still ran")
	case <-time.After(50 * time.Millisecond):
	}
	first.done()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the third invocation never started after the first was done")
	}
	third.done()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.last) != 0 {
		t.Fatalf("%d executions left in the table", len(o.last))
	}
}

// Invocations of different executions do not wait for each other.
func TestInvokeOrderIsPerExecution(t *testing.T) {
	var o invokeOrder
	a := o.take("a")
	b := o.take("b")
	if b.prev != nil {
		t.Fatal("an invocation of b waits behind one of a")
	}
	a.done()
	b.done()
}
