package local

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/sandbox"
	"github.com/supolka/codemode-gateway/protocol"
)

// workerEnv marks a process started by the pool as a worker. An environment
// variable rather than an argument, so that any main (a test binary with its
// own flags included) can serve as the worker command.
const (
	workerEnv      = "CODEMODE_LOCAL_WORKER"
	workerEnvValue = "v1"
)

// Worker exit codes, for the parent's diagnostics.
const (
	exitParentGone = 0 // stdin closed: the parent is gone or retired us
	exitBadFrame   = 3 // the parent sent something this worker cannot read
	exitWriteFail  = 4 // stdout broke
	exitRunPanic   = 5 // a Go panic escaped the run
)

// heapPoll is how often the in-worker watchdog reads the heap. A read costs
// about 0.4 µs, so 1 ms is cheap and catches gradual growth early.
const heapPoll = time.Millisecond

// runFunc is sandbox.Run's signature; tests of the pool may swap it.
type runFunc func(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult

// workerRun is the run function a worker uses; nil is the sandbox, each run
// in a runtime prepared while the worker waited for the job. It is a
// variable only so that a test binary serving as its own worker can install
// a stand-in before calling RunWorkerIfRequested; production code never
// changes it.
var workerRun runFunc

// RunWorkerIfRequested turns the process into a pool worker when the pool
// started it as one: it serves jobs on stdin and stdout until the parent
// closes stdin, then exits. In any other process it returns at once. A main
// that embeds this package calls it first, before flags or logging are set
// up, so that the re-executed binary becomes a worker and nothing else.
func RunWorkerIfRequested() {
	if os.Getenv(workerEnv) != workerEnvValue {
		return
	}
	in, out := os.Stdin, claimStdout()
	os.Exit(serveWorker(in, out, workerRun))
}

// workerServer is the worker's side of the pipe.
type workerServer struct {
	wmu sync.Mutex  // one frame at a time on out
	out frameWriter // guarded by wmu

	run     runFunc
	limitMB int
	// heapBase is the heap right after start; the watchdog allows the run
	// limitMB above it.
	heapBase uint64

	mu     sync.Mutex
	nextID uint64
	// pending are the host calls waiting for their answers: each entry
	// takes the answer frame, once; whoever removes it owns the call.
	pending map[uint64]func(*message)
	cancel  context.CancelCauseFunc // the current run's, nil when idle
	// invokes feeds the retained session's invocations, once the run was
	// granted handles; nil otherwise.
	invokes chan *message

	// prepared holds the runtime the next job runs in, built after the
	// previous run's result went out (building one is most of a small
	// run's cost). Nil when run is a stand-in.
	prepared chan *sandbox.Prepared
}

// maxQueuedInvokes bounds the invoke frames waiting in a worker. The parent
// sends one at a time, so more than that is a parent that broke the
// protocol.
const maxQueuedInvokes = 16

// serveWorker runs the worker protocol and returns the exit code.
func serveWorker(in io.Reader, out io.Writer, run runFunc) int {
	s := &workerServer{out: frameWriter{w: out}, run: run, pending: make(map[uint64]func(*message))}
	if run == nil {
		s.prepared = make(chan *sandbox.Prepared, 1)
		s.run = func(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult {
			return s.nextRuntime().Run(ctx, job, host)
		}
	}
	fr := frameReader{r: bufio.NewReaderSize(in, 64<<10)}
	m, err := fr.read(maxParentFrame)
	if err != nil || m.Kind != kindInit || m.Init == nil {
		return exitBadFrame
	}
	ready := s.applyLimits(*m.Init)
	if s.send(&message{Kind: kindReady, Ready: &ready}) != nil {
		return exitWriteFail
	}
	// The first runtime is built after the limits took the heap's
	// measure, as every later one is built after a run.
	go s.prepareNext()
	for {
		m, err := fr.read(maxParentFrame)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return exitParentGone
			}
			return exitBadFrame
		}
		switch m.Kind {
		case kindJob:
			if m.Job == nil || !s.startRun(*m.Job) {
				return exitBadFrame
			}
			// Start the run on this thread before going back to the pipe
			// (see the answers below).
			runtime.Gosched()
		case kindInvoke:
			s.mu.Lock()
			ch := s.invokes
			s.mu.Unlock()
			if ch == nil || m.OutboundRequest == nil {
				return exitBadFrame
			}
			select {
			case ch <- m:
			default:
				return exitBadFrame
			}
		case kindCancel:
			s.mu.Lock()
			if s.cancel != nil {
				s.cancel(context.Canceled)
			}
			s.mu.Unlock()
		case kindDispatchAnswer, kindOutboundAnswer:
			s.mu.Lock()
			answer := s.pending[m.ID]
			delete(s.pending, m.ID)
			s.mu.Unlock()
			if answer != nil {
				answer(m) // never blocks
				// Let what the answer woke (the run's event loop) run now,
				// on this thread. Left alone it waits for another thread
				// to be woken and to take it over, about 20 µs a call on
				// an idle machine, while this loop only goes back to an
				// empty pipe.
				runtime.Gosched()
			}
		default:
			return exitBadFrame
		}
	}
}

