package sandbox

import (
	"sync"
	"time"
)

// runClock measures a run against its bound. It runs while guest code runs
// or while the guest waits on nothing but its own timers, and stops while
// the only work in flight is a host call (a tool call, a stub outbound
// request). With wall set it never stops: host waits spend the bound too.
// A process shared with other runs gives back, through Credit, the time its
// CPU served other processes while the run executed.
//
// When the spent time reaches the bound, onExpire runs once (it interrupts
// the runtime) and expired closes. The loop's goroutine drives it; Left and
// Credit may come from any goroutine.
type runClock struct {
	bound time.Duration
	wall  bool

	mu      sync.Mutex
	spent   time.Duration
	running bool
	since   time.Time

	timer    *time.Timer
	disarmed bool // the run ended: nothing arms the timer again
	expired  chan struct{}
	once     sync.Once
	onExpire func()
}

var _ Clock = (*runClock)(nil)

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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	c.running = true
	c.since = time.Now()
	c.armLocked()
}

// armLocked sets the timer for what remains of the bound, or fires at once
// when nothing does. c.mu is held and the clock runs.
func (c *runClock) armLocked() {
	if c.disarmed {
		// A credit the meter gives after the run ended must not set the
		// timer again: it would keep the run's runtime alive until then.
		return
	}
	left := c.bound - c.spent - time.Since(c.since)
	if left <= 0 {
		c.fire()
		return
	}
	c.timer.Reset(left)
}

// pause stops the clock, unless it measures wall time.
func (c *runClock) pause() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running || c.wall {
		return
	}
	c.timer.Stop()
	c.spent += time.Since(c.since)
	c.running = false
}

// elapsed is the time spent on the clock so far.
func (c *runClock) elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.elapsedLocked()
}

func (c *runClock) elapsedLocked() time.Duration {
	if c.running {
		return c.spent + time.Since(c.since)
	}
	return c.spent
}

// Credit implements Clock: d of the time spent is given back, never more
// than was spent; a clock whose bound already passed stays expired.
func (c *runClock) Credit(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		// First from the stretch in progress: its start moves later.
		take := min(d, time.Since(c.since))
		c.since = c.since.Add(take)
		d -= take
	}
	c.spent = max(0, c.spent-d)
	if c.running && !c.firedLocked() {
		c.armLocked()
	}
}

// firedLocked reports whether the bound already passed and fired. c.mu is
// held.
func (c *runClock) firedLocked() bool {
	select {
	case <-c.expired:
		return true
	default:
		return false
	}
}

// disarm stops the clock for good (its bound no longer applies) and reports
// whether it had already fired.
func (c *runClock) disarm() (fired bool) {
	c.mu.Lock()
	c.disarmed = true
	c.timer.Stop()
	c.mu.Unlock()
	fired = true
	c.once.Do(func() { fired = false })
	return fired
}

// Left implements Clock: what remains of the bound.
func (c *runClock) Left() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bound - c.elapsedLocked()
}
