package local

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/queue"
	"github.com/supolka/codemode-gateway/protocol"
)

// The pool places executions on worker processes. A worker belongs to one
// tenant from the first execution it is given (a warm spare belongs to
// nobody yet) and hosts up to RunsPerWorker of that tenant's executions, of
// which one runs JavaScript at a time. So:
//
//   - a run that waits on its host costs a place in a worker, not a
//     process;
//   - a tenant's CPU is its worker processes, at most its share's CPUSlots,
//     and no tenant's program ever runs in another tenant's process;
//   - an execution of a tenant with room in one of its workers starts at
//     once, on the first of them that is not busy computing (load.go), so
//     that runs that mostly wait on their host pack onto few processes;
//     when all of those are busy and the share allows, it claims a warm
//     spare so that it runs beside them rather than after them;
//   - an execution with no room waits in its tenant's queue, at most
//     QueueBound of them, for at most QueueTimeout. When a worker process
//     frees up (a spare warmed, an idle one stopped), it goes to the
//     waiting tenant that holds no worker yet, else to the one that used
//     the least run-clock time per weight lately.
//
// Workers grow from MinWorkers to MaxWorkers and shrink back: a tenant's
// worker that ran nothing for WorkerIdleTimeout is stopped, and one that
// ran MaxRunsPerWorker executions drains and is replaced.
type pool struct {
	live     map[*worker]struct{} // every worker process not yet reaped, retired ones included
	workers  map[*worker]struct{} // every ready worker, claimed or spare
	spares   []*worker            // ready and nobody's yet, oldest first
	starting int                  // spawns in flight
	tenants  map[string]*tenantPool
	bound    int     // how many executions of one tenant may wait (QueueBound)
	queued   int     // executions waiting, over all tenants
	runWall  float64 // seconds an execution took lately (EWMA), for retry hints
	cpus     []int   // the CPUs workers may be pinned to: the gateway's own
	nextCPU  int     // where the search for the least-loaded CPU starts
}

// tenantPool is one tenant's part of the pool.
type tenantPool struct {
	name    string
	workers []*worker
	waiting queue.Bounded[*waiter]
	usage   float64 // run-clock seconds, decayed with usageHalfLife
	usageAt time.Time
}

// waiter is one execution waiting for room.
type waiter struct {
	t     *tenantPool
	ready chan placement // buffered: whoever places it never blocks
}

type placement struct {
	w   *worker
	err error
}

func (wt *waiter) fail(err error) { wt.ready <- placement{err: err} }

// usageHalfLife is how fast a tenant's past use stops counting against it.
const usageHalfLife = 10 * time.Second

func (p *pool) init(bound int) {
	p.cpus = allowedCPUs()
	p.bound = bound
	p.live = map[*worker]struct{}{}
	p.workers = map[*worker]struct{}{}
	p.tenants = map[string]*tenantPool{}
}

func (p *pool) tenant(name string) *tenantPool {
	t := p.tenants[name]
	if t == nil {
		t = &tenantPool{name: name, usageAt: time.Now(), waiting: queue.New[*waiter](0, p.bound)}
		p.tenants[name] = t
	}
	return t
}

// decayed is t's usage as of now.
func (t *tenantPool) decayed(now time.Time) float64 {
	return t.usage * math.Exp2(-now.Sub(t.usageAt).Seconds()/usageHalfLife.Seconds())
}

func (t *tenantPool) charge(now time.Time, seconds float64) {
	t.usage = t.decayed(now) + seconds
	t.usageAt = now
}

