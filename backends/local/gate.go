package local

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// heapPoll is how often the memory watchdog looks at the heap while a run
// holds the gate. A read costs about a microsecond, so 1 ms is cheap and
// catches gradual growth early.
const heapPoll = time.Millisecond

// cpuGate lets one run of a worker execute JavaScript at a time (it
// implements sandbox.Gate through each run's host), so that what the
// process spends while a run holds it is that run's: the heap it allocates
// is charged to it in a memLedger, and the shared gatePage tells the parent
// which run to blame when the process must die. It is also the per-run
// memory watchdog: while a run holds the gate it checks every heapPoll that
// the run's estimate stays inside its limit, confirms an estimate past it
// with a collection (garbage alone never trips it), and then cancels that
// run alone with the memory text; its siblings keep running.
//
// Waiting runs enter in the order they came (a channel's waiters queue).
type cpuGate struct {
	sem  chan struct{} // one token: the right to execute JavaScript
	page *gatePage

	mu      sync.Mutex
	ledger  *memLedger
	runs    map[uint64]*gatedRun
	holding bool
	holder  uint64        // 0: the worker's own work
	start   uint64        // allocated bytes when the slice began
	mark    uint64        // allocated bytes when the slice was last accounted
	cycles  uint64        // collections seen
	cpuAt   time.Duration // the process's CPU time when the slice began
	timer   *time.Timer
	armed   bool
	// tuneGC: the worker's GC percentage follows its live heap
	// (gcPercentFor), set at gcPercent.
	tuneGC    bool
	gcPercent int
}

// gatedRun is what the gate knows of one run.
type gatedRun struct {
	limitMB   int
	cancel    context.CancelCauseFunc
	overLimit bool          // the watchdog cancelled it with the memory text
	cpu       time.Duration // the process's CPU time while it held the gate
}

func newCPUGate(page *gatePage, base int64) *cpuGate {
	g := &cpuGate{
		sem:    make(chan struct{}, 1),
		page:   page,
		ledger: newMemLedger(base),
		runs:   map[uint64]*gatedRun{},
	}
	g.cycles = readHeap().cycles
	return g
}

// add opens run's account with its memory limit and what cancels it.
func (g *cpuGate) add(run uint64, limitMB int, cancel context.CancelCauseFunc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.runs[run] = &gatedRun{limitMB: limitMB, cancel: cancel}
	g.ledger.add(run, int64(limitMB)<<20)
}

// remove closes run's account once it has ended, and returns what the
// run was estimated to hold.
func (g *cpuGate) remove(run uint64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	held := g.ledger.estimate(run)
	if r := g.runs[run]; r != nil && r.overLimit {
		held = max(held, int64(r.limitMB)<<20)
	}
	delete(g.runs, run)
	g.ledger.end(run)
	return held
}

// adopt charges run with a runtime the worker built for it ahead of time.
func (g *cpuGate) adopt(run uint64, cost int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ledger.adopt(run, cost)
}

// usage is what run has used so far: the process's CPU time while it held
// the gate, and the largest heap it was charged.
func (g *cpuGate) usage(run uint64) (cpu time.Duration, peakHeap int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r := g.runs[run]; r != nil {
		cpu = r.cpu
	}
	return cpu, g.ledger.peakOf(run)
}

// overLimit reports whether the watchdog ended run for its memory.
func (g *cpuGate) overLimit(run uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[run]
	return r != nil && r.overLimit
}

// enter waits for the gate on behalf of run (0: the worker itself); left
// is what remains of the run's bound, after which the parent may stop the
// whole process if the run still holds the gate (0: no bound). It returns
// false when ctx ended first.
func (g *cpuGate) enter(ctx context.Context, run uint64, left time.Duration) bool {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	now := monoNow()
	var deadline int64
	bound := boundTime
	if left > 0 {
		deadline = now + int64(left)
	}
	g.mu.Lock()
	g.holding, g.holder = true, run
	a := readAllocs()
	g.start, g.mark = a, a
	g.cpuAt = processCPU()
	if r := g.runs[run]; r != nil && r.overLimit {
		// Already cancelled for its memory: it must stop now.
		deadline, bound = now, boundMemory
	}
	if !g.armed {
		g.armed = true
		if g.timer == nil {
			g.timer = time.AfterFunc(heapPoll, g.tick)
		} else {
			g.timer.Reset(heapPoll)
		}
	}
	g.mu.Unlock()
	g.page.set(run, deadline, bound)
	return true
}

