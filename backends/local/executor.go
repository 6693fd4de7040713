package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/webplatform"
	"github.com/supolka/codemode-gateway/protocol"
)

// Defaults of Options.
const (
	// DefaultQueueBound is how many executions may wait for a worker.
	DefaultQueueBound = 64
	// DefaultMaxRunsPerWorker replaces a worker after this many runs, so
	// that whatever a long-lived process accumulates (fragmented heap,
	// runtime caches) never builds up.
	DefaultMaxRunsPerWorker = 1000
	// DefaultKillGrace is how long past a deadline the parent waits for
	// the worker's own report before it kills the worker.
	DefaultKillGrace = 500 * time.Millisecond
	// DefaultStartTimeout bounds a worker's start, ready frame included.
	DefaultStartTimeout = 10 * time.Second
	// DefaultAddressSpaceHeadroomMB is RLIMIT_AS's allowance above the
	// worker's address space at start plus the memory limit. The Go
	// runtime reserves its heap in 64 MiB arenas and maps GC metadata
	// beside them, so a run legitimately near the limit needs a few
	// arenas of headroom; see docs/local-executor.md for the measurement.
	DefaultAddressSpaceHeadroomMB = 256
	// DefaultRSSHeadroomMB is the parent's RSS poll allowance above the
	// worker's RSS at start plus the memory limit.
	DefaultRSSHeadroomMB = 64
)

// monitorPoll is how often the parent reads a busy worker's RSS and
// advances its run clock. A read of /proc/PID/statm costs about 13 µs.
const monitorPoll = 10 * time.Millisecond

// Host calls of one execution: at most maxOpenHostCalls run at once in the
// parent, at most maxHostBacklog more wait; a call past both is refused.
const (
	maxOpenHostCalls = 256
	maxHostBacklog   = 4096
)

// Options configures an Executor. Every zero field takes its default.
type Options struct {
	// PoolSize is the number of worker processes, each running one
	// execution at a time. Default: the number of CPUs.
	PoolSize int
	// QueueBound is how many executions may wait for a free worker; one
	// more fails at once with QUEUE_OVERFLOW. Zero takes
	// DefaultQueueBound; a negative value allows no waiting at all.
	QueueBound int
	// MemoryLimitMB is each run's memory limit. Default:
	// protocol.DefaultMemoryLimitMB.
	MemoryLimitMB int
	// DefaultTimeoutMs is the run bound of a request that sets none.
	// Default: protocol.DefaultTimeout; capped at MaxSupportedTimeout.
	DefaultTimeoutMs int64
	// CountHostWaits is the default of the request field of that name.
	CountHostWaits bool
	// HandlesIdleTimeout is the idle bound of retained executions: one
	// nobody invokes for that long is closed and its worker retired.
	// Default: protocol.DefaultHandlesIdleTimeout milliseconds.
	HandlesIdleTimeout time.Duration
	// MaxRunsPerWorker replaces a worker after that many executions.
	// Default: DefaultMaxRunsPerWorker.
	MaxRunsPerWorker int
	// WorkerCommand is the program and arguments a worker runs. It must
	// call RunWorkerIfRequested first thing. Default: this executable.
	WorkerCommand []string
	// WorkerEnv is added to a worker's environment ("NAME=value"). A
	// worker inherits nothing else of the gateway's environment but TZ,
	// ZONEINFO, SSL_CERT_FILE, SSL_CERT_DIR, GODEBUG and GOMAXPROCS, so
	// that no secret there reaches the process that runs guest code.
	WorkerEnv []string
	// IsolateTenants keeps every worker process to one tenant
	// (ExecuteRequest.Tenant): a worker that ran one tenant's execution
	// never runs another's. A request for a tenant with no idle worker of
	// its own takes a fresh one, or a worker of another tenant is replaced
	// by a fresh process first, which costs a process start.
	IsolateTenants bool
	// KillGrace: past a run's deadline, or past a cancellation, the parent
	// waits this long for the worker before killing it. Default:
	// DefaultKillGrace.
	KillGrace time.Duration
	// StartTimeout bounds a worker's start. Default: DefaultStartTimeout.
	StartTimeout time.Duration
	// AddressSpaceHeadroomMB is RLIMIT_AS's headroom, see
	// DefaultAddressSpaceHeadroomMB. Negative disables the rlimit.
	AddressSpaceHeadroomMB int
	// RSSHeadroomMB is the RSS poll's headroom, see DefaultRSSHeadroomMB.
	RSSHeadroomMB int
	// Logger receives worker crashes with their stderr. Default:
	// slog.Default().
	Logger *slog.Logger
	// Native configures fetch in the native mode (a request that left
	// outbound absent): Vetoed is the operator's veto (no network at all),
	// and the deny list, response cap, redirect policy and per-request
	// timeout apply otherwise. The zero value allows native fetch with
	// webplatform.DefaultDeny.
	Native webplatform.NativeOptions
}

