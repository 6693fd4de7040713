package gateway

import (
	"math"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

// bucket is one budget over a window that refills continuously: it holds
// the whole budget when full and gains budget/window every moment, so a
// tenant that spent it may go on as soon as the bucket can pay rather than
// at the turn of a calendar window, and the wait is exact.
//
// Amounts are float64: executions, or nanoseconds of run clock. Both are
// whole numbers well inside float64's exact range, and the refill is
// computed as elapsed*budget/window so that round numbers stay exact.
type bucket struct {
	mu     sync.Mutex
	budget float64
	window time.Duration
	level  float64   // what is left; below zero after an overspending run
	at     time.Time // when level was last brought up to date
}

// maxRetryAfter bounds the wait a bucket names: a run-clock debt far past a
// tiny budget could otherwise name centuries (and overflow).
const maxRetryAfter = 366 * 24 * time.Hour

// slack absorbs float rounding, so that a caller who waited exactly the
// time a bucket named is not turned away for a sliver.
const slack = 1e-6

// newBucket is a full bucket of budget per window.
func newBucket(budget float64, window time.Duration, now time.Time) *bucket {
	return &bucket{budget: budget, window: window, level: budget, at: now}
}

// refill brings level up to now. A clock that went back adds nothing.
func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.level = min(b.budget, b.level+float64(d)*b.budget/float64(b.window))
		b.at = now
	}
}

// take pays amount when the bucket holds at least need, and returns 0.
// Otherwise it takes nothing and returns how long until the bucket will
// hold need.
func (b *bucket) take(now time.Time, need, amount float64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.level+slack >= need {
		b.level -= amount
		return 0
	}
	wait := math.Ceil((need - b.level) * float64(b.window) / b.budget)
	if wait >= float64(maxRetryAfter) {
		return maxRetryAfter
	}
	return time.Duration(wait)
}

// charge takes amount whatever the level: the run already happened.
func (b *bucket) charge(now time.Time, amount float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.level -= amount
}

// refund gives amount back, up to a full bucket.
func (b *bucket) refund(now time.Time, amount float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	b.level = min(b.budget, b.level+amount)
}

// budget is a tenant's policy.budget: a bucket of executions started and
// one of run-clock time, either absent when it sets no bound. A nil
// *budget bounds nothing.
type budget struct {
	cfg   config.Budget
	execs *bucket
	clock *bucket
}

// newBudget builds c's buckets, full, keeping old's bucket of either kind
// when its bound did not change, so that a reload neither refills nor
// empties it. It returns nil when c bounds nothing.
func newBudget(c config.Budget, old *budget, now time.Time) *budget {
	if !c.IsSet() {
		return nil
	}
	b := &budget{cfg: c}
	same := old != nil && old.cfg.Window == c.Window
	if c.Executions > 0 {
		if same && old.cfg.Executions == c.Executions && old.execs != nil {
			b.execs = old.execs
		} else {
			b.execs = newBucket(float64(c.Executions), c.Window.Std(), now)
		}
	}
	if c.RunClock > 0 {
		if same && old.cfg.RunClock == c.RunClock && old.clock != nil {
			b.clock = old.clock
		} else {
			b.clock = newBucket(float64(c.RunClock), c.Window.Std(), now)
		}
	}
	return b
}

// admit pays for one execution starting at now, or says why it may not
// start: the run-clock bucket is below zero, or the executions bucket
// holds less than one.
func (b *budget) admit(now time.Time) *refusal {
	if b == nil {
		return nil
	}
	if b.clock != nil {
		if wait := b.clock.take(now, 0, 0); wait > 0 {
			return &refusal{reason: reasonBudgetRunClock, retryAfter: wait,
				limit: protocol.RunClockBudget(b.cfg.RunClock.Std(), b.cfg.Window.Std())}
		}
	}
	if b.execs != nil {
		if wait := b.execs.take(now, 1, 1); wait > 0 {
			return &refusal{reason: reasonBudgetExecutions, retryAfter: wait,
				limit: protocol.ExecutionBudget(b.cfg.Executions, b.cfg.Window.Std())}
		}
	}
	return nil
}

// unadmit gives back the execution admit paid for, when it never started.
func (b *budget) unadmit(now time.Time) {
	if b != nil && b.execs != nil {
		b.execs.refund(now, 1)
	}
}

// charge spends a finished run's run clock.
func (b *budget) charge(now time.Time, runClock time.Duration) {
	if b != nil && b.clock != nil && runClock > 0 {
		b.clock.charge(now, float64(runClock))
	}
}
