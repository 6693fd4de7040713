package gateway

import (
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
)

// testClock is a clock the test moves by hand.
type testClock struct{ t time.Time }

func newTestClock() *testClock               { return &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestBucketChargesRefillsAndSaysWhenItCanPay(t *testing.T) {
	clk := newTestClock()
	b := newBucket(10, 10*time.Second, clk.now()) // one execution a second
	for i := range 10 {
		if wait := b.take(clk.now(), 1, 1); wait != 0 {
			t.Fatalf("take %d of a full bucket: wait %v", i+1, wait)
		}
	}
	if wait := b.take(clk.now(), 1, 1); wait != time.Second {
		t.Fatalf("an empty bucket: wait %v, want 1s", wait)
	}
	clk.advance(250 * time.Millisecond)
	if wait := b.take(clk.now(), 1, 1); wait != 750*time.Millisecond {
		t.Fatalf("a quarter refilled: wait %v, want 750ms", wait)
	}
	clk.advance(750 * time.Millisecond)
	if wait := b.take(clk.now(), 1, 1); wait != 0 {
		t.Fatalf("after the wait it named: wait %v", wait)
	}
	// A refusal takes nothing: the next one names the same time.
	if a, b2 := b.take(clk.now(), 1, 1), b.take(clk.now(), 1, 1); a != time.Second || b2 != time.Second {
		t.Fatalf("refusals took something: %v then %v", a, b2)
	}
	// Refill stops at the budget: after an idle hour, ten and no more.
	clk.advance(time.Hour)
	for range 10 {
		if wait := b.take(clk.now(), 1, 1); wait != 0 {
			t.Fatalf("after an idle hour: wait %v", wait)
		}
	}
	if wait := b.take(clk.now(), 1, 1); wait != time.Second {
		t.Fatalf("the eleventh after an idle hour: wait %v, want 1s", wait)
	}
	// A refund gives one back, never past the budget.
	b.refund(clk.now(), 1)
	if wait := b.take(clk.now(), 1, 1); wait != 0 {
		t.Fatalf("after a refund: wait %v", wait)
	}
}

func TestBucketOfRunClockGoesBelowZero(t *testing.T) {
	clk := newTestClock()
	b := newBucket(float64(time.Second), time.Hour, clk.now()) // 1s of run clock an hour
	if wait := b.take(clk.now(), 0, 0); wait != 0 {
		t.Fatalf("a full bucket: wait %v", wait)
	}
	b.charge(clk.now(), float64(3*time.Second)) // one run spent three times the budget
	// Two seconds below zero, refilling a second an hour: two hours.
	if wait := b.take(clk.now(), 0, 0); wait != 2*time.Hour {
		t.Fatalf("two seconds in debt: wait %v, want 2h", wait)
	}
	clk.advance(90 * time.Minute)
	if wait := b.take(clk.now(), 0, 0); wait != 30*time.Minute {
		t.Fatalf("half a second in debt: wait %v, want 30m", wait)
	}
	clk.advance(30 * time.Minute)
	if wait := b.take(clk.now(), 0, 0); wait != 0 {
		t.Fatalf("back at zero: wait %v", wait)
	}
	// A debt past any sensible wait is held at maxRetryAfter.
	b.charge(clk.now(), float64(1000*time.Hour))
	if wait := b.take(clk.now(), 0, 0); wait != maxRetryAfter {
		t.Fatalf("a huge debt: wait %v", wait)
	}
	// A clock that went back adds nothing.
	clk.advance(-time.Hour)
	if wait := b.take(clk.now(), 0, 0); wait != maxRetryAfter {
		t.Fatalf("after the clock went back: wait %v", wait)
	}
}

func TestBudgetNamesItsBoundAndKeepsItsBucketsAcrossReloads(t *testing.T) {
	clk := newTestClock()
	cfg := config.Budget{Window: config.Duration(time.Hour), Executions: 2, RunClock: config.Duration(10 * time.Minute)}
	b := newBudget(cfg, nil, clk.now())
	for range 2 {
		if r := b.admit(clk.now()); r != nil {
			t.Fatalf("refused within the budget: %+v", r)
		}
	}
	want := refusal{reason: reasonBudgetExecutions, limit: "a budget of 2 executions per 1h0m0s", retryAfter: 30 * time.Minute}
	if r := b.admit(clk.now()); r == nil || *r != want {
		t.Fatalf("past the budget: %+v, want %+v", r, want)
	}
	b.charge(clk.now(), 11*time.Minute)
	want = refusal{reason: reasonBudgetRunClock, limit: "a budget of 10m0s of run-clock time per 1h0m0s", retryAfter: 6 * time.Minute}
	if r := b.admit(clk.now()); r == nil || *r != want {
		t.Fatalf("past the run clock: %+v, want %+v", r, want)
	}

	// The same budget after a reload keeps both buckets; a changed bound
	// gets a fresh, full bucket of its own and the other stays.
	if again := newBudget(cfg, b, clk.now()); again.execs != b.execs || again.clock != b.clock {
		t.Fatal("an unchanged budget lost its state on a reload")
	}
	more := cfg
	more.Executions = 3
	if again := newBudget(more, b, clk.now()); again.execs == b.execs || again.clock != b.clock {
		t.Fatal("a changed executions bound should start afresh, and only it")
	}
	longer := cfg
	longer.Window = config.Duration(2 * time.Hour)
	if again := newBudget(longer, b, clk.now()); again.execs == b.execs || again.clock == b.clock {
		t.Fatal("a changed window should start both afresh")
	}
	if newBudget(config.Budget{Window: config.Duration(time.Hour)}, b, clk.now()) != nil {
		t.Fatal("a window alone bounds nothing")
	}
	var none *budget
	if none.admit(clk.now()) != nil {
		t.Fatal("no budget refused")
	}
	none.charge(clk.now(), time.Second)
	none.unadmit(clk.now())

	one := newBudget(config.Budget{Window: config.Duration(time.Minute), Executions: 1}, nil, clk.now())
	one.admit(clk.now())
	if r := one.admit(clk.now()); r == nil || r.limit != "a budget of 1 execution per 1m0s" {
		t.Fatalf("one execution: %+v", r)
	}
}
