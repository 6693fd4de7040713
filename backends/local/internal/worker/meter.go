package worker

import (
	"context"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// The meter's timing.
const (
	// meterTick is how often the meter accounts while a piece of work is in
	// flight, and a quarter of it while several are: then each step
	// splits the heap's growth among the pieces that ran, and the shorter
	// the step, the more often one piece alone ran in it. A step costs a
	// few microseconds (the heap's counters, the process's CPU clock, one
	// clock read per piece).
	meterTick = time.Millisecond
	// hogSlice is how much CPU a piece of work may take before it counts
	// as a hog: a program computing on, which must not delay the short
	// pieces of its siblings (a trivial run, a tool's answer). Short enough
	// that a sibling's answer waits a few milliseconds at most, long
	// enough that ordinary pieces (most take well under a millisecond)
	// never reach it. It is the piece's own CPU, not its wall time: a
	// piece slowed by many siblings is no hog.
	hogSlice = 5 * time.Millisecond
	// shortPlaces is how many pieces of work that are not hogs may execute
	// at once in a worker. Each is short (under hogSlice of CPU) or soon a
	// hog that gives its place up, so a piece waits for a place a few
	// milliseconds at most.
	shortPlaces = 2
	// minStep spaces the accounting steps a piece's start or end brings:
	// closer together, the pieces that start or end meanwhile are folded
	// into the next step instead (with a hundred runs in flight, a step at
	// every start and end would read every thread's clock thousands of
	// times a second).
	minStep = 50 * time.Microsecond
	// memoryStopGrace is how long a run cancelled for its memory has to
	// reach its next instruction before the parent's kill grace starts,
	// and copyRate how much longer it has for each byte of the allocation
	// the meter cancelled it at: that allocation is a copy into fresh
	// memory in Go code no interrupt reaches (a string doubling itself),
	// and a collection waits for it. A copy of 128 MB took 0.9-2.8 s on
	// this project's 2-CPU VM while other work shared its CPU; past the
	// grace the parent would replace the worker once its other runs
	// drained. The parent's RSS poll bounds what it takes meanwhile.
	memoryStopGrace = 2 * time.Second
	copyRate        = 32 << 20 // bytes a second
	// reserveWait bounds how long a built-in's reservation waits for a
	// confirmation: a run blocked there is still executing to the parent,
	// whose kill grace (500 ms by default) must not pass meanwhile. One
	// that does not come in time (a collection slowed by a loaded machine)
	// lets the allocation go while the run's estimate with it stays within
	// twice its limit: the estimate may be garbage, and an honest run must
	// not get the memory text for a slow collection. A run really past its
	// limit is then past it by at most the limit again, however many
	// allocations it makes, until the confirmation under way settles and
	// cancels it; past twice its limit it is cancelled at once.
	reserveWait = 250 * time.Millisecond
	// confirmEvery spaces the collections that confirm an estimate past a
	// limit: an estimate counts garbage, and a worker near its memory must
	// not collect on every step.
	confirmEvery = 5 * time.Millisecond
)

// meter measures what each run a worker hosts spends, while the runs
// execute side by side on the worker's threads. goja has one heap per
// process and no accounting of its own, so the meter attributes:
//
//   - CPU exactly: each piece of a run's work (compiling, a host answer,
//     due timers, an invocation) runs on a thread of its own for its
//     duration (runtime.LockOSThread), whose CPU clock the meter reads.
//     What the process spends on no piece's thread (the collector, the
//     pipe, native requests) goes to the pieces in flight in proportion.
//   - heap by step: every accounting step (each piece's start and end, and
//     every meterTick between) takes what the heap grew by since the last,
//     less what was charged by name (frames decoded for a run, a
//     built-in's reservation). The worker is pinned to one CPU (the parent
//     sets its affinity), so its threads take turns and most steps see one
//     piece run: that piece gets it all, and the meter learns the run's
//     rate of allocation per CPU time from it. A step in which several ran
//     splits the growth by what each one's rate and CPU there predict (by
//     CPU alone for a run with no rate yet). A collection then tells how
//     much is live, and the memLedger reconciles. A run past its limit is confirmed by a
//     collection of the meter's own before it alone is cancelled with the
//     memory text.
//
// A piece that runs past hogSlice is a hog: its thread's priority is
// lowered (through the parent, which alone may renice another thread) and
// stays so until the run ends, and the worker's GOMAXPROCS grows with the
// hogs (hogProcsFor), so that the short pieces of its siblings keep a
// processor and take the CPU
// ahead of it. Nothing waits for another run to let go: no run delays
// another by more than the kernel's turn.
//
// The shared run table tells the parent which runs are executing and until
// when, so that it can stop Go code past a deadline that goja's interrupt
// cannot reach, and what each run has used, for a run it must stop.
type meter struct {
	table *wire.Table
	// onHog asks the parent to lower a thread's priority; it must not
	// block.
	onHog func(run uint64, tid int)
	// workerLine is the live heap past which the run growing the most is
	// cancelled, so that honest runs that together outgrow the worker do
	// not take it down; 0: none. lineTaken says it took one, and takes no
	// other until a collection finds the runs back under it.
	workerLine int64
	lineTaken  bool

	mu     sync.Mutex
	ledger *heapLedger
	runs   map[uint64]*meteredRun
	// cancelled are the runs cancelled for their memory and not yet
	// removed: pastWorkerLine leaves them out at every step.
	cancelled map[uint64]struct{}
	pieces    map[*piece]struct{}
	// departed are pieces that ended since the last step, their last CPU
	// read at their end: the next step accounts them with the rest.
	departed  []*piece
	freeSlots []int
	last      reading
	// explicit is what was charged by name since the last step (small
	// objects, large ones), not yet seen in the heap's counts.
	explicit  [2]int64
	carry     time.Duration // CPU spent while no piece ran, for the next ones
	cycles    uint64
	confirmed int64 // when a collection last confirmed an estimate (MonoNow)
	// confirming: a confirmation is collecting, off the lock; collected
	// is how long the last one's collection took; starts counts those
	// begun, settledStart is the count of the last that ended, and
	// settled is signalled as each does.
	confirming   bool
	collected    time.Duration
	starts       uint64
	settledStart uint64
	settled      *sync.Cond
	timer        *time.Timer
	armed        bool
	// tuneGC: the worker's GC percentage follows its live heap
	// (gcPercentFor), set at gcPercent.
	tuneGC    bool
	gcPercent int
	// places admits the short pieces that may execute at once: each holds
	// a thread and costs every accounting step a clock read, and on one
	// CPU more of them at once would only take turns. A hog gives its
	// place up.
	places chan struct{}
	// hogRuns counts the runs with a hog thread; hogProcs are the
	// processors granted them (hogProcsFor); procs is the GOMAXPROCS that
	// wants, applied by setProcs off the lock.
	hogRuns   int
	hogProcs  int
	baseProcs int
	procs     chan int
	// huge backs the heap with huge pages while runs copy large objects;
	// hugeTimer takes the advice back hugeHold after the last such copy.
	huge      hugePages
	hugeTimer *time.Timer
}

// reading is the process at one accounting step.
type reading struct {
	heap heapReading
	cpu  time.Duration // the process's CPU time
	at   int64         // MonoNow
}

// meteredRun is what the meter knows of one run.
type meteredRun struct {
	id        uint64
	limitMB   int
	bound     time.Duration // the run's timeout, for the table's clock
	cancel    context.CancelCauseFunc
	interrupt func()        // stops its runtime at once; nil: none running
	overLimit bool          // cancelled with the memory text
	cpu       time.Duration // CPU charged to it
	hogTid    int           // the thread its hog goroutine is locked to; 0: none
	slot      int           // its slot in the run table; -1: none
	clock     time.Duration // what its run clock spent, as last seen
	waited    time.Duration // its pieces' time waiting for the CPU behind siblings
	// rate is what the run allocates per nanosecond of CPU, in small
	// objects and in large ones, learned from the steps in which it alone
	// ran; negative until one did.
	rate [2]float64
}

// piece is one piece of work in flight.
type piece struct {
	run    *meteredRun // nil: the worker's own (a runtime prepared ahead)
	tid    int
	clk    threadClock
	cpuAt  time.Duration // the thread's CPU at the last step
	delta  time.Duration // the thread's CPU in the current step
	spent  time.Duration // the thread's CPU since the piece started
	cpuEnd time.Duration // the thread's CPU when the piece ended
	end    int64         // MonoNow when it ended; 0 while in flight
	start  int64         // MonoNow at entry
	hog    bool
	// building: the piece builds its run's runtime (enterBuild), which is
	// the run's cost but never makes it a hog.
	building bool
	locked   bool // enter locked the goroutine to its thread
	placed   bool // it holds one of the worker's places
	clock    sandbox.Clock
	// deadline is when the piece overruns its bound (MonoNow; 0: none),
	// bound which bound that is.
	deadline int64
	bound    wire.Bound
	// cpu and alloc are what a piece of the worker's own spent.
	cpu   time.Duration
	alloc int64
}

func newMeter(table *wire.Table, base int64, baseProcs int) *meter {
	m := &meter{
		table:     table,
		onHog:     func(uint64, int) {},
		ledger:    newHeapLedger(base),
		runs:      map[uint64]*meteredRun{},
		cancelled: map[uint64]struct{}{},
		pieces:    map[*piece]struct{}{},
		baseProcs: baseProcs,
		procs:     make(chan int, 1),
		places:    make(chan struct{}, shortPlaces),
	}
	m.settled = sync.NewCond(&m.mu)
	for i := table.Slots() - 1; i >= 0; i-- {
		m.freeSlots = append(m.freeSlots, i)
	}
	m.last = reading{heap: readHeap(), cpu: processCPU(), at: wire.MonoNow()}
	m.cycles = m.last.heap.cycles
	m.huge = hugePages{enabled: hugePagesAdvisable(), large: m.last.heap.large}
	go m.setProcs()
	return m
}

// add opens run's account with its memory limit, its bound and what
// cancels it.
func (m *meter) add(run uint64, limitMB int, bound time.Duration, cancel context.CancelCauseFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := &meteredRun{id: run, limitMB: limitMB, bound: bound, cancel: cancel, slot: -1, rate: [2]float64{-1, -1}}
	if n := len(m.freeSlots); n > 0 {
		r.slot, m.freeSlots = m.freeSlots[n-1], m.freeSlots[:n-1]
	}
	m.runs[run] = r
	m.ledger.add(run, int64(limitMB)<<20)
	m.writeSlotLocked(r, nil)
}

// remove closes run's account once it has ended, and returns what the run
// was estimated to hold.
func (m *meter) remove(run uint64) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stepLocked(wire.MonoNow())
	r := m.runs[run]
	held := m.ledger.estimate(run)
	if r == nil {
		return held
	}
	if r.overLimit {
		held = max(held, int64(r.limitMB)<<20)
	}
	if r.hogTid != 0 {
		m.hogRuns--
		m.wantProcsLocked()
	}
	if r.slot >= 0 {
		m.table.Write(r.slot, wire.Slot{})
		m.freeSlots = append(m.freeSlots, r.slot)
		// A piece still in flight must not write the slot: another run
		// may have it next.
		r.slot = -1
	}
	delete(m.runs, run)
	delete(m.cancelled, run)
	m.ledger.end(run)
	return held
}

