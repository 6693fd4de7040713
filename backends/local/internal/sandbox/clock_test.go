package sandbox

import (
	"context"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Margins here are generous: the machine is small and shared. Each test
// states the rule of the contract's run-clock table it checks.

func toolJob(code string, timeoutMs int64) Job {
	j := job(code)
	j.TimeoutMs = timeoutMs
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	return j
}

// A tool call does not spend the bound: a 300 ms bound survives a 1 s call.
func TestClockToolCallDoesNotCount(t *testing.T) {
	h := &fakeHost{delay: time.Second, answer: func(call) (string, error) { return `{"result":"slow"}`, nil }}
	r := runJob(t, toolJob(`async () => await store.slow()`, 300), h)
	if got := result(t, r); got != "slow" {
		t.Fatalf("got %#v", got)
	}
}

// countHostWaits restores the wall clock: the same call now times out.
func TestClockCountHostWaits(t *testing.T) {
	h := &fakeHost{delay: 2 * time.Second}
	j := toolJob(`async () => await store.slow()`, 300)
	j.CountHostWaits = true
	start := time.Now()
	r := runJob(t, j, h)
	wantError(t, r, protocol.NewExecutionTimeoutError(300).Error())
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Fatalf("the run waited %v for the host after its bound", el)
	}
}

// Guest compute counts, also while a host call is open.
func TestClockComputeCountsDuringHostCall(t *testing.T) {
	h := &fakeHost{delay: 5 * time.Second}
	start := time.Now()
	r := runJob(t, toolJob(`async () => { const p = store.slow(); while (true) {} }`, 300), h)
	wantError(t, r, protocol.NewExecutionTimeoutError(300).Error())
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
}

// A guest timer delay counts when no host call is open.
func TestClockTimerDelayCounts(t *testing.T) {
	start := time.Now()
	r := runJob(t, toolJob(`async () => { await new Promise((r) => setTimeout(r, 5000)); return 'late' }`, 300), nil)
	wantError(t, r, protocol.NewExecutionTimeoutError(300).Error())
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
}

// A guest timer delay does not count while a host call is open: a 700 ms
// timer runs out beside a 1 s call under a 300 ms bound.
func TestClockTimerDelayPausedDuringHostCall(t *testing.T) {
	h := &fakeHost{delay: time.Second, answer: func(call) (string, error) { return `{"result":"tool"}`, nil }}
	r := runJob(t, toolJob(`async () => {
    const timer = new Promise((r) => setTimeout(() => r('timer'), 700))
    return [await store.slow(), await timer]
  }`, 300), h)
	got := result(t, r)
	if !reflect.DeepEqual(got, []any{"tool", "timer"}) {
		t.Fatalf("got %#v", got)
	}
}

// Whatever a timer callback does when it fires spends the bound, also
// while a host call is open: a callback that spins ends the run at its
// bound beside a 5 s tool call.
func TestClockTimerCallbackCountsDuringHostCall(t *testing.T) {
	h := &fakeHost{delay: 5 * time.Second}
	start := time.Now()
	r := runJob(t, toolJob(`async () => {
    setTimeout(() => { while (true) {} }, 20)
    return await store.slow()
  }`, 300), h)
	wantError(t, r, protocol.NewExecutionTimeoutError(300).Error())
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
}

// Cryptography behind crypto.subtle is the guest's own work: it spends the
// bound beside an open tool call.
func TestClockSubtleCryptoCountsDuringHostCall(t *testing.T) {
	h := &fakeHost{delay: 5 * time.Second}
	r := runJob(t, toolJob(`async () => {
    const call = store.slow()
    const data = new Uint8Array(1 << 20)
    for (;;) await crypto.subtle.digest('SHA-256', data)
  }`, 300), h)
	wantError(t, r, protocol.NewExecutionTimeoutError(300).Error())
}

// A run that never settles and waits on nothing times out.
func TestClockPendingForeverTimesOut(t *testing.T) {
	r := runJob(t, toolJob(`async () => { await new Promise(() => {}) }`, 200), nil)
	wantError(t, r, protocol.NewExecutionTimeoutError(200).Error())
}

func TestTimers(t *testing.T) {
	got := result(t, runJob(t, job(`async () => {
    const order = []
    setTimeout(() => order.push('b'), 20)
    setTimeout(() => order.push('a'), 0)
    const cancelled = setTimeout(() => order.push('never'), 5)
    clearTimeout(cancelled)
    queueMicrotask(() => order.push('micro'))
    setTimeout((x, y) => order.push(x + y), 10, 'ar', 'gs')
    let n = 0
    await new Promise((resolve) => { const id = setInterval(() => { if (++n === 3) { clearInterval(id); resolve() } }, 1) })
    await new Promise((r) => setTimeout(r, 40))
    order.push('ticks ' + n)
    let bad
    try { setTimeout('code', 1) } catch (e) { bad = e instanceof TypeError }
    return [order, bad, typeof setTimeout(() => {}, 1)]
  }`), nil))
	want := []any{[]any{"micro", "a", "args", "b", "ticks 3"}, true, "number"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestTimerCallbackThrowEndsRun(t *testing.T) {
	r := runJob(t, job(`async () => { setTimeout(() => { throw new Error('from a timer') }, 1); await new Promise(() => {}) }`), nil)
	wantError(t, r, "from a timer")
}

func TestMicrotaskThrowEndsRun(t *testing.T) {
	r := runJob(t, job(`async () => { queueMicrotask(() => { throw new Error('from a microtask') }); await null; await null; return 'settled' }`), nil)
	wantError(t, r, "from a microtask")
}

func TestCancelInterrupts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	r := envelope(t)(Run(ctx, job(`async () => { while (true) {} }`), nil))
	if !r.HasError || r.Error != context.Canceled.Error() {
		t.Fatalf("error %q", r.Error)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("took %v", el)
	}
}

// A run that settles while a host call is open returns at once, cancels the
// call's context and leaves no goroutine behind.
func TestOpenHostCallDoesNotOutliveRun(t *testing.T) {
	before := runtime.NumGoroutine()
	h := &fakeHost{delay: 30 * time.Second}
	start := time.Now()
	r := runJob(t, toolJob(`async () => { store.slow(); return 'settled' }`, 5000), h)
	if got := result(t, r); got != "settled" {
		t.Fatalf("got %#v", got)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Run waited %v for the open call", el)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the run, %d before", n, before)
	}
}

// A credit the meter gives after the run ended (its last piece is
// accounted at the next step) does not set the clock's timer again: the
// timer would keep the run's runtime alive until its bound.
func TestClockCreditAfterDisarmArmsNothing(t *testing.T) {
	c := newRunClock(time.Minute, false, func() {})
	c.resume()
	c.disarm()
	c.Credit(time.Millisecond)
	if c.timer.Stop() {
		t.Fatal("a credit after the run ended armed the clock's timer again")
	}
}