// acquire places one execution of tenant on a worker: at once when there is
// room, else after waiting in the tenant's queue. The worker's place is
// taken; runGone gives it back.
func (e *Executor) acquire(ctx context.Context, tenant string) (*worker, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, brokenFault()
	}
	t := e.pool.tenant(tenant)
	if t.waiting.Len() == 0 {
		spares, workers := len(e.pool.spares), len(e.pool.workers)
		if w := e.placeLocked(t, true); w != nil {
			e.assignLocked(w)
			if len(e.pool.spares) < spares || len(e.pool.workers) < workers {
				// A spare was claimed, or a stale worker stopped: warm the
				// next.
				e.balanceLocked()
			}
			e.mu.Unlock()
			return w, nil
		}
	}
	// An execution of a tenant that holds no worker yet may always wait
	// for the one on its way, even with no queue: that is a start, not a
	// queue.
	wt := &waiter{t: t, ready: make(chan placement, 1)}
	if len(t.workers) == 0 && t.waiting.Len() == 0 {
		t.waiting.Push(wt)
	} else if _, ok := t.waiting.Add(wt); !ok {
		hint := e.pool.retryHintLocked()
		e.mu.Unlock()
		e.stats.queueOverflows.Add(1)
		return nil, protocol.NewQueueOverflowError(e.opts.QueueBound, hint)
	}
	e.pool.queued++
	e.balanceLocked()
	e.mu.Unlock()

	timer := time.NewTimer(e.opts.QueueTimeout)
	defer timer.Stop()
	select {
	case pl := <-wt.ready:
		return pl.w, pl.err
	case <-ctx.Done():
		return nil, e.giveUp(wt, context.Cause(ctx))
	case <-timer.C:
		e.stats.queueTimeouts.Add(1)
		return nil, e.giveUp(wt, protocol.NewQueueTimeoutError(e.opts.QueueTimeout, e.retryHint()))
	}
}

// giveUp takes a waiter out of its queue and returns err; a place it was
// given meanwhile is given back.
func (e *Executor) giveUp(wt *waiter, err error) error {
	e.mu.Lock()
	if wt.t.waiting.Remove(func(o *waiter) bool { return o == wt }) {
		e.pool.queued--
		e.mu.Unlock()
		return err
	}
	e.mu.Unlock()
	if pl := <-wt.ready; pl.w != nil {
		e.unassign(pl.w)
	}
	return err
}

// placeLocked picks t's worker for one more execution: the first of t's
// with room that is not busy (its own share's before borrowed ones), so
// that runs pack onto few processes; when each is busy and claim allows, a
// warm spare claimed for t within its share; else the one with room and
// the fewest runs not waiting on their host. Nil when there is no room now.
func (e *Executor) placeLocked(t *tenantPool, claim bool) *worker {
	var best, open *worker
	var stale []*worker
	now := time.Now()
	// Whether t has the group to itself matters only to borrowed workers
	// and to borrowing; it costs a pass over the tenants, so it is asked
	// only then.
	alone := sync.OnceValue(func() bool { return !e.othersHoldWorkersLocked(t) })
	for _, w := range t.workers {
		if w.borrowed && !alone() {
			// Borrowed while the tenant had the group to itself: it takes
			// nothing new now that others are here, and goes once empty.
			if w.runs == 0 && !w.gone {
				stale = append(stale, w)
			}
			continue
		}
		if !e.roomLocked(w) {
			if w.runs == 0 && !w.gone {
				// Full of memory it no longer uses: a fresh process serves
				// better.
				stale = append(stale, w)
			}
			continue
		}
		if best == nil || w.active() < best.active() || (w.active() == best.active() && best.borrowed && !w.borrowed) {
			best = w
		}
		if !w.busy(now) && (open == nil || (open.borrowed && !w.borrowed)) {
			open = w
		}
	}
	for _, w := range stale {
		e.retireLocked(w)
	}
	if open != nil {
		return open
	}
	if claim && len(e.pool.spares) > 0 {
		share := e.opts.shareOf(t.name)
		switch own := t.ownWorkers(); {
		case own < share.slots:
			return e.claimLocked(t, false)
		case len(t.workers) < share.borrow && alone():
			return e.claimLocked(t, true)
		}
	}
	return best
}

// borrowedNice is the nice value of a worker a tenant borrowed beyond its
// default share (Share.CPUSlots) while it had the group to itself, so that
// a CPU-bound tenant alone on a machine uses every CPU. Once another tenant
// holds a worker, a borrowed one takes nothing new and is stopped when
// empty; until then the kernel gives its time to the others first. A nice
// value only ever rises for an unprivileged process, so a borrowed worker
// stays below the others for the rest of its life.
const borrowedNice = 10

// othersHoldWorkersLocked reports whether a tenant other than t holds a
// worker process of the pool or waits for one.
func (e *Executor) othersHoldWorkersLocked(t *tenantPool) bool {
	for _, o := range e.pool.tenants {
		if o != t && (len(o.workers) > 0 || o.waiting.Len() > 0) {
			return true
		}
	}
	return false
}