// adopt charges run with a runtime the worker built for it ahead of time:
// the heap and the CPU building it took.
func (m *meter) adopt(run uint64, cost int64, cpu time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ledger.adopt(run, cost)
	if r := m.runs[run]; r != nil {
		r.cpu += cpu
	}
}

// usage is what run has used so far: its CPU, the largest heap it was
// charged, and the time its pieces waited for the CPU behind its
// siblings.
func (m *meter) usage(run uint64) (cpu time.Duration, peakHeap int64, waited time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stepLocked(wire.MonoNow())
	if r := m.runs[run]; r != nil {
		cpu, waited = r.cpu, r.waited
	}
	return cpu, m.ledger.peakOf(run), waited
}

// overLimit reports whether the meter ended run for its memory.
func (m *meter) overLimit(run uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.runs[run]
	return r != nil && r.overLimit
}

// charge counts n bytes allocated for run outside its pieces (a frame
// decoded for it): they are its, whoever runs meanwhile.
func (m *meter) charge(run uint64, n int64) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.chargeByNameLocked(run, n)
}

// chargeByNameLocked counts n bytes allocated in one object for run,
// whoever runs meanwhile. m.mu is held.
func (m *meter) chargeByNameLocked(run uint64, n int64) {
	if n > largeObject {
		m.explicit[1] += n
	} else {
		m.explicit[0] += n
	}
	m.ledger.chargeOne(run, n)
}

