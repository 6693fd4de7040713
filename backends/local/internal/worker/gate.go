package worker

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// heapPoll is how often the memory watchdog looks at the heap while a run
// holds the gate. A read costs about a microsecond, so 1 ms is cheap and
// catches gradual growth early.
const heapPoll = time.Millisecond

// cpuGate lets one run of a worker execute JavaScript at a time (it
// implements sandbox.Gate through each run's host), so that what the
// process spends while a run holds it is that run's: the heap it allocates
// is charged to it in a memLedger, and the shared wire.Page tells the parent
// which run to blame when the process must die. It is also the per-run
// memory watchdog: while a run holds the gate it checks every heapPoll that
// the run's estimate stays inside its limit, confirms an estimate past it
// with a collection (garbage alone never trips it), and then cancels that
// run alone with the memory text; its siblings keep running.
//
// Waiting runs enter in the order they came (a channel's waiters queue).
type cpuGate struct {
	sem  chan struct{} // one token: the right to execute JavaScript
	page *wire.Page

	mu      sync.Mutex
	ledger  *memLedger
	runs    map[uint64]*gatedRun
	holding bool
	holder  uint64        // 0: the worker's own work
	start   uint64        // allocated bytes when the slice began
	mark    heapReading   // the heap when the slice was last accounted
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

func newCPUGate(page *wire.Page, base int64) *cpuGate {
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
	now := wire.MonoNow()
	var deadline int64
	bound := wire.BoundTime
	if left > 0 {
		deadline = now + int64(left)
	}
	g.mu.Lock()
	g.holding, g.holder = true, run
	g.mark = readHeap()
	g.start = g.mark.allocs
	g.cpuAt = processCPU()
	if r := g.runs[run]; r != nil && r.overLimit {
		// Already cancelled for its memory: it must stop now.
		deadline, bound = now, wire.BoundMemory
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
	g.page.Set(run, deadline, bound)
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
	g.page.Set(0, 0, wire.BoundTime)
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

// account charges what the holder allocated since the last look and
// applies a collection that happened meanwhile. When a run's estimate is
// then past its limit, it confirms with a collection of its own before
// cancelling: an estimate counts garbage, and programs that churn large
// buffers allocate more than their whole limit between two looks. It
// returns the allocation counter. g.mu is held.
func (g *cpuGate) account() uint64 {
	h := readHeap()
	largest := g.mark.largestSince(h)
	g.absorb(h, 0)
	if r := g.runs[g.holder]; g.holder != 0 && r != nil && !r.overLimit && largest > uint64(r.limitMB)<<20 {
		// One allocation larger than the whole limit is past it as it
		// is made, whatever a collection would find later.
		g.cancelLocked(g.holder, r)
		return h.allocs
	}
	if len(g.overAndLive()) == 0 {
		return h.allocs
	}
	before := h.allocs
	runtime.GC()
	h = readHeap()
	// What the program allocated while the collection marked is counted
	// live by it (allocated black) though much of it is garbage already:
	// discounting it keeps churn from reading as growth. Real growth is
	// seen at the next confirmation, one collection later.
	g.absorb(h, h.allocs-before)
	g.cancelOver()
	return h.allocs
}

// absorb charges the holder with what was allocated since the last
// reading, and when a collection completed meanwhile reconciles the ledger
// with the live heap it found, less blackened bytes it may count though
// they are garbage, and retunes the GC. g.mu is held.
func (g *cpuGate) absorb(h heapReading, blackened uint64) {
	g.ledger.charge(g.holder, int64(h.allocs-g.mark.allocs))
	g.mark = h
	if h.cycles != g.cycles {
		g.cycles = h.cycles
		g.ledger.correct(int64(h.live - min(blackened, h.live)))
		g.retuneGC(h.live)
	}
}

// overAndLive lists the runs estimated past their limit that the watchdog
// has not cancelled yet. g.mu is held.
func (g *cpuGate) overAndLive() []uint64 {
	var out []uint64
	for _, id := range g.ledger.over() {
		if r := g.runs[id]; r != nil && !r.overLimit {
			out = append(out, id)
		}
	}
	return out
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
	for _, id := range g.overAndLive() {
		g.cancelLocked(id, g.runs[id])
	}
}

// cancelLocked ends run id with the memory text. g.mu is held.
func (g *cpuGate) cancelLocked(id uint64, r *gatedRun) {
	r.overLimit = true
	r.cancel(protocol.NewMemoryLimitError(r.limitMB))
	if g.holding && g.holder == id {
		// Its deadline is now: past the grace the parent stops the
		// process if Go code the interrupt cannot reach keeps it here.
		g.page.Set(id, wire.MonoNow(), wire.BoundMemory)
	}
}

// heapReading is what the watchdog reads of the Go heap.
type heapReading struct {
	allocs       uint64 // bytes ever allocated
	cycles       uint64 // collections completed
	live         uint64 // bytes the last collection found live
	large        uint64 // bytes ever allocated in objects past the size classes
	largeObjects uint64 // how many such objects
}

// largestSince is a lower bound on the largest single allocation made
// between h0 and h: the mean size of the large objects allocated, which
// the largest of them reaches at least.
func (h0 heapReading) largestSince(h heapReading) uint64 {
	n := h.largeObjects - h0.largeObjects
	if n == 0 {
		return 0
	}
	return (h.large - h0.large) / n
}

var (
	heapMu      sync.Mutex
	heapSamples = []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs-by-size:bytes"},
	}
)

// readHeap reads the heap. The runtime counts large objects in the last
// bucket of the allocations-by-size histogram and the others in one
// bucket per size class, whose exact size is the bucket's upper bound
// less one; the bytes in large objects are what the others leave of the
// total.
func readHeap() heapReading {
	heapMu.Lock()
	defer heapMu.Unlock()
	metrics.Read(heapSamples)
	h := heapReading{allocs: heapSamples[0].Value.Uint64(), cycles: heapSamples[1].Value.Uint64(), live: heapSamples[2].Value.Uint64()}
	bySize := heapSamples[3].Value.Float64Histogram()
	last := len(bySize.Counts) - 1
	var small uint64
	for i, n := range bySize.Counts[:last] {
		small += n * (uint64(bySize.Buckets[i+1]) - 1)
	}
	h.large, h.largeObjects = h.allocs-small, bySize.Counts[last]
	return h
}

// heapLive is the heap the last collection found live.
func heapLive() uint64 { return readHeap().live }

// totalRuntimeMemory is every byte the Go runtime has mapped for itself.
func totalRuntimeMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