// ownWorkers counts t's workers that are its share: not borrowed, and not
// draining (one on its way out, a run stuck in Go code say, is replaced at
// once rather than holding its tenant's new runs back).
func (t *tenantPool) ownWorkers() int {
	n := 0
	for _, w := range t.workers {
		if !w.borrowed && !w.draining {
			n++
		}
	}
	return n
}

// roomLocked reports whether w may take another execution.
func (e *Executor) roomLocked(w *worker) bool {
	if w.gone || w.draining || w.runs >= e.opts.RunsPerWorker {
		return false
	}
	// A run its caller gave up on is being stopped there; if Go code holds
	// it past the grace, the process goes, and nothing new should go with
	// it. Runs wait the moment it takes.
	if w.abandoned.Load() > 0 {
		return false
	}
	// A worker near its memory takes nothing new; its runs may still grow.
	full := w.p.baseRSS + uint64(e.opts.WorkerMemoryMB)<<20*3/4
	return w.rss.Load() < full
}

// busy reports whether w computes enough that another run placed on it
// would wait for its CPU: it has runs computing, and one of its runs is a
// hog (computing on), or its CPU load is past busyLoad, or busyRuns of its
// runs compute at once.
func (w *worker) busy(now time.Time) bool {
	a := w.active()
	return a > 0 && (w.hogs.Load() > 0 || a >= busyRuns || w.load.value(now) >= busyLoad)
}

// active is how many of w's runs may be executing or waiting to: neither
// waiting on their host nor retained between invocations.
func (w *worker) active() int {
	return max(0, w.runs-w.retained-int(w.parked.Load()))
}

// claimLocked gives the oldest spare to t, borrowed beyond its share or
// not, and pins it to a CPU.
func (e *Executor) claimLocked(t *tenantPool, borrowed bool) *worker {
	w := e.pool.spares[0]
	e.pool.spares = e.pool.spares[1:]
	w.claimed, w.tenant, w.borrowed = true, t.name, borrowed
	w.claimCPU(t.name)
	if borrowed {
		w.nice.Store(borrowedNice)
		lowerPriority(w.p.pid, borrowedNice)
	}
	t.workers = append(t.workers, w)
	e.pinLocked(w)
	return w
}

// pinLocked confines w to the CPU the fewest claimed workers are pinned to
// (a borrowed one counts half: it yields to the others and goes once they
// come). A worker is its tenant's CPU slot: its runs execute side by side
// on their own threads, and on one CPU those take turns, which is what
// lets its meter tell which run allocated what, and the kernel give a
// sibling's short piece the CPU ahead of a hog. e.mu is held.
func (e *Executor) pinLocked(w *worker) {
	cpus := e.pool.cpus
	if len(cpus) == 0 {
		return
	}
	load := map[int]int{}
	for v := range e.pool.workers {
		if v == w || !v.claimed || v.gone || v.p.cpu < 0 {
			continue
		}
		if v.borrowed {
			load[v.p.cpu]++
		} else {
			load[v.p.cpu] += 2
		}
	}
	best := -1
	for i := range cpus {
		c := cpus[(e.pool.nextCPU+i)%len(cpus)]
		if best < 0 || load[c] < load[best] {
			best = c
		}
	}
	e.pool.nextCPU++
	if pinProcess(w.p.pid, best) {
		w.p.cpu = best
	}
}

// assignLocked counts one more execution on w.
func (e *Executor) assignLocked(w *worker) {
	w.runs++
	w.started++
	if w.started >= e.opts.MaxRunsPerWorker {
		w.draining = true
	}
}

// unassign gives back a place nobody used.
func (e *Executor) unassign(w *worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leftLocked(w)
}

// runGone gives back the place of a run that ended (or whose session did)
// and charges its tenant the run-clock time it spent.
func (e *Executor) runGone(w *worker, r *run, runClock time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if t := e.pool.tenants[w.tenant]; t != nil && runClock > 0 {
		t.charge(now, runClock.Seconds())
	}
	if r.granted && r.held.Load() != nil {
		w.retained--
	}
	if r.state.Load() == runAbandoned {
		w.abandoned.Add(-1)
	}
	const keep = 0.9
	e.pool.runWall = keep*e.pool.runWall + (1-keep)*now.Sub(r.start).Seconds()
	e.leftLocked(w)
}

