package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// This file is what runs inside a worker process: the frame loop, the runs
// it hosts, and the memory layers that live in the process.

// Worker exit codes, for the parent's diagnostics.
const (
	exitParentGone = 0 // stdin closed: the parent is gone or retired us
	exitBadFrame   = 3 // the parent sent something this worker cannot read
	exitWriteFail  = 4 // stdout broke
	exitRunPanic   = 5 // a Go panic escaped a run
	exitConfine    = 6 // the system-call filter would not load
)

// RunFunc is sandbox.Run's signature; tests of the pool may swap it.
type RunFunc func(ctx context.Context, job sandbox.Job, host sandbox.Host) (*protocol.ExecuteResult, error)

// ServeIfRequested turns the process into a pool worker when the pool
// started it as one (wire.WorkerEnv): it serves jobs on stdin and stdout
// with run until the parent closes stdin, then exits. In any other process
// it returns at once. run nil is the sandbox, each run in a runtime
// prepared ahead of time; a test binary serving as its own worker passes a
// stand-in, production code nil (local.RunWorkerIfRequested).
func ServeIfRequested(run RunFunc) {
	if os.Getenv(wire.WorkerEnv) != wire.WorkerEnvValue {
		return
	}
	// Before the threads runs will hold are made. A worker that cannot
	// shrink them is the worker it was, its address space the bound.
	_ = smallThreadStacks()
	closeInherited()
	in, out := os.Stdin, claimStdout()
	os.Exit(serveWorkerWith(in, out, run, wire.OpenTable()))
}

// preparedStock is how many runtimes a worker keeps built ahead of its
// next jobs: building one is most of a small run's cost. A run that ended
// refills one once its result is out.
const preparedStock = 2

// workerServer is the worker's side of the pipe.
type workerServer struct {
	wmu sync.Mutex   // one frame at a time on out
	out *wire.Writer // guarded by wmu

	run         RunFunc // nil: the sandbox
	limitMB     int     // a run's memory limit unless its job sets a lower one
	meter       *meter
	returning   atomic.Bool // returnMemory is at work
	returnAgain atomic.Bool // returnMemory was asked since its last pass began

	mu     sync.Mutex
	nextID uint64
	// pending are the host calls waiting for their answers: each entry
	// takes the answer frame, once; whoever removes it owns the call.
	pending map[uint64]pendingCall
	runs    map[uint64]*hostedRun

	// prepared holds runtimes built ahead of the jobs that will use them.
	// Nil when run is a stand-in.
	prepared chan preparedRuntime
}

// hostedRun is one run the worker hosts, from its job frame until its
// result (or, when it retained its handles, until its ended frame).
type hostedRun struct {
	id     uint64
	cancel context.CancelCauseFunc
	// invokes and release serve a retained session (a job that asked for
	// handles); nil otherwise. The parent sends one invocation at a time
	// and waits for its answer, so invokes holds one: a second waiting is
	// a parent that broke the protocol.
	invokes chan *wire.Message
	release chan struct{}
	once    sync.Once
	// kept is the retained session once granted, so that a release ends
	// an invocation in flight too.
	kept atomic.Pointer[sandbox.Retained]
}

// serveWorker runs the worker protocol without a run table.
func serveWorker(in io.Reader, out io.Writer, run RunFunc) int {
	return serveWorkerWith(in, out, run, nil)
}

// serveWorkerWith runs the worker protocol and returns the exit code.
func serveWorkerWith(in io.Reader, out io.Writer, run RunFunc, table *wire.Table) int {
	s := &workerServer{out: wire.NewWriter(out), run: run,
		pending: map[uint64]pendingCall{}, runs: map[uint64]*hostedRun{}}
	fr := wire.NewReader(bufio.NewReaderSize(in, 64<<10))
	m, err := fr.Read(wire.MaxParentFrame)
	if err != nil || m.Kind != wire.KindInit || m.Init == nil {
		return exitBadFrame
	}
	ready := s.applyLimits(*m.Init, table)
	if s.send(&wire.Message{Kind: wire.KindReady, Ready: &ready}) != nil {
		return exitWriteFail
	}
	if run == nil {
		s.prepared = make(chan preparedRuntime, preparedStock)
		go func() {
			for range preparedStock {
				s.refill()
			}
		}()
	}
	for {
		m, err := fr.Read(wire.MaxParentFrame)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return exitParentGone
			}
			return exitBadFrame
		}
		if !s.handle(m) {
			return exitBadFrame
		}
	}
}

