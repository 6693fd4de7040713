package sandbox

import (
	"sync"
	"time"
)

// runClock measures a run against its bound. It runs while guest code runs
// or while the guest waits on nothing but its own timers, and stops while
// the only work in flight is a host call (a tool call, a stub outbound
// request). With wall set it never stops: host waits spend the bound too.
//
// When the spent time reaches the bound, onExpire runs once (it interrupts
// the runtime) and expired closes.
type runClock struct {
	bound   time.Duration
	wall    bool
	spent   time.Duration
	running bool
	since   time.Time

	timer    *time.Timer
	expired  chan struct{}
	once     sync.Once
	onExpire func()
}

func newRunClock(bound time.Duration, wall bool, onExpire func()) *runClock {
	c := &runClock{bound: bound, wall: wall, expired: make(chan struct{}), onExpire: onExpire}
	c.timer = time.AfterFunc(time.Hour, c.fire)
	c.timer.Stop()
	return c
}

func (c *runClock) fire() {
	c.once.Do(func() {
		c.onExpire()
		close(c.expired)
	})
}

// resume starts the clock if it is stopped.
func (c *runClock) resume() {
	if c.running {
		return
	}
	c.running = true
	c.since = time.Now()
	left := c.bound - c.spent
	if left <= 0 {
		c.fire()
		return
	}
	c.timer.Reset(left)
}

// pause stops the clock, unless it measures wall time.
func (c *runClock) pause() {
	if !c.running || c.wall {
		return
	}
	c.timer.Stop()
	c.spent += time.Since(c.since)
	c.running = false
}

// elapsed is the time spent on the clock so far.
func (c *runClock) elapsed() time.Duration {
	if c.running {
		return c.spent + time.Since(c.since)
	}
	return c.spent
}

// disarm stops the clock for good (its bound no longer applies) and reports
// whether it had already fired.
func (c *runClock) disarm() (fired bool) {
	c.timer.Stop()
	fired = true
	c.once.Do(func() { fired = false })
	return fired
}

// suspend stops the clock even when it measures wall time, and reports
// whether it was running: the run waits for its process's CPU, which is no
// time of its own.
func (c *runClock) suspend() bool {
	if !c.running {
		return false
	}
	c.timer.Stop()
	c.spent += time.Since(c.since)
	c.running = false
	return true
}

// left is what remains of the bound.
func (c *runClock) left() time.Duration { return c.bound - c.elapsed() }
