package sandbox

import (
	"context"
	"time"
)

// Gate is implemented by a Host whose process runs other runs beside this
// one (a worker's meter). The run brackets every piece of work it does in
// its runtime — compiling and evaluating the program, a host answer, due
// timers, an invocation — with Enter and Leave, so that the process can
// tell which run the CPU and the heap it spends belong to, hold the piece's
// bound from outside, and keep a piece that runs long from delaying the
// others. Pieces of different runs may execute at the same time.
type Gate interface {
	// Enter marks the start of a piece of work under clock (nil: a piece
	// with no bound). It returns false, having started nothing, when ctx
	// ended first.
	Enter(ctx context.Context, clock Clock) bool
	// Leave marks its end.
	Leave()
}

// Clock is the run clock a piece of work spends, as its Gate sees it. Any
// goroutine may call its methods.
type Clock interface {
	// Left is what remains of the bound.
	Left() time.Duration
	// Credit gives back d of the time that passed while the piece was in
	// flight: time the process's CPU served other processes, which is no
	// work of the run's.
	Credit(d time.Duration)
}

// Meter is implemented by a Host whose process charges each run what it
// spends (a worker's meter): work the run needs done on another goroutine
// than its loop's, a native request's body say, is charged to it too.
type Meter interface {
	// OffLoop starts work of the run on the calling goroutine; the
	// function it returns ends it, on the same goroutine.
	OffLoop() func()
}

// gateOf is host's Gate, nil when its process runs this run alone.
func gateOf(host Host) Gate {
	g, _ := host.(Gate)
	return g
}

// enter starts a piece of work on clock (nil: no bound). It reports false,
// and stops the run with its context's cause, when the context ended
// first; nothing may then touch the runtime.
func (s *session) enter(clock *runClock) bool {
	if s.gate == nil || s.inGate {
		return true
	}
	if !s.gate.Enter(s.ctx, clockOf(clock)) {
		if !s.stopped {
			s.stopped = true
			s.fatal = s.cancelled()
		}
		return false
	}
	s.inGate = true
	return true
}

// clockOf is c as a Clock, nil (not a typed nil) when c is nil.
func clockOf(c *runClock) Clock {
	if c == nil {
		return nil
	}
	return c
}

// leave ends the piece of work; the loop calls it before it waits.
func (s *session) leave() {
	if s.inGate {
		s.inGate = false
		s.gate.Leave()
	}
}