// handle acts on one frame from the parent; false means the parent broke
// the protocol.
func (s *workerServer) handle(m *wire.Message) bool {
	switch m.Kind {
	case wire.KindJob:
		if m.Job == nil || m.Run == 0 {
			return false
		}
		ctx, cancel := context.WithCancelCause(context.Background())
		r := &hostedRun{id: m.Run, cancel: cancel}
		if m.Job.RetainHandles && s.run == nil {
			r.invokes = make(chan *wire.Message, 1)
			r.release = make(chan struct{})
		}
		s.mu.Lock()
		_, dup := s.runs[m.Run]
		if !dup {
			s.runs[m.Run] = r
		}
		s.mu.Unlock()
		if dup {
			cancel(nil)
			return false
		}
		s.meter.add(r.id, memoryLimit(m.Job.MemoryLimitMB, s.limitMB), time.Duration(m.Job.TimeoutMs)*time.Millisecond, cancel)
		// The job was decoded for this run, whoever executed meanwhile.
		s.meter.charge(r.id, int64(m.Size))
		go s.runJob(ctx, r, *m.Job)
		// Start the run on this thread before going back to the pipe (see
		// the answers below).
		runtime.Gosched()
	case wire.KindCancel:
		// A run that already ended is no longer here: the cancel crossed
		// its result in the pipe.
		if r := s.find(m.Run); r != nil {
			r.cancel(context.Canceled)
		}
	case wire.KindInvoke:
		r := s.find(m.Run)
		if r == nil {
			// The session ended by itself (its ended frame crossed this
			// invoke in the pipe); the parent has answered the call.
			return true
		}
		if r.invokes == nil || m.OutboundRequest == nil {
			return false
		}
		select {
		case r.invokes <- m:
		default:
			return false
		}
	case wire.KindRelease:
		if r := s.find(m.Run); r != nil {
			if r.release == nil {
				return false
			}
			r.once.Do(func() {
				close(r.release)
				if kept := r.kept.Load(); kept != nil {
					// Ends an invocation in flight: it answers as ended.
					go kept.Close()
				}
			})
		}
	case wire.KindDispatchAnswer, wire.KindOutboundAnswer:
		s.mu.Lock()
		call, ok := s.pending[m.ID]
		delete(s.pending, m.ID)
		s.mu.Unlock()
		if ok {
			// The answer was decoded for the run that made the call.
			s.meter.charge(call.run, int64(m.Size))
			call.answer(m) // never blocks
			// Let what the answer woke (the run's event loop) run now, on
			// this thread. Left alone it waits for another thread to be
			// woken and to take it over, about 20 µs a call on an idle
			// machine, while this loop only goes back to an empty pipe.
			runtime.Gosched()
		}
	default:
		return false
	}
	return true
}

// memoryLimit is a job's own lower limit, else the worker's (as the
// executor resolves a request's against its own).
func memoryLimit(requested, own int) int {
	if requested > 0 && requested < own {
		return requested
	}
	return own
}

// find is the run a frame names, or nil once the run has sent its last
// frame: a cancel, invoke or release may cross that frame in the pipe.
func (s *workerServer) find(id uint64) *hostedRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs[id]
}

