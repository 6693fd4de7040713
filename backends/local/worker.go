package local

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// worker is the parent's side of one worker process: the runs it hosts,
// the goroutine that routes its frames to them (watch), and the monitor
// that holds the bounds only the process boundary can hold.
type worker struct {
	e *Executor
	p *process

	// Pool state, guarded by e.mu.
	tenant    string // whose runs it hosts, once claimed
	claimed   bool
	borrowed  bool // claimed beyond its tenant's share, at a lower priority
	runs      int  // runs placed on it and not yet gone, retained ones included
	retained  int  // of those, runs that retained their handles
	started   int  // runs ever placed on it
	draining  bool
	idleSince time.Time
	gone      bool

	nice      atomic.Int32  // the process's nice value: borrowedNice once borrowed
	parked    atomic.Int32  // runs with a host call open
	abandoned atomic.Int32  // runs whose caller gave up, still on their way out
	rss       atomic.Uint64 // the last RSS read
	cpu       workerCPU     // the CPU it burned, by tenant
	load      cpuLoad       // the share of a CPU it computed lately
	hogs      atomic.Int32  // runs on it the worker reported hogs (run.hog)

	mu     sync.Mutex
	byRun  map[uint64]*run
	dead   bool   // its death has been dealt with: no run joins it
	blamed uint64 // the run the parent killed the process for; 0: none
	// stuck is the run found executing past its deadline plus the kill
	// grace, in Go code no interrupt reaches; stuckAt when
	// (MonoNow), stuckFor which bound. The monitor alone touches them.
	stuck    uint64
	stuckAt  int64
	stuckFor wire.Bound
	// cancelStuck: a run its caller cancelled was found in Go code past
	// the kill grace; the worker takes nothing new and goes once only
	// cancelled runs are left. The monitor alone touches it.
	cancelStuck bool
	// cancelCPU is the CPU the run table showed for each cancelled run
	// executing when the monitor first saw it cancelled: a run is in Go
	// code past its cancel once it has computed a kill grace beyond it.
	// The monitor alone touches it.
	cancelCPU map[uint64]time.Duration
	wake      chan struct{}
	// watched is closed once the worker's death has been dealt with.
	watched chan struct{}
}

func newWorker(e *Executor, p *process) *worker {
	w := &worker{e: e, p: p, byRun: map[uint64]*run{}, wake: make(chan struct{}, 1), watched: make(chan struct{})}
	go w.watch()
	return w
}

// notStartedError: the run was placed on a worker that died before its
// job reached it, so nothing ran and the run may be placed again.
type notStartedError struct{ error }

func (e notStartedError) Unwrap() error { return e.error }

func notStarted() error {
	return notStartedError{crashedFault("The worker process for this execution exited before it started; nothing ran. Run it again.")}
}

// start registers r and sends its job. A job too large for a frame fails
// before the worker sees it; a job that cannot reach the worker because it
// died fails with notStartedError.
func (w *worker) start(r *run) error {
	w.mu.Lock()
	if w.dead {
		// Placed as the worker died: its death is not this run's.
		w.mu.Unlock()
		r.runCancel()
		w.e.runGone(w, r, 0)
		return notStarted()
	}
	w.byRun[r.id] = r
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	err := w.p.send(&wire.Message{Kind: wire.KindJob, Run: r.id, Job: &r.job})
	if err == nil {
		return nil
	}
	if big, ok := err.(*wire.FrameTooLargeError); ok {
		w.forget(r)
		r.runCancel()
		w.e.runGone(w, r, 0)
		return protocol.NewDeliveryTooLargeError(protocol.DeliveryExecution, big.Size, big.Max)
	}
	// The pipe is broken: the worker is dying (killed, say, before the
	// parent saw it go). The job never reached it, so r is not its death's
	// to settle unless that death took r already.
	taken := w.forget(r)
	w.kill(killProtocol, 0)
	if !taken {
		return nil
	}
	r.runCancel()
	w.e.runGone(w, r, 0)
	return notStarted()
}

// forget drops r from the routing table; false when it was not there.
func (w *worker) forget(r *run) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byRun[r.id] != r {
		return false
	}
	delete(w.byRun, r.id)
	if r.hog {
		w.hogs.Add(-1)
	}
	return true
}

// markHog counts run id, when it is still here, among the worker's hogs:
// a run that computes on, which makes the worker busy (load.go) for as
// long as it is here.
func (w *worker) markHog(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.byRun[id]; r != nil && !r.hog {
		r.hog = true
		w.hogs.Add(1)
	}
}