// withDefaults validates o and fills every zero field.
func (o Options) withDefaults() (Options, error) {
	if o.PoolSize < 0 || o.MemoryLimitMB < 0 || o.DefaultTimeoutMs < 0 || o.MaxRunsPerWorker < 0 ||
		o.KillGrace < 0 || o.StartTimeout < 0 || o.HandlesIdleTimeout < 0 || o.RSSHeadroomMB < 0 {
		return o, errors.New("local: negative option")
	}
	if o.PoolSize == 0 {
		o.PoolSize = runtime.NumCPU()
	}
	switch {
	case o.QueueBound == 0:
		o.QueueBound = DefaultQueueBound
	case o.QueueBound < 0:
		o.QueueBound = 0
	}
	if o.MemoryLimitMB == 0 {
		o.MemoryLimitMB = protocol.DefaultMemoryLimitMB
	}
	if o.DefaultTimeoutMs == 0 {
		o.DefaultTimeoutMs = protocol.DefaultTimeout
	}
	o.DefaultTimeoutMs = min(o.DefaultTimeoutMs, protocol.MaxSupportedTimeout)
	if o.HandlesIdleTimeout == 0 {
		o.HandlesIdleTimeout = protocol.DefaultHandlesIdleTimeout * time.Millisecond
	}
	if o.MaxRunsPerWorker == 0 {
		o.MaxRunsPerWorker = DefaultMaxRunsPerWorker
	}
	if len(o.WorkerCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("local: find this executable for the worker command: %w", err)
		}
		o.WorkerCommand = []string{exe}
	}
	o.WorkerCommand = append([]string(nil), o.WorkerCommand...)
	o.WorkerEnv = append([]string(nil), o.WorkerEnv...)
	if o.KillGrace == 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	switch {
	case o.AddressSpaceHeadroomMB == 0:
		o.AddressSpaceHeadroomMB = DefaultAddressSpaceHeadroomMB
	case o.AddressSpaceHeadroomMB < 0:
		o.AddressSpaceHeadroomMB = 0
	}
	if o.RSSHeadroomMB == 0 {
		o.RSSHeadroomMB = DefaultRSSHeadroomMB
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Executor runs programs in a pool of worker processes. It implements
// protocol.Executor and is safe for concurrent use.
type Executor struct {
	opts Options

	slots   chan struct{}  // one token per busy worker
	idle    chan *process  // warm workers nobody is using
	closing chan struct{}  // closed by Close
	bg      sync.WaitGroup // background spawns

	stats stats

	mu      sync.Mutex
	closed  bool
	waiting int
	live    int                   // processes alive or being started
	all     map[*process]struct{} // every live worker, for Close
	handles map[string]*held      // retained executions by executionId
	holders sync.WaitGroup        // their holder goroutines, for Close
}

var _ protocol.Executor = (*Executor)(nil)

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
		slots:   make(chan struct{}, o.PoolSize),
		idle:    make(chan *process, o.PoolSize),
		closing: make(chan struct{}),
		all:     make(map[*process]struct{}),
		handles: make(map[string]*held),
	}
	for range o.PoolSize {
		e.refill()
	}
	return e, nil
}

