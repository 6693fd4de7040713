package local

import (
	"math"
	"sync/atomic"
	"time"
)

// cpuLoad is how much of a CPU a worker process computed lately: an
// exponentially weighted average of the kernel's CPU count over the
// monitor's polls, with time constant loadWindow. The pool packs a
// tenant's runs onto the workers it holds until they are busy (busyLoad)
// rather than spreading them: a load of runs that mostly wait on their
// host then wakes one process instead of several, and each wake-up of a
// sleeping process is dear. Two workers serving step a's 64 callers spent
// 3.5-3.9 ms of CPU a run; one served them with 2.7 (docs/benchmarks.md).
type cpuLoad struct {
	bits   atomic.Uint64 // the average, float64 bits
	at     atomic.Int64  // when it was last updated, UnixNano; 0: never
	lastAt time.Time     // the monitor alone touches lastAt and lastCPU
	last   time.Duration
}

// loadWindow is the average's time constant: long enough that a run's
// burst between two tool calls does not make its worker look busy, short
// enough that CPU-bound runs do within 120 ms (busyLoad of full use).
const loadWindow = 100 * time.Millisecond

// busyLoad is the share of a CPU past which a worker takes no more runs
// while another worker of its tenant is not busy, and its tenant claims
// another process when it may. A worker is pinned to one CPU: at this
// share a short piece of work already waits about twice its own length.
const busyLoad = 0.7

// busyRuns is how many runs computing at once (not parked on their host)
// make a worker busy whatever its average says. A run that computes on
// makes its worker busy sooner, as a hog (5 ms of CPU in one piece); runs
// that only pass through between tool calls are counted here: at 4, step
// a's load (64 callers on one tenant) still spread over two workers, the
// second taking a third of their CPU.
const busyRuns = 16

// observe takes a poll: the process's CPU count total at now.
func (l *cpuLoad) observe(now time.Time, total time.Duration) {
	if !l.lastAt.IsZero() {
		if dt := now.Sub(l.lastAt); dt > 0 {
			rate := float64(total-l.last) / float64(dt)
			alpha := 1 - math.Exp(-float64(dt)/float64(loadWindow))
			prev := math.Float64frombits(l.bits.Load())
			l.bits.Store(math.Float64bits(prev + alpha*(rate-prev)))
			l.at.Store(now.UnixNano())
		}
	}
	l.lastAt, l.last = now, total
}

// value is the average at now: a worker the monitor stopped polling (it
// hosts nothing) decays as if it computed nothing since.
func (l *cpuLoad) value(now time.Time) float64 {
	at := l.at.Load()
	if at == 0 {
		return 0
	}
	v := math.Float64frombits(l.bits.Load())
	if idle := now.UnixNano() - at; idle > 0 {
		v *= math.Exp(-float64(idle) / float64(loadWindow))
	}
	return v
}
