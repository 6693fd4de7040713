package sandbox

import "time"

// loop is the session's event loop and the one monitor of its bounds, for
// the run and for a retained session's invocations alike. Host answers, due
// timers and (once kept) invocations run one piece of work at a time, each
// holding the process's gate and spending the clock of its turn: the run's
// until the entry settles, then the clock of the invocation in flight. It
// returns when the entry settles (kept nil) or, for a kept session, when it
// ends: a bound, the context (the memory watchdog's cancel), or Close.
func (s *session) loop(kept *Retained) {
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	defer wait.Stop()
	var closed <-chan struct{}
	if kept != nil {
		closed = kept.closeCh
	}
	for !s.stopped && (kept != nil || !s.completed) {
		var expired <-chan struct{}
		var invokes <-chan *pendingInvocation
		if s.clock != nil {
			s.tick(s.clock)
			expired = s.clock.expired
		} else {
			invokes = kept.invokes
		}
		waitC := s.nextTimer(wait)
		s.leave()
		select {
		case task := <-s.tasks:
			s.work(task)
		case <-waitC:
			s.work(s.fireTimers)
		case inv := <-invokes:
			s.inv, s.clock = inv, inv.clock
			s.work(func() { s.startInvocation(inv) })
		case <-expired:
			s.stopped = true
			s.fatal = s.timedOut()
			if s.ctx.Err() != nil {
				s.fatal = s.cancelled()
			}
		case <-s.ctx.Done():
			s.stopped = true
			s.fatal = s.cancelled()
		case <-closed:
			s.stopped = true
			s.fatal = failure{}
		}
		wait.Stop()
		if s.inv != nil && s.inv.answered {
			s.disarm(s.inv.clock)
			s.inv, s.clock = nil, nil
		}
	}
}

// work runs one piece of work holding the gate, on its turn's clock.
// Between invocations nothing spends a bound, but a process shared with
// other runs cannot give one callback its CPU without end: the piece runs
// on a wall clock of the execution's whole bound of its own, and past it
// ends the session with the timeout text, as an invocation past its bound
// does.
func (s *session) work(fn func()) {
	clock := s.clock
	if clock == nil && s.gate != nil {
		clock = s.newClock(true)
	}
	if !s.enter(clock) {
		return
	}
	if clock != nil {
		clock.resume()
	}
	fn()
	if clock != s.clock {
		// Work between a retained session's invocations: billed with the
		// next invocation or the session's end.
		s.between.Add(int64(clock.elapsed()))
		s.disarm(clock)
	}
}

// newClock is a fresh clock of the job's bound; wall counts host waits too.
func (s *session) newClock(wall bool) *runClock {
	return newRunClock(time.Duration(s.bound())*time.Millisecond, wall, func() {
		s.interrupt(interruptTimeout{})
	})
}

// disarm stops a turn's clock for good. When its bound passed in the
// instant the work ended, the work stands, and the interrupt the clock
// raised must not hit the next piece of work.
func (s *session) disarm(clock *runClock) {
	if clock.disarm() && !s.stopped {
		s.vm.ClearInterrupt()
		s.interruptedAt.Store(0)
	}
}

// tick stops clock while the only work in flight is a host call (unless
// host waits count) and runs it otherwise: guest work done elsewhere, a
// native request say, spends the bound beside an open tool call.
func (s *session) tick(clock *runClock) {
	if s.open > 0 && s.elsewhere == 0 {
		clock.pause()
	} else {
		clock.resume()
	}
}

// nextTimer arms wait for the earliest pending timer and returns the
// channel the loop selects on: nil without timers, alwaysReady when one is
// due (still through the select, so that a storm of due timers cannot
// starve the bound or the context).
func (s *session) nextTimer(wait *time.Timer) <-chan time.Time {
	t := s.timers.peek()
	if t == nil {
		return nil
	}
	if d := time.Until(t.when); d > 0 {
		wait.Reset(d)
		return wait.C
	}
	return alwaysReady
}

// alwaysReady is a closed channel: a receive from it never blocks.
var alwaysReady = func() chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// post queues fn onto the loop from another goroutine; it is dropped once
// the run has returned.
func (s *session) post(fn func()) {
	select {
	case s.tasks <- fn:
	case <-s.done:
	}
}

// postNow is post for a caller that must not wait (the worker's read
// loop): when the loop's queue is full, a goroutine waits in its stead.
func (s *session) postNow(fn func()) {
	select {
	case s.tasks <- fn:
	case <-s.done:
	default:
		go s.post(fn)
	}
}