// reserve is asked before run allocates n bytes in one step (a built-in's
// result): past its limit with them, once a collection begun since the ask
// has confirmed what it holds, the run is cancelled with the memory text and
// reserve reports false. Nothing is charged here: the allocation, when it
// comes, is. While it waits for the confirmation the run allocates nothing
// more, so the collection sees it as it is; one that does not come within
// reserveWait lets the allocation go while the run's estimate with it stays
// within twice its limit.
func (m *meter) reserve(run uint64, n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	asked, giveUp := m.starts, wire.MonoNow()+int64(reserveWait)
	for {
		r := m.runs[run]
		if r == nil {
			return true
		}
		if r.overLimit {
			return false
		}
		limit, after := int64(r.limitMB)<<20, m.ledger.estimate(run)+n
		if after <= limit {
			return true
		}
		// The estimate counts garbage until a collection says otherwise.
		now := wire.MonoNow()
		if n > limit || m.settledStart > asked {
			m.cancelLocked(r)
			return false
		}
		if now >= giveUp {
			// Without one in time, up to twice the limit: garbage the
			// estimate still counts, or an overshoot of at most the
			// limit until the confirmation under way settles.
			if after <= 2*limit {
				return true
			}
			m.cancelLocked(r)
			return false
		}
		// A confirmation beside a hog runs on a goroutine of its own, and
		// a cancel wakes the run waiting for it at once: a run held past
		// its memory deadline, even in a collection, costs its worker.
		wait := time.Duration(giveUp - now)
		if !m.confirming {
			spacing := time.Duration(m.confirmed + int64(m.confirmSpacingLocked()) - now)
			if spacing <= 0 {
				if m.confirmLocked(); !m.confirming {
					continue // it settled here
				}
			} else {
				wait = min(wait, spacing)
			}
		}
		t := time.AfterFunc(wait, m.wake)
		m.settled.Wait()
		t.Stop()
	}
}

