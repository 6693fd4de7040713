package capnweb

import (
	"context"
	"sync"
)

// cell is a result that settles once: a push result we serve, a result we
// await from the peer, or a promise export.
type cell struct {
	mu sync.Mutex
	// done is closed when the cell settles; it is made by the first
	// waiter, as most cells settle with no goroutine waiting on them.
	done    chan struct{}
	settled bool
	val     any
	err     error
	cbs     []func(any, error)
}

func newCell() *cell { return &cell{} }

// settle stores the outcome and runs the waiting callbacks; only the first
// call counts. Never call it with the session lock held: callbacks take it.
func (c *cell) settle(v any, err error) bool {
	c.mu.Lock()
	if c.settled {
		c.mu.Unlock()
		return false
	}
	c.settled, c.val, c.err = true, v, err
	cbs := c.cbs
	c.cbs = nil
	if c.done != nil {
		close(c.done)
	}
	c.mu.Unlock()
	for _, fn := range cbs {
		fn(v, err)
	}
	return true
}

// then runs fn once the cell settles (at once if it has).
func (c *cell) then(fn func(any, error)) {
	c.mu.Lock()
	if !c.settled {
		c.cbs = append(c.cbs, fn)
		c.mu.Unlock()
		return
	}
	v, err := c.val, c.err
	c.mu.Unlock()
	fn(v, err)
}

func (c *cell) isSettled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settled
}

func (c *cell) peek() (any, error, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val, c.err, c.settled
}

func (c *cell) wait(ctx context.Context) (any, error) {
	c.mu.Lock()
	if c.settled {
		v, err := c.val, c.err
		c.mu.Unlock()
		return v, err
	}
	if c.done == nil {
		c.done = make(chan struct{})
	}
	done := c.done
	c.mu.Unlock()
	select {
	case <-done:
		return c.val, c.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