// workerGCPercent is a worker's GOGC unless its environment sets one. A
// worker's live heap is small (one runtime) while every run allocates a
// fresh runtime, so at Go's default of 100 it collects every few runs and
// spends about half its CPU marking; at 400 the pool ran about 25% more
// trivial executions per second. The memory limit still holds: the soft
// limit set beside it makes the collector run before the heap reaches the
// run's limit, whatever this percentage.
const workerGCPercent = 400

// workerMaxStackMB caps a worker goroutine's stack even under a larger
// memory limit. goja runs guest calls on its own stack, so only runaway Go
// recursion comes near it: legitimate runs use a few MB.
const workerMaxStackMB = 256

// applyLimits sets the memory layers that live inside the worker: a GC
// target near the limit (keeps RSS close to the live heap, so the parent's
// RSS poll measures what the run holds) and RLIMIT_AS at the current
// address space plus the limit plus headroom (refuses one huge allocation
// outright; the runtime then dies with "out of memory", which the parent
// reports as the memory text).
func (s *workerServer) applyLimits(init initMessage) readyMessage {
	s.limitMB = init.MemoryLimitMB
	runtime.GC()
	s.heapBase = heapObjects()
	limit := uint64(init.MemoryLimitMB) << 20
	debug.SetMemoryLimit(int64(totalRuntimeMemory() + limit))
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(workerGCPercent)
	}
	// Go code recursing without end (goja's parser on deeply nested source
	// built at run time and handed to eval or Function, JSON.parse of
	// deeply nested text) grows its goroutine's stack until the runtime
	// dies of it. Cap that stack at the run's memory, so that it dies
	// before using more than the limit and the parent reports the memory
	// text, whatever the limit.
	debug.SetMaxStack(int(min(limit, workerMaxStackMB<<20)))
	ready := readyMessage{PID: os.Getpid()}
	if init.AddressSpaceMB > 0 {
		ready.RlimitAS = setAddressLimit(limit + uint64(init.AddressSpaceMB)<<20)
	}
	return ready
}

// startRun starts job on its own goroutine; false if one is already running.
func (s *workerServer) startRun(job sandbox.Job) bool {
	ctx, cancel := context.WithCancelCause(context.Background())
	s.mu.Lock()
	if s.cancel != nil {
		s.mu.Unlock()
		cancel(nil)
		return false
	}
	s.cancel = cancel
	s.mu.Unlock()
	go s.runJob(ctx, cancel, job)
	return true
}

func (s *workerServer) runJob(ctx context.Context, cancel context.CancelCauseFunc, job sandbox.Job) {
	host := &workerHost{s: s}
	watch := s.watchHeap(cancel, memoryLimit(job.MemoryLimitMB, s.limitMB))

	if job.RetainHandles {
		res, kept := s.runRetainedProtected(ctx, job, host)
		if kept != nil {
			s.serveRetained(ctx, kept, res)
			watch.stop()
			host.finish()
			// The parent retires a worker whose handles closed; s.cancel
			// stays set, so no further job is accepted.
			return
		}
		s.finishRun(res, host, cancel, watch)
		return
	}
	res := s.runProtected(ctx, job, host)
	s.finishRun(res, host, cancel, watch)
}

// finishRun stops the watchdog and sends the run's result.
func (s *workerServer) finishRun(res *protocol.ExecuteResult, host *workerHost, cancel context.CancelCauseFunc, watch *heapWatch) {
	overLimit := watch.stop()
	host.finish()
	s.mu.Lock()
	s.cancel = nil
	s.mu.Unlock()
	cancel(nil)
	// A failed write means the parent is gone; the read loop sees stdin end
	// and exits.
	_ = s.send(&message{Kind: kindResult, Result: res, OverLimit: overLimit})
	s.prepareNext()
}

// nextRuntime is the runtime the next run uses: the prepared one, waiting
// for it when the job came while it was still being built.
func (s *workerServer) nextRuntime() *sandbox.Prepared {
	if s.prepared == nil {
		return sandbox.Prepare()
	}
	return <-s.prepared
}

// prepareNext builds the runtime of the next job. Every run takes one
// runtime and every run that leaves the worker able to take another job
// prepares one, so the channel never holds more than its one slot.
func (s *workerServer) prepareNext() {
	if s.prepared != nil {
		s.prepared <- sandbox.Prepare()
	}
}

// runRetainedProtected is runProtected for a job that asked for handles.
func (s *workerServer) runRetainedProtected(ctx context.Context, job sandbox.Job, host sandbox.Host) (*protocol.ExecuteResult, *sandbox.Retained) {
	defer func() {
		if r := recover(); r != nil {
			os.Stderr.WriteString("worker: run panicked\n")
			os.Exit(exitRunPanic)
		}
	}()
	return s.nextRuntime().RunRetained(ctx, job, host)
}