// wake wakes the reservations waiting for a confirmation.
func (m *meter) wake() {
	m.mu.Lock()
	m.settled.Broadcast()
	m.mu.Unlock()
}

// enter starts a piece of work of run (0: the worker's own) under clock
// (nil: no bound), on the calling goroutine, which it locks to its thread
// for the piece. It returns nil, starting nothing, when ctx ended first.
// The same goroutine must call leave.
func (m *meter) enter(ctx context.Context, run uint64, clock sandbox.Clock) *piece {
	return m.start(ctx, run, clock, false)
}

// start is enter, for a piece that builds its run's runtime when building
// is set (enterBuild).
func (m *meter) start(ctx context.Context, run uint64, clock sandbox.Clock, building bool) *piece {
	if ctx.Err() != nil {
		return nil
	}
	// A hog's goroutine stays locked to its thread (whose priority cannot
	// be raised again) until it ends, so a thread it was given is still
	// its own; any other goroutine is locked to its thread for the piece.
	m.mu.Lock()
	r := m.runs[run]
	hogTid := 0
	if r != nil {
		hogTid = r.hogTid
	}
	m.mu.Unlock()
	// Only a hog's goroutine asks which thread it is on before it locks
	// one: a system call per piece saved for every other.
	tid := 0
	if hogTid != 0 {
		tid = currentThread()
	}
	onHogThread := hogTid != 0 && hogTid == tid
	p := &piece{run: r, clock: clock, hog: onHogThread, building: building}
	if !onHogThread {
		// A short piece takes one of the worker's few places first; a hog
		// gave its place up and needs none.
		select {
		case m.places <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		p.placed = true
		runtime.LockOSThread()
		p.locked = true
		tid = currentThread()
	}
	p.tid = tid
	p.clk = clockOfThread(tid)
	p.cpuAt = p.clk.read()
	now := wire.MonoNow()
	m.mu.Lock()
	if now-m.last.at >= int64(minStep) {
		m.stepLocked(now)
	}
	p.start = now
	if clock != nil {
		if left := clock.Left(); left > 0 {
			p.deadline = now + int64(left)
		} else {
			p.deadline = now
		}
	}
	if r != nil && r.overLimit {
		// Already cancelled for its memory: it must stop now.
		p.deadline, p.bound = now, wire.BoundMemory
	}
	m.pieces[p] = struct{}{}
	if r != nil {
		m.writeSlotLocked(r, p)
	}
	m.armLocked()
	m.mu.Unlock()
	return p
}

// enterBuild is enter for a piece that builds run's runtime because the
// worker had none ready: billed to the run, but never a hog. A runtime
// built during a collection assists it and can take more than hogSlice of
// CPU, and a run marked a hog for that (a sibling parked on a tool, say)
// would answer its tool's calls on a thread of lowered priority for the
// rest of its life.
func (m *meter) enterBuild(ctx context.Context, run uint64) *piece {
	return m.start(ctx, run, nil, true)
}

// leave ends piece p, on the goroutine that entered it. What p spent since
// the last step is accounted at the next.
func (m *meter) leave(p *piece) {
	m.leaveOwn(p)
}

// leaveOwn is leave, and for a piece of the worker's own (run 0), whose
// cost its caller keeps, accounts it at once and returns what it spent.
func (m *meter) leaveOwn(p *piece) (cpu time.Duration, alloc int64) {
	end := p.clk.read()
	now := wire.MonoNow()
	m.mu.Lock()
	delete(m.pieces, p)
	p.cpuEnd, p.end = end, now
	m.departed = append(m.departed, p)
	if p.run != nil {
		m.writeSlotLocked(p.run, nil)
	}
	if p.run == nil || now-m.last.at >= int64(minStep) {
		m.stepLocked(now)
	}
	cpu, alloc = p.cpu, p.alloc
	m.unplace(p)
	hog := p.hog
	m.mu.Unlock()
	if p.locked && !hog {
		runtime.UnlockOSThread()
	}
	return cpu, alloc
}

// unplace gives p's place back, once. m.mu is held.
func (m *meter) unplace(p *piece) {
	if p.placed {
		p.placed = false
		<-m.places
	}
}

// armLocked starts the tick while a piece is in flight. m.mu is held.
func (m *meter) armLocked() {
	if m.armed {
		return
	}
	m.armed = true
	if m.timer == nil {
		m.timer = time.AfterFunc(m.periodLocked(), m.tick)
	} else {
		m.timer.Reset(m.periodLocked())
	}
}

// periodLocked is the time to the next step: shorter while a few pieces
// take turns (the shorter the step, the more often one piece ran alone in
// it), back to meterTick when many hogs make every step costly. m.mu is
// held.
func (m *meter) periodLocked() time.Duration {
	if n := len(m.pieces); n > 1 && n <= 4 {
		return meterTick / 4
	}
	return meterTick
}

// tick accounts every meterTick for as long as a piece is in flight.
func (m *meter) tick() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pieces) == 0 {
		m.armed = false
		return
	}
	m.stepLocked(wire.MonoNow())
	m.timer.Reset(m.periodLocked())
}