// lookup is the run with id on this worker, or nil when it is not here.
func (w *worker) lookup(id uint64) *run {
	w.mu.Lock()
	r := w.byRun[id]
	w.mu.Unlock()
	return r
}

// release asks the worker to close a retained run's session; its ended
// frame (or the worker's death) lets it go.
func (w *worker) release(r *run) {
	if w.p.send(&wire.Message{Kind: wire.KindRelease, Run: r.id}) != nil {
		w.kill(killProtocol, 0)
	}
}

// kill ends the process, charging the death to run blamed (0: none) when
// nothing was charged yet.
func (w *worker) kill(reason killReason, blamed uint64) {
	w.mu.Lock()
	if w.blamed == 0 {
		w.blamed = blamed
	}
	w.mu.Unlock()
	w.p.kill(reason)
}

// watch routes the worker's frames to its runs and monitors the process,
// until the process is gone and every run on it settled.
func (w *worker) watch() {
	defer close(w.watched)
	tick := time.NewTicker(monitorPoll)
	defer tick.Stop()
	ticking := true
	for {
		select {
		case m, ok := <-w.p.frames:
			if !ok {
				w.died()
				return
			}
			w.frame(m)
		case <-tick.C:
			if !w.monitor() {
				tick.Stop()
				ticking = false
			}
		case <-w.wake:
			if !ticking {
				tick.Reset(monitorPoll)
				ticking = true
			}
		}
	}
}

// frame acts on one frame from the worker. A frame about a run the parent
// does not know, or of a kind it does not expect, kills the worker:
// nothing after it can be trusted.
func (w *worker) frame(m *wire.Message) {
	if m.Kind == wire.KindHog {
		// About a thread; its run may have ended since.
		w.lowerHog(m.TID)
		w.markHog(m.Run)
		return
	}
	r := w.lookup(m.Run)
	if r == nil {
		w.kill(killProtocol, 0)
		return
	}
	switch m.Kind {
	case wire.KindDispatch, wire.KindOutbound:
		r.hostCall(m, r.granted)
	case wire.KindResult:
		w.result(r, m)
	case wire.KindInvokeAnswer:
		if r.granted {
			r.billRetained(m)
		}
		h := r.held.Load()
		if h == nil || !h.answer(m) {
			w.kill(killProtocol, 0)
			return
		}
		if m.Ended {
			w.sessionEnded(r, h, m)
		}
	case wire.KindEnded:
		h := r.held.Load()
		if !r.granted {
			w.kill(killProtocol, 0)
			return
		}
		r.billRetained(m)
		w.sessionEnded(r, h, m)
	default:
		w.kill(killProtocol, 0)
	}
}

// result settles a run. A run granted handles stays registered: its
// session lives on in the worker.
func (w *worker) result(r *run, m *wire.Message) {
	if (m.Result == nil) == !m.Broken || r.granted {
		w.kill(killProtocol, 0)
		return
	}
	if m.Broken {
		// The sandbox broke under this run: an INTERNAL fault, no envelope.
		r.runCancel()
		w.forget(r)
		w.e.runGone(w, r, 0)
		r.heldCancel()
		r.settle(runOutcome{err: sandbox.InternalFault()})
		return
	}
	if m.OverLimit {
		w.e.stats.heapLimits.Add(1)
	}
	r.runCancel()
	m.Result.Usage = r.usageOf(m.Result, m)
	m.Result.CPUWait = time.Duration(m.WaitNanos)
	r.granted = len(m.Result.Handles) > 0 && r.req.RetainHandles
	r.billedCPU = time.Duration(m.CPUNanos)
	if !r.granted {
		w.forget(r)
		w.e.runGone(w, r, m.Result.RunClock)
		r.heldCancel()
		r.settle(runOutcome{res: m.Result})
		return
	}
	if !r.settle(runOutcome{res: m.Result}) {
		// The caller gave up: nobody will invoke these handles.
		w.release(r)
	}
}

// sessionEnded lets a retained run go: released, or ended by a bound.
func (w *worker) sessionEnded(r *run, h *held, m *wire.Message) {
	if m.OverLimit {
		w.e.stats.heapLimits.Add(1)
	}
	w.forget(r)
	r.heldCancel()
	w.e.runGone(w, r, 0)
	if h == nil {
		return
	}
	if m.Broken {
		h.end(nil, sandbox.InternalFault())
	} else {
		h.end(h.endError(m.Failure, m.Err), nil)
	}
}

