package worker

// heapLedger attributes a worker's heap to its runs in two memLedgers: one
// for objects of the size classes, one for large objects (past 32 KiB).
// A collection tells how much of each is live, and each ledger is
// reconciled with its own part. The two age differently: a run computing
// on churns small objects that die at once, while a buffer being read or
// built (a response body, a typed array, a long string) is large and
// lives; reconciled together, a sibling's churn would take a share of the
// buffers that survive. A run's estimate, its limit and its peak are over
// both.
//
// A heapLedger is not safe for concurrent use; the meter guards it.
type heapLedger struct {
	small, large *memLedger
	limits       map[uint64]int64
	peaks        map[uint64]int64
	// overs are the runs whose estimate is past their limit, kept as the
	// estimates change: a step asks at every piece's start and end, and a
	// worker may host a thousand runs.
	overs map[uint64]struct{}
}

func newHeapLedger(base int64) *heapLedger {
	return &heapLedger{small: newMemLedger(base), large: newMemLedger(0),
		limits: map[uint64]int64{}, peaks: map[uint64]int64{}, overs: map[uint64]struct{}{}}
}

// add opens a run's account.
func (l *heapLedger) add(run uint64, limit int64) {
	l.small.add(run, limit)
	l.large.add(run, limit)
	l.limits[run] = limit
}

// end closes a run's account; what it held is expected to be freed.
func (l *heapLedger) end(run uint64) {
	l.small.end(run)
	l.large.end(run)
	delete(l.limits, run)
	delete(l.peaks, run)
	delete(l.overs, run)
}

// charge records small and large bytes allocated for run (0, or a run
// without an account: the worker itself).
func (l *heapLedger) charge(run uint64, small, large int64) {
	l.small.charge(run, small)
	l.large.charge(run, large)
	l.notePeak(run)
}

// chargeOne records n bytes allocated in one object for run, in the
// ledger of its size.
func (l *heapLedger) chargeOne(run uint64, n int64) {
	if n > largeObject {
		l.charge(run, 0, n)
	} else {
		l.charge(run, n, 0)
	}
}

// largeObject is the size past which the Go allocator makes an object of
// its own (the largest size class).
const largeObject = 32 << 10

// adopt moves n bytes the worker allocated for a run ahead of time (its
// prepared runtime, small objects) from the worker's own to the run.
func (l *heapLedger) adopt(run uint64, n int64) {
	l.small.adopt(run, n)
	l.notePeak(run)
}

// notePeak records run's estimate after it grew: its peak, and whether it
// is past its limit.
func (l *heapLedger) notePeak(run uint64) {
	if limit, ok := l.limits[run]; ok {
		e := l.estimate(run)
		l.peaks[run] = max(l.peaks[run], e)
		if e > limit {
			l.overs[run] = struct{}{}
		}
	}
}

// estimate is run's estimated memory over both ledgers.
func (l *heapLedger) estimate(run uint64) int64 {
	return l.small.estimate(run) + l.large.estimate(run)
}

// peakOf is the largest estimate run had.
func (l *heapLedger) peakOf(run uint64) int64 { return l.peaks[run] }

// over lists the runs whose estimate is past their limit.
func (l *heapLedger) over() []uint64 {
	if len(l.overs) == 0 {
		return nil
	}
	out := make([]uint64, 0, len(l.overs))
	for run := range l.overs {
		out = append(out, run)
	}
	return out
}

// correct reconciles each ledger with its part of the live heap. An
// estimate falls only here, so only here may a run leave the overs.
func (l *heapLedger) correct(liveSmall, liveLarge int64) {
	l.small.correct(liveSmall)
	l.large.correct(liveLarge)
	clear(l.overs)
	for run, limit := range l.limits {
		if l.estimate(run) > limit {
			l.overs[run] = struct{}{}
		}
	}
}

// total is every byte both ledgers hold.
func (l *heapLedger) total() int64 { return l.small.total() + l.large.total() }

// dying is what ended runs held, not yet seen freed.
func (l *heapLedger) dying() int64 { return l.small.dying + l.large.dying }

// base is the worker's own memory.
func (l *heapLedger) base() int64 { return l.small.base + l.large.base }

// grower is the run whose live memory grew the most since the last time it
// was asked, over both ledgers (0: none grew), read after a correction.
func (l *heapLedger) grower() uint64 {
	var id uint64
	var most int64
	for run := range l.limits {
		g := l.small.growth(run) + l.large.growth(run)
		if g > most {
			id, most = run, g
		}
	}
	l.small.markGrowth()
	l.large.markGrowth()
	return id
}