// forgetRun drops a run whose last frame is about to go out, and reports
// whether it left the heap large enough that its pages should go back to
// the system once the run's goroutine is done with them (returnMemory).
func (s *workerServer) forgetRun(r *hostedRun) (large bool) {
	s.mu.Lock()
	delete(s.runs, r.id)
	s.mu.Unlock()
	large = s.meter.remove(r.id) >= returnMemoryAfter
	r.cancel(nil)
	return large
}

// returnMemoryAfter: a run that ends holding this much has left the heap
// large, and the pages stay with the process (and in its RSS, which the
// parent reads to place runs) until they are returned.
const returnMemoryAfter = 64 << 20

// returnMemory gives the heap's free pages back to the system once the
// runs that ended are collected, on a goroutine of its own; one pass at a
// time, and one more after it when asked meanwhile (another large run
// ended while the pass collected: its pages were not free yet).
func (s *workerServer) returnMemory() {
	s.returnAgain.Store(true)
	if !s.returning.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			for s.returnAgain.Swap(false) {
				debug.FreeOSMemory()
			}
			s.returning.Store(false)
			if !s.returnAgain.Load() || !s.returning.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// A worker's GOGC, unless its environment sets one, follows its live heap
// (gcPercentFor): every run allocates a fresh runtime while the live heap
// holds only the runs in flight, so a worker with few runs would collect
// every few runs at Go's default of 100 and spend about half its CPU
// marking; a worker holding many parked runs would, at a high percentage,
// grow its heap to several times what they hold. So the heap may grow by
// gcHeadroom past the live heap, at least by the live heap itself. The soft
// limit set beside it makes the collector run before the heap reaches the
// worker's memory, whatever the percentage.
const (
	gcHeadroom       = 64 << 20
	minWorkerPercent = 100
	maxWorkerPercent = 800
)

// gcPercentFor is the GC percentage for a live heap of live bytes.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return maxWorkerPercent
	}
	return int(min(max(gcHeadroom*100/live, minWorkerPercent), maxWorkerPercent))
}

// baseProcs is the worker's GOMAXPROCS before hogs add to it: the
// environment's GOMAXPROCS when the operator set one, else two (a worker is
// pinned to one CPU: a second processor keeps the pipe and the meter going
// beside a piece that runs long until it is found to be a hog).
func baseProcs() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	return 2
}

// workerMaxStackMB caps a worker goroutine's stack even under a larger
// memory limit. goja runs guest calls on its own stack, so only runaway Go
// recursion comes near it: legitimate runs use a few MB.
const workerMaxStackMB = 256

// applyLimits sets the memory layers that live inside the worker: the CPU
// gate with its per-run memory watchdog, a GC target at the worker's memory
// (keeps RSS close to the live heap, so the parent's RSS poll measures what
// the runs hold) and RLIMIT_AS at the current address space plus the
// worker's memory plus headroom (refuses one huge allocation outright; the
// runtime then dies with "out of memory", which the parent reports as the
// memory text of the run that held the gate).
func (s *workerServer) applyLimits(init wire.Init, table *wire.Table) wire.Ready {
	s.limitMB = init.MemoryLimitMB
	workerMB := max(init.WorkerMemoryMB, init.MemoryLimitMB)
	runtime.GC()
	procs := baseProcs()
	runtime.GOMAXPROCS(procs)
	s.meter = newMeter(table, int64(heapLive()), procs)
	s.meter.onHog = func(run uint64, tid int) {
		// Off the meter's lock: the pipe may be full.
		go s.send(&wire.Message{Kind: wire.KindHog, Run: run, TID: tid})
	}
	worker := uint64(workerMB) << 20
	// Runs that together grow past seven eighths of the worker's memory
	// lose the one growing the most, before the process-wide layers stop
	// the whole process.
	s.meter.workerLine = int64(worker / 8 * 7)
	debug.SetMemoryLimit(int64(totalRuntimeMemory() + worker))
	if os.Getenv("GOGC") == "" {
		s.meter.tuneGC = true
		s.meter.gcPercent = gcPercentFor(uint64(s.meter.ledger.base()))
		debug.SetGCPercent(s.meter.gcPercent)
	}
	// Go code recursing without end (goja's parser on deeply nested source
	// built at run time and handed to eval or Function, JSON.parse of
	// deeply nested text) grows its goroutine's stack until the runtime
	// dies of it. Cap that stack at a run's memory, so that it dies before
	// using more than the limit and the parent reports the memory text,
	// whatever the limit.
	debug.SetMaxStack(int(min(uint64(init.MemoryLimitMB)<<20, workerMaxStackMB<<20)))
	ready := wire.Ready{PID: os.Getpid()}
	if init.AddressSpaceMB > 0 {
		ready.RlimitAS = setAddressLimit(worker + uint64(init.AddressSpaceMB)<<20)
	}
	if init.Confine {
		// Last: the limits above take calls the filter refuses. A worker
		// that cannot confine itself takes no job.
		if err := confineWorker(init.Sockets); err != nil {
			fmt.Fprintln(os.Stderr, "worker: cannot load the system-call filter:", err)
			os.Exit(exitConfine)
		}
		ready.Confined = true
	}
	return ready
}