// stepLocked accounts what happened since the last step, then acts on it:
// the pieces that became hogs, a collection that completed, and the runs
// past a limit. m.mu is held.
func (m *meter) stepLocked(now int64) {
	h, largest, biggest := m.accountLocked(now)
	if m.huge.step(now, h) && m.hugeTimer == nil {
		m.hugeTimer = time.AfterFunc(hugeHold, m.hugeExpire)
	}
	for p := range m.pieces {
		if !p.hog && !p.building && p.run != nil && p.spent > hogSlice {
			m.hogLocked(p)
		}
	}
	if h.cycles != m.cycles {
		m.cycles = h.cycles
		small, large := h.liveSplit()
		m.ledger.correct(int64(small), int64(large))
		m.retuneGC(h.live)
	}
	m.cancelHugeLocked(largest, biggest)
	if (len(m.overAndLive()) > 0 || m.pastWorkerLine()) && now-m.confirmed >= int64(m.confirmSpacingLocked()) && !m.confirming {
		m.confirmLocked()
	}
	for p := range m.pieces {
		if p.run != nil {
			m.writeSlotLocked(p.run, p)
		}
	}
	for _, p := range m.departed {
		if p.run != nil && !m.inFlightLocked(p.run) {
			m.writeSlotLocked(p.run, nil)
		}
	}
	m.departed = m.departed[:0]
}

// cancelHugeLocked cancels the run a step charged one allocation of its
// whole limit or more (all of it but what was charged to it by name
// meanwhile): with its runtime beside it the run is past its limit as the
// allocation is made, whatever a collection would find later. A step
// inside a confirmation counts too: a program that doubles a string
// allocates the next copy while the collection runs, which discounts what
// was allocated meanwhile. The earlier the better: each copy goes into
// fresh memory, and a collection starting meanwhile stops every run of the
// worker until the copy ends (0.2 s for 128 MB, seconds for 1 GB on a VM
// whose page faults are dear). m.mu is held.
func (m *meter) cancelHugeLocked(largest uint64, biggest stepCharge) {
	if r := biggest.run; r != nil && !r.overLimit && largest >= uint64(r.limitMB)<<20 && biggest.charged >= int64(largest)/16*15 {
		m.cancelCopyingLocked(r, biggest.charged)
	}
}

// hugeExpire takes the huge-page advice back once hugeHold passed since
// the last large copy, whether or not pieces are in flight to step.
func (m *meter) hugeExpire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if left := m.huge.hold(wire.MonoNow()); left > 0 {
		m.hugeTimer.Reset(left)
		return
	}
	m.huge.off()
	m.hugeTimer = nil
}

// inFlightLocked reports whether a piece of r is in flight. m.mu is held.
func (m *meter) inFlightLocked(r *meteredRun) bool {
	for p := range m.pieces {
		if p.run == r {
			return true
		}
	}
	return false
}

// stepped is every piece the current step accounts: those in flight, and
// those that ended since the last step. m.mu is held.
func (m *meter) stepped() []*piece {
	out := make([]*piece, 0, len(m.pieces)+len(m.departed))
	for p := range m.pieces {
		out = append(out, p)
	}
	return append(out, m.departed...)
}

// accountLocked charges what happened since the last step: the CPU of each
// piece in flight, the heap the process allocated, and the time its CPU
// served other processes. It returns the heap now, a lower bound on the
// largest allocation since, and the piece charged the most heap in the
// step (with its charge). m.mu is held.
func (m *meter) accountLocked(now int64) (h heapReading, largest uint64, biggest stepCharge) {
	h = readHeap()
	pcpu := processCPU()
	var sum time.Duration
	all := m.stepped()
	for _, p := range all {
		c := p.cpuEnd
		if p.end == 0 {
			c = p.clk.read()
		}
		p.delta = max(0, c-p.cpuAt)
		p.cpuAt = c
		p.spent += p.delta
		sum += p.delta
	}
	spent := pcpu - m.last.cpu
	m.attributeHeapLocked(all, 0, int64(h.small()-m.last.heap.small()), sum)
	biggest = m.attributeHeapLocked(all, 1, int64(h.large-m.last.heap.large), sum)
	m.attributeCPULocked(all, spent, sum)
	// Time the process's CPU served others while pieces were in flight
	// (another tenant's worker on the same CPU, the gateway) is no run's:
	// it is given back to their clocks, in the part of the step each was
	// in flight, and their deadlines move with it.
	if interval := now - m.last.at; interval > 0 {
		foreign := max(0, time.Duration(interval)-spent)
		for _, p := range all {
			from, to := max(p.start, m.last.at), now
			if p.end != 0 {
				to = p.end
			}
			inFlight := time.Duration(max(0, to-from))
			share := time.Duration(float64(foreign) * float64(inFlight) / float64(interval))
			if p.run != nil {
				// What the piece neither ran nor lost to other processes,
				// it waited for its turn behind its siblings.
				p.run.waited += max(0, inFlight-p.delta-share)
			}
			if share > 0 && p.clock != nil && p.bound == wire.BoundTime {
				p.clock.Credit(share)
				p.deadline += int64(share)
			}
		}
	}
	largest = m.last.heap.largestSince(h)
	m.last = reading{heap: h, cpu: pcpu, at: now}
	return h, largest, biggest
}