// leftLocked books one execution off w and lets the queues move.
func (e *Executor) leftLocked(w *worker) {
	w.runs--
	if w.runs == 0 {
		w.idleSince = time.Now()
		t := e.pool.tenants[w.tenant]
		if !w.gone && (w.draining || (w.borrowed && t != nil && e.othersHoldWorkersLocked(t))) {
			e.retireLocked(w)
		}
	}
	e.kickLocked()
	e.balanceLocked()
}

// heldLocked counts a run that retained its handles, which waits between
// invocations without running anything.
func (e *Executor) heldLocked(w *worker) { w.retained++ }

// kickLocked places waiting executions. First every tenant's waiters go
// into the room its own workers have; then free worker processes are
// claimed for the tenants still waiting: a tenant holding none first, then
// the one that used the least run-clock time per weight lately.
func (e *Executor) kickLocked() {
	if e.pool.queued == 0 {
		return
	}
	for _, t := range e.pool.tenants {
		for t.waiting.Len() > 0 {
			w := e.placeLocked(t, false)
			if w == nil {
				break
			}
			e.handOutLocked(t, w)
		}
	}
	for len(e.pool.spares) > 0 {
		t := e.nextClaimLocked()
		if t == nil {
			return
		}
		e.handOutLocked(t, e.claimLocked(t, false))
	}
}

// nextClaimLocked is the waiting tenant that gets the next free worker
// process; nil when no waiting tenant may claim one.
func (e *Executor) nextClaimLocked() *tenantPool {
	now := time.Now()
	var best *tenantPool
	var bestKey float64
	for _, t := range e.pool.tenants {
		if t.waiting.Len() == 0 || t.ownWorkers() >= e.opts.shareOf(t.name).slots {
			continue
		}
		key := t.decayed(now) / e.opts.shareOf(t.name).weight
		if t.ownWorkers() == 0 {
			key = -1 / (1 + key) // every tenant holding nothing goes before any holding some
		}
		if best == nil || key < bestKey {
			best, bestKey = t, key
		}
	}
	return best
}

// handOutLocked gives w to t's first waiter.
func (e *Executor) handOutLocked(t *tenantPool, w *worker) {
	wt, _ := t.waiting.Pop()
	e.pool.queued--
	e.assignLocked(w)
	wt.ready <- placement{w: w}
}

// balanceLocked starts worker processes for what is wanted: a warm spare
// (MinWorkers of them while few are claimed, else one, within MaxWorkers),
// and one for each waiting tenant that may claim one. At the ceiling, a
// waiting tenant's process is made by stopping the worker of another tenant
// that has been idle longest.
func (e *Executor) balanceLocked() {
	if e.closed {
		return
	}
	claimed := len(e.pool.workers) - len(e.pool.spares)
	spares := max(e.opts.MinWorkers-claimed, 1)
	demand := 0
	for _, t := range e.pool.tenants {
		if t.waiting.Len() > 0 && t.ownWorkers() < e.opts.shareOf(t.name).slots && e.placeLocked(t, false) == nil {
			demand++
		}
	}
	have := len(e.pool.spares) + e.pool.starting
	for need := demand + spares - have; need > 0; need-- {
		if len(e.pool.workers)+e.pool.starting < e.opts.MaxWorkers {
			e.spawnLocked()
			continue
		}
		if demand == 0 {
			return // a spare is never worth stopping a tenant's worker
		}
		v := e.idlestLocked()
		if v == nil {
			return
		}
		demand--
		e.retireLocked(v)
		e.spawnLocked()
	}
}

// idlestLocked is the claimed worker with nothing to run that has been idle
// longest, a borrowed one first; nil when every claimed worker has
// something.
func (e *Executor) idlestLocked() *worker {
	var v *worker
	for w := range e.pool.workers {
		if !w.claimed || w.runs > 0 || w.gone {
			continue
		}
		if v == nil || (w.borrowed && !v.borrowed) || (w.borrowed == v.borrowed && w.idleSince.Before(v.idleSince)) {
			v = w
		}
	}
	return v
}