// runJob runs one job and sends its result; a run granted handles then
// serves invocations until its session ends.
func (s *workerServer) runJob(ctx context.Context, r *hostedRun, job sandbox.Job) {
	host := &workerHost{s: s, run: r.id}
	var res *protocol.ExecuteResult
	var kept *sandbox.Retained
	var err error
	if s.run != nil {
		res, err = s.runStandIn(ctx, job, host)
	} else {
		rt := s.nextRuntime(ctx, r.id)
		res, kept, err = runSandbox(ctx, rt, job, host)
	}
	cpu, peak, waited := s.meter.usage(r.id)
	ans := &wire.Message{Kind: wire.KindResult, Run: r.id, Result: res, CPUNanos: int64(cpu), PeakHeap: peak, WaitNanos: int64(waited)}
	if kept != nil {
		go s.refill()
		s.serveRetained(r, kept, ans)
		host.finish()
		if s.forgetRun(r) {
			s.returnMemory()
		}
		return
	}
	ans.OverLimit = s.meter.overLimit(r.id)
	if cause := context.Cause(ctx); ans.OverLimit && res != nil && !res.HasError && protocol.FailureOf(cause) == protocol.FailureMemory {
		// The watchdog's verdict came at the run's last look, as its slice
		// ended after the program returned (a busy machine ran the poll
		// late): past its limit is past its limit, however late it is seen.
		ans.Result = overLimitResult(res, cause)
	}
	host.finish()
	large := s.forgetRun(r)
	// A failed write means the parent is gone; the read loop sees stdin
	// end and exits.
	if err != nil {
		// The sandbox broke (an INTERNAL fault): no envelope.
		ans.Result, ans.Broken = nil, true
	}
	_ = s.send(ans)
	s.refill()
	if large {
		// Here, not as the run is forgotten: until this goroutine is done
		// the run's runtime is still reachable from it, and a collection
		// then returned nothing of a bomb's 300 MB.
		s.returnMemory()
	}
}

// overLimitResult is res, whose program returned, failed with the memory
// limit error cause: what it logged and counted stays.
func overLimitResult(res *protocol.ExecuteResult, cause error) *protocol.ExecuteResult {
	out := *res
	out.ResultJSON, out.Handles = "", nil
	out.Error, out.HasError, out.Failure = cause.Error(), true, protocol.FailureMemory
	return &out
}

// runSandbox runs job in rt; a Go panic that escapes it ends the worker
// (exitOnPanic).
func runSandbox(ctx context.Context, rt *sandbox.Prepared, job sandbox.Job, host sandbox.Host) (*protocol.ExecuteResult, *sandbox.Retained, error) {
	defer exitOnPanic()
	if job.RetainHandles {
		return rt.RunRetained(ctx, job, host)
	}
	res, err := rt.Run(ctx, job, host)
	return res, nil, err
}