// Options returns the options in effect, defaults filled in.
func (e *Executor) Options() Options { return e.opts }

// Execute runs one program on a worker of the pool. Declared failures (the
// timeout, the memory limit, anything the program threw) come back inside
// the result; faults come back as errors carrying a protocol.Code:
// QUEUE_OVERFLOW, WORKER_CRASHED, CONNECTION_BROKEN. A cancelled ctx ends
// the run and returns ctx's cause.
func (e *Executor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	if req == nil {
		return nil, protocol.NewFault(protocol.CodeInternal, "The execute request is missing.")
	}
	if e.isClosed() {
		return nil, brokenFault()
	}
	job, err := e.jobFor(req)
	if err != nil {
		return failure(err.Error()), nil
	}
	if err := e.acquire(ctx); err != nil {
		return nil, err
	}
	handedOff := false // a grant's holder took the slot and the worker
	defer func() {
		if !handedOff {
			<-e.slots
		}
	}()

	p, err := e.take(ctx, req.Tenant)
	if err != nil {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		if e.isClosed() {
			return nil, brokenFault()
		}
		e.stats.workersCrashed.Add(1)
		e.opts.Logger.Warn("local executor: worker did not start", "err", err)
		return nil, crashedFault("The worker process for this execution did not start.")
	}
	if e.opts.IsolateTenants {
		p.served, p.tenant = true, req.Tenant
	}
	res, reusable, err := e.runOn(ctx, p, req, job)
	if err == nil && len(res.Handles) > 0 {
		if !req.RetainHandles || !e.hold(p, req, job, res) {
			// A grant nobody asked for, or one the closing executor cannot
			// keep: the worker holds a live session, so it is retired.
			e.giveBack(p, false)
			if e.isClosed() {
				return nil, brokenFault()
			}
			return nil, crashedFault("The worker granted handles it could not keep.")
		}
		handedOff = true
		return res, nil
	}
	if res != nil {
		res.ExecutionID, res.Handles = "", nil
	}
	e.giveBack(p, reusable)
	return res, err
}

// acquire takes a worker slot, waiting in the bounded queue if none is
// free. The queue never ends a running execution: past its bound the new
// request is the one refused.
func (e *Executor) acquire(ctx context.Context) error {
	if e.isClosed() {
		return brokenFault()
	}
	select {
	case e.slots <- struct{}{}:
		return nil
	default:
	}
	e.mu.Lock()
	if e.waiting >= e.opts.QueueBound {
		e.mu.Unlock()
		e.stats.queueOverflows.Add(1)
		return protocol.NewQueueOverflowError(e.opts.QueueBound, 100*time.Millisecond)
	}
	e.waiting++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.waiting--
		e.mu.Unlock()
	}()
	select {
	case e.slots <- struct{}{}:
		if e.isClosed() {
			<-e.slots
			return brokenFault()
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-e.closing:
		return brokenFault()
	}
}

