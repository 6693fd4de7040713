package sandbox

import (
	"context"
	"time"
)

// Gate is implemented by a Host whose process runs other runs beside this
// one. One run executes JavaScript at a time in such a process, so that the
// CPU time and the heap the process spends are the run's that holds the
// gate, and a memory watchdog can charge them to it. A run holds the gate
// while it compiles, evaluates and runs its tasks, and lets go whenever its
// loop waits; the time it spends waiting to enter never counts on its run
// clock, in any mode, since it is no work of its own.
type Gate interface {
	// Enter blocks until the run may execute JavaScript. left is what
	// remains of the bound the run executes under from now (the run's, an
	// invocation's, or between a retained session's invocations the bound
	// one callback may take), so the gate can tell when the holder overran.
	// It returns false, holding nothing, when ctx ended first.
	Enter(ctx context.Context, left time.Duration) bool
	// Leave lets another run execute.
	Leave()
}

// gateOf is host's Gate, nil when its process runs this run alone.
func gateOf(host Host) Gate {
	g, _ := host.(Gate)
	return g
}

// enter takes the gate for a piece of work on clock (nil: no bound), with
// the clock suspended while it waits. It reports false, and stops the run
// with its context's cause, when the context ended first; nothing may then
// touch the runtime.
func (s *session) enter(clock *runClock) bool {
	if s.gate == nil || s.inGate {
		return true
	}
	running := clock != nil && clock.suspend()
	var left time.Duration
	if clock != nil {
		left = clock.left()
	}
	if !s.gate.Enter(s.ctx, left) {
		if !s.stopped {
			s.stopped = true
			s.fatal = s.cancelled()
		}
		return false
	}
	s.inGate = true
	if running {
		clock.resume()
	}
	return true
}

// leave lets another run of the process execute; the loop calls it before
// it waits.
func (s *session) leave() {
	if s.inGate {
		s.inGate = false
		s.gate.Leave()
	}
}