// exitOnPanic, deferred by a run, turns a Go panic that escaped it into
// the worker's exit: the runtime's state is unknown, so the parent
// replaces the worker and reports WORKER_CRASHED.
func exitOnPanic() {
	if r := recover(); r != nil {
		os.Stderr.WriteString("worker: run panicked\n")
		os.Exit(exitRunPanic)
	}
}

// runStandIn calls a test's run function as one piece of work (the
// function may end it and start another around a host call it waits on,
// as the sandbox does).
func (s *workerServer) runStandIn(ctx context.Context, job sandbox.Job, host *workerHost) (*protocol.ExecuteResult, error) {
	defer exitOnPanic()
	if !host.Enter(ctx, BoundClock(time.Duration(job.TimeoutMs)*time.Millisecond)) {
		cause := context.Cause(ctx)
		return &protocol.ExecuteResult{Error: cause.Error(), HasError: true, Failure: protocol.FailureOf(cause)}, nil
	}
	defer host.Leave()
	res, err := s.run(ctx, job, host)
	if res == nil && err == nil {
		res = &protocol.ExecuteResult{}
	}
	return res, err
}

// preparedRuntime is a runtime built ahead of its job, with the heap and
// the CPU building it took (charged to the run that takes it).
type preparedRuntime struct {
	rt   *sandbox.Prepared
	cost int64
	cpu  time.Duration
}

// nextRuntime is a prepared runtime for run: one from the stock, else one
// built now as a piece of the run's work.
func (s *workerServer) nextRuntime(ctx context.Context, run uint64) *sandbox.Prepared {
	select {
	case p := <-s.prepared:
		s.meter.adopt(run, p.cost, p.cpu)
		return p.rt
	default:
	}
	p := s.meter.enterBuild(ctx, run)
	if p == nil {
		// The run was cancelled: it stops before it runs anything, and
		// what it runs in does not matter.
		return sandbox.Prepare()
	}
	defer s.meter.leave(p)
	return sandbox.Prepare()
}

// refill builds one runtime for the stock when it is short, as a piece of
// the worker's own work. It is called once the worker has answered
// (after a run's result, at start), so that building the next runtime
// never delays a run that is about to start.
func (s *workerServer) refill() {
	if s.prepared == nil || len(s.prepared) >= preparedStock {
		return
	}
	p := s.meter.enter(context.Background(), 0, nil)
	rt := sandbox.Prepare()
	cpu, cost := s.meter.leaveOwn(p)
	select {
	case s.prepared <- preparedRuntime{rt: rt, cost: cost, cpu: cpu}:
	default: // another run filled it meanwhile: this one is garbage
	}
}

// serveRetained sends the grant and serves invocations, one at a time in
// the order their frames came, until the session ends: an invocation past
// its bound, the memory watchdog (then an ended frame carries the memory
// text), or a release from the parent. Its host stays open throughout, so
// the handler's stub-mode fetches still cross the pipe.
func (s *workerServer) serveRetained(r *hostedRun, kept *sandbox.Retained, grant *wire.Message) {
	defer kept.Close()
	r.kept.Store(kept)
	select {
	case <-r.release:
		// Released before the grant went out (it cannot be: the parent
		// releases what it was granted); nothing to serve.
		return
	default:
	}
	if s.send(grant) != nil {
		return
	}
	for {
		select {
		case m := <-r.invokes:
			inv := kept.Invoke(*m.OutboundRequest)
			ans := &wire.Message{Kind: wire.KindInvokeAnswer, Run: r.id, ID: m.ID, Err: inv.Err, HasErr: inv.HasErr, Ended: inv.Ended, Failure: inv.Failure, Broken: inv.Broken}
			if !inv.HasErr {
				ans.OutboundResponse = &inv.Response
			}
			if inv.Ended {
				ans.OverLimit = s.meter.overLimit(r.id)
			}
			s.billRetained(r.id, kept, ans, inv.RunClock)
			if err := s.send(ans); errors.Is(err, wire.ErrFrameTooLarge) {
				// An answer inside PayloadLimit always fits a frame: the
				// executor broke.
				broken := &wire.Message{Kind: wire.KindInvokeAnswer, Run: r.id, ID: m.ID, HasErr: true, Broken: true}
				s.billRetained(r.id, kept, broken, inv.RunClock)
				_ = s.send(broken)
			}
			if inv.Ended {
				return
			}
		case <-kept.Done():
			ended := &wire.Message{Kind: wire.KindEnded, Run: r.id, Err: kept.EndText(), HasErr: true, Ended: true, Failure: kept.EndFailure(), Broken: kept.Broken(), OverLimit: s.meter.overLimit(r.id)}
			s.billRetained(r.id, kept, ended, 0)
			_ = s.send(ended)
			return
		case <-r.release:
			kept.Close()
			ended := &wire.Message{Kind: wire.KindEnded, Run: r.id, Ended: true}
			s.billRetained(r.id, kept, ended, 0)
			_ = s.send(ended)
			return
		}
	}
}