// take returns a warm worker, or starts one. The pool never holds more
// than PoolSize processes, counting those being started: when the budget is
// spent, a process is on its way to the idle set (a background start, or a
// worker another execution is handing back), so take waits for it. With
// IsolateTenants it never returns a worker that ran another tenant's
// execution: it prefers one of tenant's, then a fresh one, and else
// replaces one of another tenant's with a fresh process.
func (e *Executor) take(ctx context.Context, tenant string) (*process, error) {
	// startFresh: a worker of another tenant was retired to make room, so
	// start one with its budget rather than take (and perhaps retire)
	// another idle one.
	startFresh := false
	for {
		if !startFresh {
			select {
			case p := <-e.idle:
				p, retired := e.fit(p, tenant)
				if p != nil {
					return p, nil
				}
				if !retired {
					continue
				}
			default:
			}
		}
		startFresh = false
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, errExecutorClosed
		}
		if e.live < e.opts.PoolSize {
			e.live++
			e.mu.Unlock()
			return e.spawnTracked()
		}
		e.mu.Unlock()
		// A background start that fails gives its budget back without
		// touching idle, so look again now and then.
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case p := <-e.idle:
			t.Stop()
			p, retired := e.fit(p, tenant)
			if p != nil {
				return p, nil
			}
			startFresh = retired
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-e.closing:
			t.Stop()
			return nil, errExecutorClosed
		}
	}
}

// fit returns p, taken from the idle set, if it may run tenant's
// execution, or a better idle worker. Otherwise it returns nil and has
// dealt with p: a dead one is forgotten; under IsolateTenants, a worker of
// another tenant, with no better one idle, is retired (retired: true) so
// that take starts a fresh process with its budget.
func (e *Executor) fit(p *process, tenant string) (_ *process, retired bool) {
	if !p.alive() {
		e.forget(p)
		return nil, false
	}
	if !e.opts.IsolateTenants || !p.served || p.tenant == tenant {
		return p, false
	}
	// Look through the rest of the idle set for one of this tenant's
	// workers, else a fresh one; put the others back (idle has room: it
	// holds PoolSize and these came out of it).
	var others []*process
	var best *process
	for best == nil {
		select {
		case q := <-e.idle:
			switch {
			case !q.alive():
				e.forget(q)
			case q.served && q.tenant == tenant:
				best = q
			default:
				others = append(others, q)
			}
			continue
		default:
		}
		break
	}
	if best == nil {
		for i, q := range others {
			if !q.served {
				best = q
				others = append(others[:i], others[i+1:]...)
				break
			}
		}
	}
	for _, q := range others {
		e.idle <- q
	}
	if best != nil {
		e.idle <- p
		return best, false
	}
	e.retire(p)
	return nil, true
}

var errExecutorClosed = errors.New("executor closed")

// spawnTracked starts a worker, its budget already counted in live, and
// registers it for Close. A failed start gives the budget back.
func (e *Executor) spawnTracked() (*process, error) {
	p, err := spawn(&e.opts)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.live--
		return nil, err
	}
	if e.closed {
		e.live--
		p.kill(killClosed)
		return nil, errExecutorClosed
	}
	e.all[p] = struct{}{}
	e.stats.workersStarted.Add(1)
	return p, nil
}

// giveBack returns a healthy worker to the idle set, or retires it and
// warms a replacement.
func (e *Executor) giveBack(p *process, reusable bool) {
	if reusable && p.runs < e.opts.MaxRunsPerWorker && p.killedFor() == killNone && p.alive() && !e.isClosed() {
		e.idle <- p // never blocks: idle holds PoolSize and live <= PoolSize
		return
	}
	e.retire(p)
	e.refill()
}

// refill warms one worker in the background if the budget allows and the
// executor is open.
func (e *Executor) refill() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.live >= e.opts.PoolSize {
		return
	}
	e.live++
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		p, err := e.spawnTracked()
		if err != nil {
			if !e.isClosed() {
				e.opts.Logger.Warn("local executor: warming a worker failed", "err", err)
			}
			return
		}
		e.idle <- p
	}()
}

// retire stops p and gives its budget back.
func (e *Executor) retire(p *process) {
	p.retire()
	e.forget(p)
}

// forget drops a process that is gone or going from the books.
func (e *Executor) forget(p *process) {
	e.mu.Lock()
	if _, ok := e.all[p]; ok {
		delete(e.all, p)
		e.live--
	}
	e.mu.Unlock()
}