// leave ends the current slice and returns the bytes it allocated.
func (g *cpuGate) leave() int64 {
	g.mu.Lock()
	end := g.account()
	spent := int64(end - g.start)
	if r := g.runs[g.holder]; r != nil {
		r.cpu += processCPU() - g.cpuAt
	}
	g.holding, g.holder = false, 0
	g.mu.Unlock()
	// The page is cleared before the token goes, so that the next holder's
	// entry is never overwritten by this one's exit.
	g.page.set(0, 0, boundTime)
	<-g.sem
	return spent
}

// tick is the watchdog: it accounts the slice in progress every heapPoll
// for as long as some run holds the gate.
func (g *cpuGate) tick() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.holding {
		g.armed = false
		return
	}
	g.account()
	g.timer.Reset(heapPoll)
}

// account charges what the holder allocated since the last look, applies
// a collection that happened meanwhile, and when the holder's estimate is
// past its limit confirms it with a collection of its own before
// cancelling it. More than the whole limit allocated since the last look
// (a millisecond, or one slice) is one huge allocation, live as it is
// made: no program reaches that rate with garbage, so it is cancelled at
// once, without waiting for a collection that a native call filling the
// allocation would hold up. It returns the allocation counter. g.mu is
// held.
func (g *cpuGate) account() uint64 {
	h := readHeap()
	delta := g.absorb(h)
	r := g.runs[g.holder]
	if g.holder == 0 || r == nil || r.overLimit {
		return h.allocs
	}
	limit := int64(r.limitMB) << 20
	if int64(delta) > limit {
		g.cancelLocked(g.holder, r)
		return h.allocs
	}
	if g.ledger.estimate(g.holder) <= limit {
		return h.allocs
	}
	runtime.GC()
	h = readHeap()
	g.absorb(h) // the collection just made reconciles the ledger
	return h.allocs
}

// absorb charges the holder with what was allocated since the last
// reading, and when a collection completed meanwhile reconciles the ledger
// with the live heap it found, cancels the runs past their limit and
// retunes the GC. It returns the bytes charged. g.mu is held.
func (g *cpuGate) absorb(h heapReading) uint64 {
	delta := h.allocs - g.mark
	g.ledger.charge(g.holder, int64(delta))
	g.mark = h.allocs
	if h.cycles != g.cycles {
		g.cycles = h.cycles
		g.ledger.correct(int64(h.live))
		g.cancelOver()
		g.retuneGC(h.live)
	}
	return delta
}

// retuneGC moves the GC percentage to what the live heap calls for, when
// it is off by more than a quarter. g.mu is held.
func (g *cpuGate) retuneGC(live uint64) {
	if !g.tuneGC {
		return
	}
	p := gcPercentFor(live)
	if p*4 < g.gcPercent*3 || p*4 > g.gcPercent*5 {
		g.gcPercent = p
		debug.SetGCPercent(p)
	}
}

// cancelOver ends every run whose estimate is past its limit with the
// memory text. g.mu is held.
func (g *cpuGate) cancelOver() {
	for _, id := range g.ledger.over() {
		if r := g.runs[id]; r != nil && !r.overLimit {
			g.cancelLocked(id, r)
		}
	}
}

// cancelLocked ends run id with the memory text. g.mu is held.
func (g *cpuGate) cancelLocked(id uint64, r *gatedRun) {
	r.overLimit = true
	r.cancel(protocol.NewMemoryLimitError(r.limitMB))
	if g.holding && g.holder == id {
		// Its deadline is now: past the grace the parent stops the
		// process if Go code the interrupt cannot reach keeps it here.
		g.page.set(id, monoNow(), boundMemory)
	}
}

// heapReading is what the watchdog reads of the Go heap.
type heapReading struct {
	allocs uint64 // bytes ever allocated
	cycles uint64 // collections completed
	live   uint64 // bytes the last collection found live
}

var (
	heapMu      sync.Mutex
	heapSamples = []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
	}
)

func readHeap() heapReading {
	heapMu.Lock()
	defer heapMu.Unlock()
	metrics.Read(heapSamples)
	return heapReading{allocs: heapSamples[0].Value.Uint64(), cycles: heapSamples[1].Value.Uint64(), live: heapSamples[2].Value.Uint64()}
}

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}

// readAllocs is the allocation counter alone, cheaper than readHeap: what
// a slice's start needs.
func readAllocs() uint64 {
	heapMu.Lock()
	defer heapMu.Unlock()
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// heapLive is the heap the last collection found live.
func heapLive() uint64 { return readHeap().live }

// totalRuntimeMemory is every byte the Go runtime has mapped for itself.
func totalRuntimeMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