// billRetained puts on m, an invocation's answer or a retained session's
// end, what the run has used so far and what the run clock spent since
// its last such frame: the invocation's own clock, and the work between
// invocations. The parent bills the difference.
func (s *workerServer) billRetained(run uint64, kept *sandbox.Retained, m *wire.Message, invocation time.Duration) {
	cpu, peak, _ := s.meter.usage(run)
	m.CPUNanos, m.PeakHeap = int64(cpu), peak
	m.ClockNanos = int64(invocation + kept.TakeBetween())
}

func (s *workerServer) send(m *wire.Message) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.out.Write(m, wire.MaxWorkerFrame)
}

// call sends one host call and waits for its answer or for ctx.
func (s *workerServer) call(ctx context.Context, m *wire.Message) (*wire.Message, error) {
	ch := make(chan *wire.Message, 1)
	id, err := s.start(m, func(a *wire.Message) { ch <- a })
	if err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		return a, nil
	case <-ctx.Done():
		s.forget(id)
		return nil, context.Cause(ctx)
	}
}

// start sends one host call whose answer frame goes to answer, from the
// read loop, unless the call is forgotten first.
func (s *workerServer) start(m *wire.Message, answer func(*wire.Message)) (uint64, error) {
	s.mu.Lock()
	s.nextID++
	m.ID = s.nextID
	s.pending[m.ID] = pendingCall{run: m.Run, answer: answer}
	s.mu.Unlock()
	if err := s.send(m); err != nil {
		s.forget(m.ID)
		return 0, err
	}
	return m.ID, nil
}

// claim removes a pending call and reports whether it was still there: the
// one who claims it answers it.
func (s *workerServer) claim(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[id]
	delete(s.pending, id)
	return ok
}

func (s *workerServer) forget(id uint64) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// errRunFinished answers a host call made after its run returned: the
// parent has moved on, and the call must not reach the host.
var errRunFinished = errors.New(protocol.CompletedText)

// BoundClock is the clock of a piece of work that has its whole bound left
// whenever it starts (a test's stand-in run, which keeps no clock of its
// own); time given back to it changes nothing.
type BoundClock time.Duration

// Left implements sandbox.Clock.
func (c BoundClock) Left() time.Duration { return time.Duration(c) }

// Credit implements sandbox.Clock.
func (BoundClock) Credit(time.Duration) {}

// pendingCall is a host call waiting for its answer frame.
type pendingCall struct {
	run    uint64
	answer func(*wire.Message)
}

// workerHost is the sandbox's Host inside a worker for one run: every call
// crosses the pipe to the parent, which calls the request's functions, and
// the run's pieces of work are metered through it.
type workerHost struct {
	s     *workerServer
	run   uint64
	piece *piece // the piece in flight; the run's loop alone touches it
	mu    sync.Mutex
	done  bool
}