func (e *Executor) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// nativeFor is the executor's native-fetch settings with a request's extra
// denied ranges added. They bind even inside the executor's allow list:
// the allow list carves exceptions out of the executor's own deny list,
// never out of the request's.
func nativeFor(own webplatform.NativeOptions, deny []netip.Prefix) webplatform.NativeOptions {
	if len(deny) == 0 {
		return own
	}
	n := own
	n.DenyAlways = append(append([]netip.Prefix(nil), own.DenyAlways...), deny...)
	return n
}

// memoryLimit is a request's own lower limit, else the executor's.
func memoryLimit(requested, own int) int {
	if requested > 0 && requested < own {
		return requested
	}
	return own
}

// jobFor resolves a request against the executor's defaults. A timeout
// that is no bound (NaN, zero, negative) and a module map the rules refuse
// are declared failures; the map is checked here, before it has to cross
// the pipe, because a kind outside the five has no wire form.
func (e *Executor) jobFor(req *protocol.ExecuteRequest) (sandbox.Job, error) {
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
		MemoryLimitMB:  memoryLimit(req.MemoryLimitMB, e.opts.MemoryLimitMB),
		OutboundMode:   req.Outbound.Mode(),
		Native:         nativeFor(e.opts.Native, req.NativeDeny),
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
	e.mu.Unlock()

	e.bg.Wait() // no spawn is in flight after this
	e.mu.Lock()
	procs := make([]*process, 0, len(e.all))
	for p := range e.all {
		procs = append(procs, p)
	}
	e.all = map[*process]struct{}{}
	e.mu.Unlock()
	for _, p := range procs {
		p.kill(killClosed)
	}
	for _, p := range procs {
		<-p.exited
	}
	e.holders.Wait()
	return nil
}

// Stats counts what the pool has done since New, for metrics and tests.
type Stats struct {
	WorkersStarted int64 // worker processes that became ready
	WorkersCrashed int64 // executions failed with WORKER_CRASHED
	TimeoutKills   int64 // workers killed by the parent's run clock
	RSSKills       int64 // workers killed by the parent's RSS poll
	OutOfMemory    int64 // workers whose runtime died refusing an allocation (RLIMIT_AS)
	HeapLimits     int64 // runs the in-worker heap watchdog ended
	QueueOverflows int64 // executions refused at the queue bound
	HandlesGranted int64 // executions that retained their handles
	HandlesExpired int64 // retained executions closed at the idle bound

	// Gauges, as they are at the moment of the call.
	WorkersAlive int // worker processes alive or being started
	Busy         int // workers running an execution or holding handles
	Queued       int // executions waiting for a worker
}

type stats struct {
	workersStarted, workersCrashed, timeoutKills, rssKills, outOfMemory, heapLimits, queueOverflows atomic.Int64
	handlesGranted, handlesExpired                                                                  atomic.Int64
}

// Stats returns the pool's counters and gauges.
func (e *Executor) Stats() Stats {
	e.mu.Lock()
	live, waiting := e.live, e.waiting
	e.mu.Unlock()
	s := &e.stats
	return Stats{
		WorkersStarted: s.workersStarted.Load(),
		WorkersCrashed: s.workersCrashed.Load(),
		TimeoutKills:   s.timeoutKills.Load(),
		RSSKills:       s.rssKills.Load(),
		OutOfMemory:    s.outOfMemory.Load(),
		HeapLimits:     s.heapLimits.Load(),
		QueueOverflows: s.queueOverflows.Load(),
		HandlesGranted: s.handlesGranted.Load(),
		HandlesExpired: s.handlesExpired.Load(),
		WorkersAlive:   live,
		Busy:           len(e.slots),
		Queued:         waiting,
	}
}

func brokenFault() error {
	return protocol.NewFault(protocol.CodeConnectionBroken, "The executor was closed; create a new one to run more executions.")
}

func crashedFault(msg string) error {
	return protocol.NewFault(protocol.CodeWorkerCrashed, msg)
}
