package local

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
)

// Executor runs programs in a pool of worker processes, each kept to one
// tenant and hosting many of its executions. It implements
// protocol.PolicyExecutor and is safe for concurrent use.
type Executor struct {
	opts Options

	closing chan struct{} // closed by Close
	bg      sync.WaitGroup
	holders sync.WaitGroup // goroutines of retained executions
	nextRun atomic.Uint64
	stats   stats

	mu      sync.Mutex
	closed  bool
	pool    pool
	handles map[string]*held // retained executions by executionId

	// placed, when a test sets it, runs between placing a run on a worker
	// and sending it the job.
	placed func(*worker)
}

var _ protocol.PolicyExecutor = (*Executor)(nil)

// New builds an executor and starts warming its workers in the background.
// It does not wait for them: a worker command that cannot start shows up
// as WORKER_CRASHED on the executions that needed it, and in the log.
func New(opts Options) (*Executor, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Executor{
		opts:    o,
		closing: make(chan struct{}),
		handles: make(map[string]*held),
	}
	e.pool.init(o.QueueBound)
	e.mu.Lock()
	e.balanceLocked()
	e.mu.Unlock()
	e.bg.Add(1)
	go e.janitor()
	return e, nil
}

// Options returns the options in effect, defaults filled in.
func (e *Executor) Options() Options { return e.opts }

// Execute implements protocol.Executor: ExecuteWith with no policy, as
// the tenant "".
func (e *Executor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return e.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith runs one program on a worker of p's tenant, under p's lower
// memory limit and extra denied ranges, and calls p.HandlesClosed when a
// retained execution closes. Declared failures (the timeout, the memory
// limit, anything the program threw) come back inside the result; faults
// come back as errors carrying a protocol.Code: QUEUE_OVERFLOW,
// WORKER_CRASHED, CONNECTION_BROKEN. A cancelled ctx ends the run and
// returns ctx's cause.
func (e *Executor) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	if req == nil {
		return nil, protocol.NewFault(protocol.CodeInternal, "The execute request is missing.")
	}
	if e.isClosed() {
		return nil, brokenFault()
	}
	job, err := e.jobFor(req, p)
	if err != nil {
		return failure(err), nil
	}
	queued := time.Now()
	var r *run
	var wait time.Duration
	// A run placed on a worker that died before the job reached it is
	// placed once more: nothing ran, so the caller need not see the crash.
	for attempt := 0; ; attempt++ {
		w, err := e.acquire(ctx, p.Tenant)
		if err != nil {
			return nil, err
		}
		wait = time.Since(queued)
		e.traceStart(ctx, w, wait)
		r = e.newRun(ctx, w, req, job)
		r.handlesClosed = p.HandlesClosed
		r.usageAfter = p.Usage
		if e.placed != nil {
			e.placed(w)
		}
		err = w.start(r)
		if err == nil {
			break
		}
		ns, again := err.(notStartedError)
		if !again {
			return nil, err
		}
		if attempt > 0 {
			return nil, ns.error
		}
	}
	res, err := e.await(ctx, r)
	if res != nil {
		res.QueueWait = wait
		if telemetry.Recording(ctx) {
			telemetry.Execution(ctx, telemetry.RunClockMs.Float64(telemetry.Ms(res.RunClock)))
			telemetry.NativeRequests(ctx, res.NativeRequests)
		}
	}
	return res, err
}

// await waits for r's outcome, or for the caller to give up: then the run
// is cancelled in its worker and keeps its place there until it stops.
func (e *Executor) await(ctx context.Context, r *run) (*protocol.ExecuteResult, error) {
	select {
	case out := <-r.done:
		return e.settle(r, out)
	case <-ctx.Done():
		if r.abandon() {
			return nil, context.Cause(ctx)
		}
		return e.settle(r, <-r.done)
	}
}

// settle turns a run's outcome into Execute's answer; a run granted handles
// becomes a retained execution.
func (e *Executor) settle(r *run, out runOutcome) (*protocol.ExecuteResult, error) {
	if out.err != nil {
		return nil, out.err
	}
	res := out.res
	if r.granted {
		if e.hold(r, res) {
			return res, nil
		}
		r.w.release(r)
		if e.isClosed() {
			return nil, brokenFault()
		}
		return nil, crashedFault("The worker granted handles it could not keep.")
	}
	res.ExecutionID, res.Handles = "", nil
	return res, nil
}

func (e *Executor) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// memoryLimit is a request's own lower limit, else the executor's.
func memoryLimit(requested, own int) int {
	if requested > 0 && requested < own {
		return requested
	}
	return own
}

// jobFor resolves a request and its policy against the executor's
// defaults. A timeout that is no bound (NaN, zero, negative) and a module
// map the rules refuse are declared failures; the map is checked here,
// before it has to cross the pipe, because a kind outside the five has no
// wire form.
func (e *Executor) jobFor(req *protocol.ExecuteRequest, p protocol.Policy) (sandbox.Job, error) {
	timeout, err := protocol.ResolveTimeout(req.Timeout, e.opts.DefaultTimeoutMs, 0)
	if err != nil {
		return sandbox.Job{}, err
	}
	modules, err := protocol.NormalizeModuleMap(req.Modules)
	if err != nil {
		return sandbox.Job{}, err
	}
	return sandbox.Job{
		Code:           req.Code,
		Providers:      req.Providers,
		HasDispatch:    req.Dispatch != nil,
		Modules:        modules,
		TimeoutMs:      timeout,
		CountHostWaits: protocol.ResolveCountHostWaits(req.CountHostWaits, e.opts.CountHostWaits),
		MemoryLimitMB:  memoryLimit(p.MemoryLimitMB, e.opts.MemoryLimitMB),
		OutboundMode:   req.Outbound.Mode(),
		Native:         e.opts.nativeFor(p.Tenant).forJob(p.NativeDeny),
		RetainHandles:  req.RetainHandles,
	}, nil
}

// Close stops every worker. Executions still running end with
// CONNECTION_BROKEN, and so does every later call. Close waits until every
// worker process has been reaped.
func (e *Executor) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	close(e.closing)
	waiters := e.pool.dropWaitersLocked()
	e.mu.Unlock()
	for _, wt := range waiters {
		wt.fail(brokenFault())
	}

	e.bg.Wait() // no spawn is in flight after this
	e.mu.Lock()
	workers := e.pool.allLocked()
	e.mu.Unlock()
	for _, w := range workers {
		w.p.kill(killClosed)
	}
	for _, w := range workers {
		<-w.watched
	}
	e.holders.Wait()
	return nil
}

// retryHint is how long a refused execution should wait: about the time a
// run in flight takes to finish, as the pool has seen lately.
func (e *Executor) retryHint() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pool.retryHintLocked()
}

func brokenFault() error {
	return protocol.NewFault(protocol.CodeConnectionBroken, "The executor was closed; create a new one to run more executions.")
}

func crashedFault(msg string) error {
	return protocol.NewFault(protocol.CodeWorkerCrashed, msg)
}

// failure is a result envelope carrying the declared failure err: its
// text, and the kind its type is.
func failure(err error) *protocol.ExecuteResult {
	return &protocol.ExecuteResult{Error: err.Error(), HasError: true, Failure: protocol.FailureOf(err), Logs: []protocol.LogLine{}}
}