// SetInterrupt implements sandbox.InterruptHost: the meter stops the run
// with it as it cancels it for its memory.
func (h *workerHost) SetInterrupt(f func()) { h.s.meter.setInterrupt(h.run, f) }

var _ sandbox.Gate = (*workerHost)(nil)

// Enter implements sandbox.Gate.
func (h *workerHost) Enter(ctx context.Context, clock sandbox.Clock) bool {
	h.piece = h.s.meter.enter(ctx, h.run, clock)
	return h.piece != nil
}

// Leave implements sandbox.Gate.
func (h *workerHost) Leave() {
	if p := h.piece; p != nil {
		h.piece = nil
		h.s.meter.leave(p)
	}
}

var _ sandbox.Meter = (*workerHost)(nil)

// OffLoop implements sandbox.Meter: work of the run's on the calling
// goroutine is a piece of its own, metered beside the run's loop.
func (h *workerHost) OffLoop() func() {
	p := h.s.meter.enter(context.Background(), h.run, nil)
	if p == nil {
		return func() {}
	}
	return func() { h.s.meter.leave(p) }
}

// Reserve is asked before the run allocates n bytes in one step (a
// built-in's result): false ends the run with the memory text.
func (h *workerHost) Reserve(n int64) bool { return h.s.meter.reserve(h.run, n) }

func (h *workerHost) finish() {
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
}

func (h *workerHost) finished() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done
}

func (h *workerHost) Dispatch(ctx context.Context, provider, tool, argsJSON string) (string, error) {
	if h.finished() {
		return "", errRunFinished
	}
	a, err := h.s.call(ctx, &wire.Message{Kind: wire.KindDispatch, Run: h.run, Provider: provider, Tool: tool, Args: argsJSON})
	if err != nil {
		return "", err
	}
	return dispatchAnswer(a)
}

// DispatchAsync is Dispatch without a goroutine waiting for the answer:
// the read loop hands the answer frame to done. Whoever claims the call
// first (the answer, or ctx ending) calls done, once; a call that cannot
// start calls it from a goroutine of its own, never from the caller's.
func (h *workerHost) DispatchAsync(ctx context.Context, provider, tool, argsJSON string, done func(string, error)) {
	if h.finished() {
		go done("", errRunFinished)
		return
	}
	var stop func() bool
	var mu sync.Mutex // orders stop's assignment before the answer reads it
	mu.Lock()
	defer mu.Unlock()
	id, err := h.s.start(&wire.Message{Kind: wire.KindDispatch, Run: h.run, Provider: provider, Tool: tool, Args: argsJSON}, func(a *wire.Message) {
		mu.Lock()
		st := stop
		mu.Unlock()
		if st != nil {
			st()
		}
		done(dispatchAnswer(a))
	})
	if err != nil {
		go done("", err)
		return
	}
	stop = context.AfterFunc(ctx, func() {
		if h.s.claim(id) {
			done("", context.Cause(ctx))
		}
	})
}

func dispatchAnswer(a *wire.Message) (string, error) {
	if a.Kind != wire.KindDispatchAnswer {
		return "", errors.New("dispatch answered with the wrong frame")
	}
	if a.HasErr {
		return "", errors.New(a.Err)
	}
	return a.Answer, nil
}

func (h *workerHost) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	if h.finished() {
		return protocol.OutboundResponse{}, errRunFinished
	}
	a, err := h.s.call(ctx, &wire.Message{Kind: wire.KindOutbound, Run: h.run, OutboundRequest: &req})
	if err != nil {
		return protocol.OutboundResponse{}, err
	}
	if a.Kind != wire.KindOutboundAnswer {
		return protocol.OutboundResponse{}, errors.New("outbound answered with the wrong frame")
	}
	if a.HasErr {
		return protocol.OutboundResponse{}, errors.New(a.Err)
	}
	if a.OutboundResponse == nil {
		return protocol.OutboundResponse{}, errors.New("outbound answered without a response")
	}
	return *a.OutboundResponse, nil
}