// monitor holds the bounds only the process can hold: the worker's memory
// (RSS past it kills the worker, charged to the run estimated to hold the
// most) and the deadline of every run executing (past it plus the kill
// grace, Go code the interrupt cannot reach is running, and only a kill
// stops it). It also charges the CPU the worker burned since the last poll
// to its tenant. It reports whether the worker hosts any run, so that an
// idle one is not polled.
func (w *worker) monitor() bool {
	w.mu.Lock()
	busy := len(w.byRun) > 0
	w.mu.Unlock()
	if st, ok := w.p.stat.read(); ok {
		w.pollCPU(st.cpu)
		w.load.observe(time.Now(), st.cpu)
		w.rss.Store(st.rss)
		if st.rss > w.e.rssLimit(w.p) {
			w.kill(killMemory, w.heaviest())
			return true
		}
	}
	now, grace := wire.MonoNow(), int64(w.e.opts.KillGrace)
	executing := false
	var over wire.Slot
	cancelled := false
	seen := w.cancelCPU
	w.cancelCPU = nil
	w.p.table.Each(func(s wire.Slot) {
		if !s.Active || over.Run != 0 {
			return
		}
		executing = true
		switch {
		case s.Deadline != 0 && now > s.Deadline+grace:
			over = s
		default:
			if r := w.lookup(s.Run); r != nil && r.cancelledAt.Load() != 0 {
				at, ok := seen[s.Run]
				if !ok {
					at = s.CPU
				}
				if w.cancelCPU == nil {
					w.cancelCPU = map[uint64]time.Duration{}
				}
				w.cancelCPU[s.Run] = at
				if s.CPU-at > time.Duration(grace) {
					cancelled = true
				}
			}
		}
	})
	// A run its caller cancelled that goes on computing in Go code
	// (compiling a huge program, say) is not worth its siblings, other
	// callers' runs: the worker takes nothing new and goes once only
	// cancelled runs are left (the run's deadline still holds meanwhile).
	// What counts is the CPU the run spent since, not the time: a piece
	// that waits for the CPU behind the tenant's own runs (under a flood
	// of large programs cut off together) is not stuck, and draining its
	// worker for it would take the worker from the runs beside it.
	if cancelled && !w.cancelStuck {
		w.cancelStuck = true
		w.e.drain(w)
	}
	if w.cancelStuck && w.stuck == 0 && w.onlyAbandonedLeft() {
		w.kill(killOverrun, 0)
	}
	if over.Run != 0 {
		w.stopStuck(over, now)
	}
	if w.stuck != 0 && (now > w.stuckAt+int64(w.e.opts.StuckDrain) || w.onlyStuckLeft()) {
		reason := killOverrun
		if w.stuckFor == wire.BoundMemory {
			// Cancelled for its memory and still in Go code with it.
			reason = killMemory
		}
		w.kill(reason, w.stuck)
	}
	return busy || executing
}

// stopStuck deals with a run found in Go code past its deadline (or its
// cancel) plus the kill grace: only stopping the process stops it. Its
// caller gets its bound's text now, with what the table says it used; the
// worker takes nothing new, and its other runs have StuckDrain to finish
// before the process goes. A second stuck run ends the drain at once.
func (w *worker) stopStuck(s wire.Slot, now int64) {
	if w.stuck != 0 {
		if s.Run != w.stuck {
			w.stuckAt = now - int64(w.e.opts.StuckDrain) - 1
		}
		return
	}
	w.stuck, w.stuckAt, w.stuckFor = s.Run, now, s.Bound
	w.e.drain(w)
	if r := w.lookup(s.Run); r != nil {
		reason := killOverrun
		if s.Bound == wire.BoundMemory {
			reason = killMemory
		}
		r.died(deathNote{reason: reason, blamed: s.Run, used: map[uint64]wire.Slot{s.Run: s}})
	}
}

// onlyAbandonedLeft reports whether every run the worker still hosts was
// given up by its caller.
func (w *worker) onlyAbandonedLeft() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.byRun {
		if r.state.Load() != runAbandoned {
			return false
		}
	}
	return true
}

// onlyStuckLeft reports whether the stuck run is all the worker still
// hosts.
func (w *worker) onlyStuckLeft() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byRun[w.stuck]
	return ok && len(w.byRun) == 1
}

// heaviest is the run the worker's table estimates to hold the most
// memory, which a death of memory is charged to; 0: none.
func (w *worker) heaviest() uint64 {
	var run uint64
	var most int64 = -1
	w.p.table.Each(func(s wire.Slot) {
		if s.Heap > most {
			run, most = s.Run, s.Heap
		}
	})
	return run
}

