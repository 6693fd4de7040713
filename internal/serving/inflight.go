package serving

import (
	"context"
	"sync"
	"sync/atomic"
)

// InFlight counts the executions a tenant or a member runs, and tells a
// waiter when the count falls to zero: a drain and a removed member's
// retirement wait on that rather than poll.
type InFlight struct {
	n    atomic.Int64
	mu   sync.Mutex
	zero chan struct{} // closed when n falls to zero; nil while nobody waits
}

// Add changes the count by d and returns the new count.
func (c *InFlight) Add(d int64) int64 {
	n := c.n.Add(d)
	if n == 0 {
		c.mu.Lock()
		if c.zero != nil {
			close(c.zero)
			c.zero = nil
		}
		c.mu.Unlock()
	}
	return n
}

// Load is the count.
func (c *InFlight) Load() int64 { return c.n.Load() }

// Idle is closed once the count is zero, at once when it is.
func (c *InFlight) Idle() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n.Load() == 0 {
		return closedChan
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	return c.zero
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// WaitClosed returns when ch is closed (true) or ctx ends (false).
func WaitClosed(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
