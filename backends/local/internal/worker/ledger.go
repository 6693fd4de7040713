package worker

import "math"

// memLedger attributes a worker's heap to the runs it hosts. goja has no
// memory accounting and the Go heap is one pool, so the ledger estimates:
//
//   - One run executes JavaScript at a time (the CPU gate), so every byte
//     allocated while a run holds the gate is charged to that run as young
//     memory; bytes allocated outside any run (preparing runtimes) are the
//     worker's own.
//   - A collection tells how much of all that is live. Each correction
//     compares the live heap with what the ledger holds and takes what was
//     freed, in order, from the runs that ended (their memory is garbage
//     once their runtime is dropped), then from young memory (most objects
//     die young), then from older memory, each in proportion to what every
//     run holds. What the runs that ended left behind (cache entries they
//     compiled) becomes the worker's own.
//
// The estimate is exact for a worker with one run, and for memory bombs,
// whose growth is young and survives. Its error is bounded by what other
// runs allocate between two collections; the process-wide bounds (the soft
// memory limit, RLIMIT_AS, the parent's RSS poll) hold regardless.
//
// A memLedger is not safe for concurrent use; the gate guards it.
type memLedger struct {
	base      int64 // the worker's own live memory: runtimes prepared ahead, caches
	baseYoung int64 // allocated outside any run since the last correction
	dying     int64 // what ended runs held, not yet seen freed
	held      int64 // the runs' estimates together, kept as they change
	runs      map[uint64]*memCharge
}

// memCharge is one run's estimated memory.
type memCharge struct {
	old   int64 // live at the last correction
	young int64 // allocated since
	limit int64 // the run's memory limit in bytes
	mark  int64 // old at markGrowth
}

func newMemLedger(base int64) *memLedger {
	return &memLedger{base: base, runs: map[uint64]*memCharge{}}
}

// add opens a run's account.
func (l *memLedger) add(run uint64, limit int64) {
	l.runs[run] = &memCharge{limit: limit}
}

// end closes a run's account; what it held is expected to be freed.
func (l *memLedger) end(run uint64) {
	if c := l.runs[run]; c != nil {
		l.dying += c.old + c.young
		l.held -= c.old + c.young
		delete(l.runs, run)
	}
}

// charge records n bytes allocated while run held the gate; run 0 (or a
// run without an account) charges the worker itself.
func (l *memLedger) charge(run uint64, n int64) {
	if n <= 0 {
		return
	}
	if c := l.runs[run]; c != nil {
		c.young += n
		l.held += n
		return
	}
	l.baseYoung += n
}

// adopt moves n bytes the worker allocated for a run ahead of time (its
// prepared runtime) from the worker's own memory to the run.
func (l *memLedger) adopt(run uint64, n int64) {
	c := l.runs[run]
	if c == nil || n <= 0 {
		return
	}
	n = min(n, l.base)
	l.base -= n
	c.old += n
	l.held += n
}

// estimate is run's estimated memory: live at the last correction plus
// everything allocated since.
func (l *memLedger) estimate(run uint64) int64 {
	if c := l.runs[run]; c != nil {
		return c.old + c.young
	}
	return 0
}

// total is every byte the ledger holds: the worker's own, what ended runs
// left, and every run's estimate. It is asked at every step, so it reads a
// sum kept as the estimates change rather than visit every run.
func (l *memLedger) total() int64 {
	return l.base + l.baseYoung + l.dying + l.held
}

// growth is how much run's live memory grew since markGrowth, read after
// a correction.
func (l *memLedger) growth(run uint64) int64 {
	if c := l.runs[run]; c != nil {
		return c.old - c.mark
	}
	return 0
}

// markGrowth starts every run's growth from now.
func (l *memLedger) markGrowth() {
	for _, c := range l.runs {
		c.mark = c.old
	}
}

// correct reconciles the ledger with live, the heap a collection found
// live.
func (l *memLedger) correct(live int64) {
	var old, young int64
	for _, c := range l.runs {
		old += c.old
		young += c.young
	}
	young += l.baseYoung
	freed := l.base + l.dying + old + young - live

	if freed < 0 {
		// More is live than the ledger knew of (goroutine bookkeeping,
		// buffers): the worker's own, never a run's.
		l.base += -freed
		freed = 0
	}
	// Ended runs first.
	fromDying := min(freed, l.dying)
	freed -= fromDying
	l.base += l.dying - fromDying
	l.dying = 0

	// Then young memory, in proportion, then older memory; what is left
	// the worker freed of its own.
	fromYoung := min(freed, young)
	freed -= fromYoung
	fromOld := min(freed, old)
	freed -= fromOld
	keepYoung, keepOld := keep(young, fromYoung), keep(old, fromOld)
	l.held = 0
	for _, c := range l.runs {
		c.old = scale(c.old, keepOld) + scale(c.young, keepYoung)
		c.young = 0
		l.held += c.old
	}
	l.base += scale(l.baseYoung, keepYoung)
	l.baseYoung = 0
	l.base = max(0, l.base-freed)
}

// scale is n times f, rounded to a byte.
func scale(n int64, f float64) int64 { return int64(math.Round(float64(n) * f)) }

// keep is the share of total that survives when freed of it is gone.
func keep(total, freed int64) float64 {
	if total <= 0 {
		return 1
	}
	return 1 - float64(freed)/float64(total)
}
