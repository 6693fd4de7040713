package executorapi

import (
	"context"
	"sync"
)

// invokeOrder runs the invocations of each execution one at a time, in the
// order they took their turns. A served call gives up the connection's
// delivery turn before it reaches the executor (an invocation may wait as
// long as its handler runs), and from there two pipelined invocations would
// race to the handle's queue: each takes a turn here first, and waits for
// the one before it to finish.
type invokeOrder struct {
	mu sync.Mutex
	// last is the turn of the latest invocation of each execution; it is
	// removed when that turn is done with nobody behind it.
	last map[string]chan struct{}
}

// invokeTurn is one invocation's place: it starts once prev is closed and
// closes mine when it is done.
type invokeTurn struct {
	order *invokeOrder
	id    string
	prev  <-chan struct{}
	mine  chan struct{}
}

// take queues an invocation of executionID behind the earlier ones.
func (o *invokeOrder) take(executionID string) invokeTurn {
	mine := make(chan struct{})
	o.mu.Lock()
	if o.last == nil {
		o.last = map[string]chan struct{}{}
	}
	prev := o.last[executionID]
	o.last[executionID] = mine
	o.mu.Unlock()
	return invokeTurn{order: o, id: executionID, prev: prev, mine: mine}
}

// wait returns once every earlier invocation is done, or with ctx's cause
// when the caller gives up first.
func (t invokeTurn) wait(ctx context.Context) error {
	if t.prev == nil {
		return nil
	}
	select {
	case <-t.prev:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// done lets the next invocation start. A turn given up while an earlier one
// still runs passes on only after that one, so the order holds whoever
// gives up. The zero turn (no invocation) does nothing.
func (t invokeTurn) done() {
	if t.mine == nil {
		return
	}
	finish := func() {
		close(t.mine)
		t.order.mu.Lock()
		if t.order.last[t.id] == t.mine {
			delete(t.order.last, t.id)
		}
		t.order.mu.Unlock()
	}
	if t.prev != nil {
		select {
		case <-t.prev:
		default:
			go func() {
				<-t.prev
				finish()
			}()
			return
		}
	}
	finish()
}