// serveRetained sends the grant and serves invocations, one at a time in
// the order their frames came, until the session ends: an invocation past
// its bound, or the watchdog cancelling ctx between invocations (then an
// ended frame carries the memory text). Its host stays open throughout,
// so the handler's stub-mode fetches still cross the pipe.
func (s *workerServer) serveRetained(ctx context.Context, kept *sandbox.Retained, res *protocol.ExecuteResult) {
	defer kept.Close()
	invokes := make(chan *message, maxQueuedInvokes)
	s.mu.Lock()
	s.invokes = invokes
	s.mu.Unlock()
	if s.send(&message{Kind: kindResult, Result: res}) != nil {
		return
	}
	overLimit := func() bool {
		var mem *protocol.MemoryLimitError
		return errors.As(context.Cause(ctx), &mem)
	}
	for {
		select {
		case m := <-invokes:
			inv := kept.Invoke(*m.OutboundRequest)
			ans := &message{Kind: kindInvokeAnswer, ID: m.ID, Err: inv.Err, HasErr: inv.HasErr, Ended: inv.Ended}
			if !inv.HasErr {
				ans.OutboundResponse = &inv.Response
			}
			if inv.Ended {
				ans.OverLimit = overLimit()
			}
			if err := s.send(ans); errors.Is(err, errFrameTooLarge) {
				_ = s.send(&message{Kind: kindInvokeAnswer, ID: m.ID, HasErr: true, Err: sandbox.InternalErrorText})
			}
			if inv.Ended {
				return
			}
		case <-kept.Done():
			_ = s.send(&message{Kind: kindEnded, Err: kept.EndText(), HasErr: true, Ended: true, OverLimit: overLimit()})
			return
		}
	}
}

// runProtected calls the run function, turning a Go panic that escaped it
// into an exit: the runtime's state is unknown, so the parent replaces the
// worker and reports WORKER_CRASHED.
func (s *workerServer) runProtected(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult {
	defer func() {
		if r := recover(); r != nil {
			os.Stderr.WriteString("worker: run panicked\n")
			os.Exit(exitRunPanic)
		}
	}()
	res := s.run(ctx, job, host)
	if res == nil {
		res = &protocol.ExecuteResult{}
	}
	return res
}

// heapWatch is one run's heap watchdog: every heapPoll it reads the heap
// and cancels the run with the memory text once the heap passes the run's
// limit (limitMB: the job's, which may be below the worker's), confirmed
// after a collection so garbage alone never trips it. It runs from a timer,
// so a run shorter than heapPoll costs no goroutine and no wake-up.
type heapWatch struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	fired   bool
}

func (s *workerServer) watchHeap(cancel context.CancelCauseFunc, limitMB int) *heapWatch {
	limit := s.heapBase + uint64(limitMB)<<20
	w := &heapWatch{}
	check := func() {
		over := heapObjects() > limit
		if over {
			runtime.GC()
			over = heapObjects() > limit
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case w.stopped:
		case over:
			w.fired = true
			cancel(protocol.NewMemoryLimitError(limitMB))
		default:
			w.timer.Reset(heapPoll)
		}
	}
	w.mu.Lock()
	w.timer = time.AfterFunc(heapPoll, check)
	w.mu.Unlock()
	return w
}

// stop ends the watch and reports whether it cancelled the run.
func (w *heapWatch) stop() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
	return w.fired
}

func (s *workerServer) send(m *message) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.out.write(m, maxWorkerFrame)
}

// call sends one host call and waits for its answer or for ctx.
func (s *workerServer) call(ctx context.Context, m *message) (*message, error) {
	ch := make(chan *message, 1)
	id, err := s.start(m, func(a *message) { ch <- a })
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
func (s *workerServer) start(m *message, answer func(*message)) (uint64, error) {
	s.mu.Lock()
	s.nextID++
	m.ID = s.nextID
	s.pending[m.ID] = answer
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
// parent has moved on, and the call must not reach the next run's host.
var errRunFinished = errors.New(protocol.CompletedText)

// workerHost is the sandbox's Host inside a worker: every call crosses the
// pipe to the parent, which calls the request's functions.
type workerHost struct {
	s    *workerServer
	mu   sync.Mutex
	done bool
}

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
	a, err := h.s.call(ctx, &message{Kind: kindDispatch, Provider: provider, Tool: tool, Args: argsJSON})
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
	id, err := h.s.start(&message{Kind: kindDispatch, Provider: provider, Tool: tool, Args: argsJSON}, func(a *message) {
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

func dispatchAnswer(a *message) (string, error) {
	if a.Kind != kindDispatchAnswer {
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
	a, err := h.s.call(ctx, &message{Kind: kindOutbound, OutboundRequest: &req})
	if err != nil {
		return protocol.OutboundResponse{}, err
	}
	if a.Kind != kindOutboundAnswer {
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

var heapSample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
var heapSampleMu sync.Mutex

// heapObjects is the bytes of heap objects, live and not yet swept.
func heapObjects() uint64 {
	heapSampleMu.Lock()
	defer heapSampleMu.Unlock()
	metrics.Read(heapSample)
	return heapSample[0].Value.Uint64()
}

// totalRuntimeMemory is every byte the Go runtime has mapped for itself.
func totalRuntimeMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