// stepCharge is the heap one step charged to one piece's run.
type stepCharge struct {
	run     *meteredRun
	charged int64
}

// attributeHeapLocked charges the n bytes the heap grew by since the last
// step in objects of one kind (0: small, 1: large), less what was charged
// by name, to the pieces that ran: all of it to one that ran alone (whose
// run's rate it teaches), else split by what each one's rate and CPU
// predict; with none, the worker allocated them itself. It returns the run
// charged the most. m.mu is held.
func (m *meter) attributeHeapLocked(all []*piece, kind int, n int64, sum time.Duration) (biggest stepCharge) {
	n -= m.explicit[kind]
	if n < 0 {
		// Charged by name but not yet seen allocated: the next steps'.
		m.explicit[kind] = -n
		n = 0
	} else {
		m.explicit[kind] = 0
	}
	if sum == 0 {
		// No thread clock moved, yet the heap grew. A huge allocation can
		// show in the heap's counts a step before its thread's CPU does
		// (the allocation is counted, then the copy into it runs long):
		// with one run's piece in flight, the growth is that run's. Else
		// the worker allocated it itself.
		if p := soleRunPiece(all); p != nil {
			m.chargePieceLocked(p, kind, n)
			return stepCharge{run: p.run, charged: n}
		}
		m.chargeKindLocked(0, kind, n)
		return biggest
	}
	var ran []*piece
	for _, p := range all {
		if p.delta > 0 {
			ran = append(ran, p)
		}
	}
	if len(ran) == 1 {
		p := ran[0]
		if r := p.run; r != nil {
			observed := float64(n) / float64(p.delta)
			if r.rate[kind] < 0 {
				r.rate[kind] = observed
			} else {
				r.rate[kind] += rateWeight * (observed - r.rate[kind])
			}
		}
		m.chargePieceLocked(p, kind, n)
		return stepCharge{run: p.run, charged: n}
	}
	// Predicted bytes: a run's learned rate times its CPU here; a run with
	// none yet predicts the step's mean rate.
	mean := float64(n) / float64(sum)
	predicted := make([]float64, len(ran))
	var total float64
	for i, p := range ran {
		rate := mean
		if p.run != nil && p.run.rate[kind] >= 0 {
			rate = p.run.rate[kind]
		}
		predicted[i] = rate * float64(p.delta)
		total += predicted[i]
	}
	for i, p := range ran {
		share := float64(p.delta) / float64(sum)
		if total > 0 {
			share = predicted[i] / total
		}
		c := int64(float64(n) * share)
		m.chargePieceLocked(p, kind, c)
		if c > biggest.charged {
			biggest = stepCharge{run: p.run, charged: c}
		}
	}
	return biggest
}

// rateWeight is how much one step in which a run ran alone moves its
// learned rate of allocation.
const rateWeight = 0.3

// soleRunPiece is the one piece of a run still in flight among all, or
// nil when there is none or more than one.
func soleRunPiece(all []*piece) *piece {
	var only *piece
	for _, p := range all {
		if p.end != 0 || p.run == nil {
			continue
		}
		if only != nil {
			return nil
		}
		only = p
	}
	return only
}

// chargePieceLocked charges n bytes of one kind to p's run, or to the
// worker's own for a piece of its own. m.mu is held.
func (m *meter) chargePieceLocked(p *piece, kind int, n int64) {
	if n <= 0 {
		return
	}
	if p.run == nil {
		p.alloc += n
		m.chargeKindLocked(0, kind, n)
		return
	}
	m.chargeKindLocked(p.run.id, kind, n)
}

// chargeKindLocked charges n bytes of one kind to run. m.mu is held.
func (m *meter) chargeKindLocked(run uint64, kind int, n int64) {
	if kind == 0 {
		m.ledger.charge(run, n, 0)
	} else {
		m.ledger.charge(run, 0, n)
	}
}

// attributeCPULocked charges each piece its thread's CPU, and the rest of
// what the process spent (the collector, the pipe, encoding a result) to
// the pieces that ran, in proportion. What the process spends while no
// piece runs (a collection of the garbage runs left, answering a run that
// just ended) is carried to the next pieces that run, up to maxCarry: it
// is work for the tenant's runs all the same. m.mu is held.
func (m *meter) attributeCPULocked(all []*piece, spent, sum time.Duration) {
	rest := max(0, spent-sum)
	if sum == 0 {
		m.carry = min(m.carry+rest, maxCarry)
		return
	}
	rest += m.carry
	m.carry = 0
	for _, p := range all {
		cpu := p.delta + time.Duration(float64(rest)*float64(p.delta)/float64(sum))
		if p.run == nil {
			p.cpu += cpu
			continue
		}
		p.run.cpu += cpu
	}
}