// spawnLocked starts one worker process in the background; once ready it
// joins the spares and the queues move.
func (e *Executor) spawnLocked() {
	e.pool.starting++
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		p, err := spawn(&e.opts, func(cpu time.Duration) { e.stats.burned("", cpu) })
		e.mu.Lock()
		defer e.mu.Unlock()
		e.pool.starting--
		if err != nil {
			if !e.closed {
				e.opts.Logger.Warn("local executor: starting a worker failed", "err", err)
				// The old count took a failed start for one execution,
				// failed or not.
				e.stats.workersCrashed.Add(1)
				e.stats.died("", "start")
				if tenant, ok := e.failOneWaiterLocked(); ok {
					e.stats.lose(tenant, 1)
				}
			}
			return
		}
		if e.closed {
			p.kill(killClosed)
			go func() { <-p.exited; p.table.Release() }()
			return
		}
		e.stats.workersStarted.Add(1)
		w := newWorker(e, p)
		w.idleSince = time.Now()
		e.pool.live[w] = struct{}{}
		e.pool.workers[w] = struct{}{}
		e.pool.spares = append(e.pool.spares, w)
		e.kickLocked()
		e.balanceLocked()
	}()
}

// failOneWaiterLocked fails the oldest waiting execution of a tenant that
// needed a new process with WORKER_CRASHED, when a start failed: it learns
// why at once rather than at its queue's bound. It reports whose it
// failed, if any.
func (e *Executor) failOneWaiterLocked() (string, bool) {
	for _, t := range e.pool.tenants {
		if t.waiting.Len() > 0 && len(t.workers) == 0 {
			wt, _ := t.waiting.Pop()
			e.pool.queued--
			wt.fail(crashedFault("The worker process for this execution did not start."))
			return t.name, true
		}
	}
	return "", false
}

// retireLocked stops a worker the pool no longer wants.
func (e *Executor) retireLocked(w *worker) {
	e.dropLocked(w)
	go w.p.retire()
}

// drain makes w take nothing new: it is stopped once its runs are out.
func (e *Executor) drain(w *worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w.draining = true
}

// dropLocked takes w off the pool's books.
func (e *Executor) dropLocked(w *worker) {
	if w.gone {
		return
	}
	w.gone = true
	delete(e.pool.workers, w)
	if i := slices.Index(e.pool.spares, w); i >= 0 {
		e.pool.spares = slices.Delete(e.pool.spares, i, i+1)
	}
	if t := e.pool.tenants[w.tenant]; t != nil && w.claimed {
		if i := slices.Index(t.workers, w); i >= 0 {
			t.workers = slices.Delete(t.workers, i, i+1)
		}
	}
}

// workerGone takes a dead worker off the books and lets the pool heal.
func (e *Executor) workerGone(w *worker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.pool.live, w)
	e.dropLocked(w)
	e.kickLocked()
	e.balanceLocked()
}

// janitor stops tenants' workers that stayed idle past WorkerIdleTimeout
// and forgets tenants that hold nothing, once a second.
func (e *Executor) janitor() {
	defer e.bg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-e.closing:
			return
		case now := <-t.C:
			e.mu.Lock()
			e.sweepLocked(now)
			e.mu.Unlock()
		}
	}
}

func (e *Executor) sweepLocked(now time.Time) {
	for w := range e.pool.workers {
		if w.claimed && w.runs == 0 && now.Sub(w.idleSince) >= e.opts.WorkerIdleTimeout {
			e.retireLocked(w)
		}
	}
	for name, t := range e.pool.tenants {
		if len(t.workers) == 0 && t.waiting.Len() == 0 && t.decayed(now) < 1e-3 {
			delete(e.pool.tenants, name)
		}
	}
	e.balanceLocked()
}

// dropWaitersLocked empties every queue (Close).
func (p *pool) dropWaitersLocked() []*waiter {
	var out []*waiter
	for _, t := range p.tenants {
		for wt, ok := t.waiting.Pop(); ok; wt, ok = t.waiting.Pop() {
			out = append(out, wt)
		}
	}
	p.queued = 0
	return out
}

// allLocked lists every worker process not yet reaped, for Close.
func (p *pool) allLocked() []*worker {
	out := make([]*worker, 0, len(p.live))
	for w := range p.live {
		out = append(out, w)
	}
	return out
}

// retryHintLocked is about how long a run in flight takes to finish, as
// the pool has seen lately, between 10 ms and 10 s.
func (p *pool) retryHintLocked() time.Duration {
	d := time.Duration(p.runWall * float64(time.Second))
	if p.runWall == 0 {
		d = 100 * time.Millisecond
	}
	return min(max(d, 10*time.Millisecond), 10*time.Second)
}