// lowerHog lowers the priority of a thread of the worker that runs a piece
// of work past its slice, so that the short pieces of its siblings take the
// CPU ahead of it. Only the parent may: the worker's system-call filter
// lets it change nothing of another thread. A thread that is not the
// worker's is left alone.
func (w *worker) lowerHog(tid int) {
	lowerThread(w.p.pid, tid, min(int(w.nice.Load())+hogNice, maxNice))
}

// The nice values of hog threads: a hog of a normal worker gets hogNice,
// one of a borrowed worker (already at borrowedNice) the most there is.
// Against a thread at nice 0 one at 10 gets about a tenth of the CPU, so
// short pieces take it promptly; unlike SCHED_IDLE or nice 19 under
// siblings at 0, it still gets enough to reach the safe points a garbage
// collection waits for (measured: at SCHED_IDLE a collection's stop of the
// world waited seconds for starved hog threads).
const (
	hogNice = 10
	maxNice = 19
)

// rssLimit is the RSS past which the parent kills a worker.
func (e *Executor) rssLimit(p *process) uint64 {
	return p.baseRSS + uint64(e.opts.WorkerMemoryMB+e.opts.RSSHeadroomMB)<<20
}

// died settles every run of a worker whose stream ended: the run the death
// is charged to reports its bound's text, the others WORKER_CRASHED (or
// CONNECTION_BROKEN when the executor is closing).
func (w *worker) died() {
	w.p.reap()
	w.endCPU()
	e := w.e
	reason := w.p.killedFor()
	heaviest := w.heaviest()
	used := map[uint64]wire.Slot{}
	w.p.table.Each(func(s wire.Slot) { used[s.Run] = s })
	w.p.table.Release()
	closing := e.isClosed() // e.mu before w.mu, never inside it
	w.mu.Lock()
	d := deathNote{
		closed: reason == killClosed || (reason == killNone && closing),
		reason: reason,
		blamed: w.blamed,
		oom:    w.p.ranOutOfMemory(),
		used:   used,
	}
	if d.blamed == 0 && d.oom {
		d.blamed = heaviest
	}
	runs := make([]*run, 0, len(w.byRun))
	for _, r := range w.byRun {
		runs = append(runs, r)
	}
	w.byRun = map[uint64]*run{}
	w.dead = true
	w.mu.Unlock()
	e.workerGone(w)

	kind := d.kind()
	switch kind {
	case deathRSS:
		e.stats.rssKills.Add(1)
	case deathTimeout:
		e.stats.timeoutKills.Add(1)
	case deathRlimit:
		e.stats.outOfMemory.Add(1)
	}
	lost := 0
	for _, r := range runs {
		if protocol.CodeOf(r.died(d)) == protocol.CodeWorkerCrashed {
			lost++
		}
	}
	e.stats.workersCrashed.Add(int64(lost))
	e.stats.lose(w.tenant, lost)
	if kind == deathClosed || kind == deathRetired {
		return // the pool's own end of it, nothing to tell
	}
	e.stats.died(w.tenant, kind.String())
	attrs := []any{"tenant", w.tenant, "pid", w.p.pid, "cause", w.cause(kind), "runs", len(runs), "lost", lost}
	if traces := traceIDs(runs); len(traces) > 0 {
		attrs = append(attrs, "traces", traces)
	}
	if kind == deathCrashed || kind == deathProtocol || kind == deathRlimit {
		attrs = append(attrs, "exit", w.p.describeExit(), "stream", fmt.Sprint(w.p.readErr))
	}
	e.opts.Logger.Warn("local executor: worker died", attrs...)
}

// cause says in a few words why the worker ended, for its log line.
func (w *worker) cause(kind deathKind) string {
	switch kind {
	case deathRSS:
		if w.stuck != 0 && w.stuckFor == wire.BoundMemory {
			return "killed: stuck past its memory cancel"
		}
		return "killed: RSS past workerMemoryMB"
	case deathTimeout:
		return "killed: stuck past its deadline"
	case deathRlimit:
		return "crashed: out of memory (RLIMIT_AS)"
	case deathProtocol:
		return "killed: protocol violation"
	}
	return w.p.exitCause()
}

// maxLoggedTraces bounds the trace ids a worker's death line lists.
const maxLoggedTraces = 8

// traceIDs are the trace ids of the runs a worker took down, as the
// gateway's execution lines carry them: at most maxLoggedTraces.
func traceIDs(runs []*run) []string {
	var out []string
	for _, r := range runs {
		if sc := trace.SpanContextFromContext(r.runCtx); sc.IsValid() && len(out) < maxLoggedTraces {
			out = append(out, sc.TraceID().String())
		}
	}
	return out
}