// maxCarry bounds the CPU spent while no piece ran that the next pieces
// are charged: an idle worker's own housekeeping is no run's.
const maxCarry = 50 * time.Millisecond

// hogLocked makes p a hog: its thread is the run's for the rest of the run,
// the parent lowers its priority, the hogs' grant of processors may grow, and
// the piece gives its place up to a short one (while the worker has fewer
// than maxHogProcs hogs: past them, hogs keep their places and later
// pieces wait their turn). m.mu is held.
func (m *meter) hogLocked(p *piece) {
	p.hog = true
	if m.hogRuns < maxHogProcs {
		m.unplace(p)
	}
	if p.run.hogTid == 0 {
		m.hogRuns++
		m.wantProcsLocked()
	}
	p.run.hogTid = p.tid
	m.onHog(p.run.id, p.tid)
}

// maxHogProcs caps the processors hogs add: past it, hogs share the Go
// scheduler's processors among themselves (a worker of a thousand spinning
// runs must not make a thousand threads runnable).
const maxHogProcs = 64

// hogProcsFor is how many processors hogs are granted when they number
// hogs and have granted: a change of GOMAXPROCS stops the world, and every
// hog thread in flight must reach a safe point for it, so a burst of K new
// hogs, found one by one, must not stop the worker K times (with 32 of
// them on one CPU the first trivial run beside them waited 2.8–3.6 s).
// Grants double as hogs come and halve once a quarter remain: a burst
// costs log2(K) stops, and hogs ending one by one cost as few.
func hogProcsFor(hogs, granted int) int {
	hogs = min(hogs, maxHogProcs)
	switch {
	case hogs == 0:
		return 0
	case hogs > granted:
		n := 1
		for n < hogs {
			n *= 2
		}
		return min(n, maxHogProcs)
	case hogs <= granted/4:
		return granted / 2
	}
	return granted
}

// wantProcsLocked asks setProcs for the GOMAXPROCS the hogs call for, when
// that changed. m.mu is held.
func (m *meter) wantProcsLocked() {
	granted := hogProcsFor(m.hogRuns, m.hogProcs)
	if granted == m.hogProcs {
		return
	}
	m.hogProcs = granted
	n := m.baseProcs + granted
	select {
	case <-m.procs:
	default:
	}
	m.procs <- n
}

// setProcs applies GOMAXPROCS changes off the meter's lock: a change stops
// the world for a moment.
func (m *meter) setProcs() {
	for n := range m.procs {
		if runtime.GOMAXPROCS(0) != n {
			runtime.GOMAXPROCS(n)
		}
	}
}

// confirmSpacingLocked is the least time between two confirmations: the
// last collection's length, at least confirmEvery. m.mu is held.
func (m *meter) confirmSpacingLocked() time.Duration {
	return max(confirmEvery, m.collected)
}

// confirmLocked collects, so that the estimates past a limit are checked
// against what is live, then cancels the runs still past theirs, and the
// run that grew the most lately if the worker is past its line. One runs
// at a time, and they take at most about half the worker's time
// (confirmSpacingLocked).
//
// It collects at once, with m.mu held, so that no piece starts meanwhile
// and the collection sees the heap as it is (runs that each keep a
// mebibyte every few milliseconds passed the worker's line unseen when
// pieces went on during it). But while a run past its limit has a hog in
// flight it collects on a goroutine of its own, with m.mu free: the
// collection waits for every thread to reach a safe point, and a run
// copying hundreds of MB in one call (a string doubling itself) held one
// for 0.5–9 s; meanwhile the steps go on, so that the run's next
// allocation of its whole limit still ends it, and its siblings' pieces
// start and end. m.mu is held.
func (m *meter) confirmLocked() {
	m.confirming = true
	m.starts++
	if !m.overHogInFlightLocked() {
		before := m.last.heap
		m.settleCollectedLocked(before, collect())
		return
	}
	go func() {
		m.mu.Lock()
		before := m.last.heap
		m.mu.Unlock()
		took := collect()
		m.mu.Lock()
		defer m.mu.Unlock()
		m.settleCollectedLocked(before, took)
	}()
}

// collect runs a whole collection and reports how long it took.
func collect() time.Duration {
	start := time.Now()
	runtime.GC()
	return time.Since(start)
}

// overHogInFlightLocked reports whether a piece in flight is a hog of a
// run estimated past its limit. m.mu is held.
func (m *meter) overHogInFlightLocked() bool {
	for p := range m.pieces {
		if r := p.run; r != nil && (p.hog || p.spent > hogSlice) && m.ledger.estimate(r.id) > int64(r.limitMB)<<20 {
			return true
		}
	}
	return false
}

// settleCollectedLocked ends a confirmation whose collection began at
// heap reading before and took took. m.mu is held.
func (m *meter) settleCollectedLocked(before heapReading, took time.Duration) {
	m.confirming, m.collected = false, took
	m.settleLocked(before)
	m.settledStart = m.starts
	m.settled.Broadcast()
}

// settleLocked acts on a collection that began at heap reading before.
// m.mu is held.
func (m *meter) settleLocked(before heapReading) {
	h, largest, biggest := m.accountLocked(wire.MonoNow())
	m.cancelHugeLocked(largest, biggest)
	m.confirmed = m.last.at
	m.cycles = h.cycles
	// What the programs allocated while the collection marked is counted
	// live by it (allocated black) though much of it is garbage already:
	// discounting it keeps churn from reading as growth. Real growth is
	// seen at the next confirmation, one collection later.
	small, large := h.liveSplit()
	small -= min(small, h.small()-before.small())
	large -= min(large, h.large-before.large)
	m.ledger.correct(int64(small), int64(large))
	m.retuneGC(h.live)
	for _, id := range m.overAndLive() {
		m.cancelLocked(m.runs[id])
	}
	grower := m.ledger.grower()
	switch {
	case !m.pastWorkerLine():
		m.lineTaken = false
	case !m.lineTaken:
		if r := m.runs[grower]; r != nil && !r.overLimit {
			m.cancelLocked(r)
			m.lineTaken = true
		}
	}
}

// pastWorkerLine reports whether the runs still running are estimated
// past the worker's line together: not counting what runs that ended left
// (freed at the next collection) nor runs already cancelled for their
// memory (on their way out). m.mu is held.
func (m *meter) pastWorkerLine() bool {
	if m.workerLine <= 0 {
		return false
	}
	t := m.ledger.total() - m.ledger.dying()
	for id := range m.cancelled {
		t -= m.ledger.estimate(id)
	}
	return t > m.workerLine
}

// overAndLive lists the runs estimated past their limit that the meter has
// not cancelled yet. m.mu is held.
func (m *meter) overAndLive() []uint64 {
	var out []uint64
	for _, id := range m.ledger.over() {
		if r := m.runs[id]; r != nil && !r.overLimit {
			out = append(out, id)
		}
	}
	return out
}

// retuneGC moves the GC percentage to what the live heap calls for, when
// it is off by more than a quarter. m.mu is held.
func (m *meter) retuneGC(live uint64) {
	if !m.tuneGC {
		return
	}
	p := gcPercentFor(live)
	if p*4 < m.gcPercent*3 || p*4 > m.gcPercent*5 {
		m.gcPercent = p
		debug.SetGCPercent(p)
	}
}

// setInterrupt keeps what stops run's runtime at its next instruction
// (nil: nothing any more).
func (m *meter) setInterrupt(run uint64, f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.runs[run]; r != nil {
		r.interrupt = f
	}
}

// cancelLocked ends run r with the memory text. m.mu is held.
func (m *meter) cancelLocked(r *meteredRun) { m.cancelCopyingLocked(r, 0) }

// cancelCopyingLocked ends run r with the memory text when it may still be
// copying into an allocation of copying bytes, which it is given the time
// to finish. m.mu is held.
func (m *meter) cancelCopyingLocked(r *meteredRun, copying int64) {
	m.settled.Broadcast() // a reservation of r waiting for a confirmation
	r.overLimit = true
	m.cancelled[r.id] = struct{}{}
	r.cancel(protocol.NewMemoryLimitError(r.limitMB))
	if r.interrupt != nil {
		// Now, not from the context's goroutine: see sandbox.InterruptHost.
		r.interrupt()
	}
	stop := wire.MonoNow() + int64(memoryStopGrace) + int64(time.Duration(copying)*time.Second/copyRate)
	for p := range m.pieces {
		if p.run == r {
			// Past this deadline and the kill grace the parent stops the
			// process if Go code the interrupt cannot reach keeps it here.
			p.deadline, p.bound = stop, wire.BoundMemory
			m.writeSlotLocked(r, p)
		}
	}
}

// writeSlotLocked tells the parent what run r is doing (p: the piece in
// flight, nil: none) and has used. m.mu is held.
func (m *meter) writeSlotLocked(r *meteredRun, p *piece) {
	if r.slot < 0 {
		return
	}
	s := wire.Slot{Run: r.id, CPU: r.cpu, Heap: m.ledger.estimate(r.id), Peak: m.ledger.peakOf(r.id)}
	if p != nil {
		s.Active, s.Deadline, s.Bound = true, p.deadline, p.bound
		if p.clock != nil && r.bound > 0 {
			r.clock = max(r.clock, r.bound-p.clock.Left())
		}
	}
	s.Clock = r.clock
	m.table.Write(r.slot, s)
}
