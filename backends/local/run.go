package local

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/queue"
	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// run is the parent's side of one execution on a worker, from its job
// frame until its last frame: its result, or, when it retained its
// handles, the end of its session.
type run struct {
	id  uint64
	w   *worker
	req *protocol.ExecuteRequest
	job sandbox.Job

	// runCtx ends when the run settles or its caller gives up: a tool call
	// still in flight then is cancelled, not leaked. heldCtx ends when a
	// retained session does; the handler's stub-mode fetches run under it.
	runCtx     context.Context
	runCancel  context.CancelFunc
	heldCtx    context.Context
	heldCancel context.CancelFunc

	// hog: the worker reported the run computing past its slice; guarded
	// by w.mu.
	hog bool

	done  chan runOutcome // buffered: the outcome, once
	state atomic.Int32    // runRunning, runSettled or runAbandoned
	// cancelledAt is when the caller gave up (wire.MonoNow), 0 before.
	cancelledAt atomic.Int64
	start       time.Time

	// open counts the host calls in flight in the parent; calls admits
	// maxOpenHostCalls of them to the host at once, maxHostBacklog more
	// wait their turn, and refuses a call past both.
	open  atomic.Int32
	mu    sync.Mutex
	calls queue.Bounded[*hostCall] // guarded by mu
	// toolCalls counts the tool calls the run made, for its usage.
	toolCalls atomic.Int32

	// Set by the worker's watcher: the run settled to a fetch handler and
	// its session lives on (granted), and then the retained execution
	// (held) once Execute kept it.
	granted bool
	held    atomic.Pointer[held]
	// handlesClosed is the caller's Policy.HandlesClosed, called when the
	// retained execution closes.
	handlesClosed func(executionID string)
	// usageAfter is the caller's Policy.Usage; billedCPU is the CPU the
	// worker had reported for the run when it was last billed (the watcher
	// alone touches it).
	usageAfter func(*protocol.Usage)
	// buried is set once died settled the run.
	buried     atomic.Bool
	billedCPU  time.Duration
	usageQueue serial
}

const (
	runRunning int32 = iota
	runSettled
	runAbandoned
)

// runOutcome is what Execute returns for a run.
type runOutcome struct {
	res *protocol.ExecuteResult
	err error
}

func (e *Executor) newRun(ctx context.Context, w *worker, req *protocol.ExecuteRequest, job sandbox.Job) *run {
	r := &run{
		id:    e.nextRun.Add(1),
		w:     w,
		req:   req,
		job:   job,
		done:  make(chan runOutcome, 1),
		calls: queue.New[*hostCall](maxOpenHostCalls, maxHostBacklog),
		start: time.Now(),
	}
	r.runCtx, r.runCancel = context.WithCancel(ctx)
	r.heldCtx, r.heldCancel = context.WithCancel(context.WithoutCancel(ctx))
	return r
}

// settle hands the outcome to Execute, unless the caller gave up first; it
// reports whether Execute took it.
func (r *run) settle(out runOutcome) bool {
	if !r.state.CompareAndSwap(runRunning, runSettled) {
		return false
	}
	r.done <- out
	return true
}

// abandon records that the caller gave up and tells the worker to stop the
// run; false when the outcome is already on its way to the caller.
func (r *run) abandon() bool {
	if !r.state.CompareAndSwap(runRunning, runAbandoned) {
		return false
	}
	r.w.abandoned.Add(1)
	r.cancelledAt.Store(wire.MonoNow())
	r.runCancel()
	if r.w.p.send(&wire.Message{Kind: wire.KindCancel, Run: r.id}) != nil {
		r.w.kill(killProtocol, 0)
	}
	return true
}

// billRetained reports, through the caller's Policy.Usage, what a retained
// run used since it was last billed: m is an invocation's answer or the
// session's end, carrying the worker's figures.
func (r *run) billRetained(m *wire.Message) {
	cpu := time.Duration(m.CPUNanos)
	u := &protocol.Usage{RunClock: time.Duration(m.ClockNanos), CPU: max(0, cpu-r.billedCPU), PeakHeapBytes: m.PeakHeap}
	r.billedCPU = max(r.billedCPU, cpu)
	if r.usageAfter != nil && (u.RunClock > 0 || u.CPU > 0) {
		r.usageQueue.add(func() { r.usageAfter(u) })
	}
}

// serial runs functions one at a time, in the order they were added, on a
// goroutine of its own: a caller's hook never holds up the worker's watcher
// and sees what it is told in order.
type serial struct {
	mu      sync.Mutex
	pending []func()
	running bool
}

func (q *serial) add(fn func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, fn)
	if !q.running {
		q.running = true
		go q.drain()
	}
}

func (q *serial) drain() {
	for {
		q.mu.Lock()
		if len(q.pending) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		fn := q.pending[0]
		q.pending = q.pending[1:]
		q.mu.Unlock()
		func() {
			defer func() { _ = recover() }() // a caller's hook that panics is its own
			fn()
		}()
	}
}

// hostCall is one dispatch or outbound frame of the run and the context
// it is served under.
type hostCall struct {
	m   *wire.Message
	ctx context.Context
}

// hostCall serves one dispatch or outbound frame of the run: tool calls
// during the run go to the request's dispatch; after a grant they get the
// completed text (dispatch belongs to the run that ended), and stub-mode
// fetches of the handler go to the request's outbound function until the
// handles close.
func (r *run) hostCall(m *wire.Message, afterGrant bool) {
	if r.open.Add(1) == 1 {
		r.w.parked.Add(1)
	}
	c := &hostCall{m: m, ctx: r.runCtx}
	switch {
	case afterGrant && m.Kind == wire.KindDispatch:
		go r.answer(&hostCall{m: m, ctx: r.heldCtx}, answerCompleted)
		return
	case afterGrant:
		c.ctx = r.heldCtx
	case m.Kind == wire.KindDispatch:
		r.toolCalls.Add(1)
	}
	r.mu.Lock()
	start, ok := r.calls.Add(c)
	r.mu.Unlock()
	switch {
	case !ok:
		go r.answer(c, refuseHostCall)
	case start:
		go r.serveHostCalls(c)
	}
}

// answer answers c without the host.
func (r *run) answer(c *hostCall, answer func(context.Context, *process, *wire.Message)) {
	answer(c.ctx, r.w.p, c.m)
	r.callDone()
}

// serveHostCalls serves c, then each call that waited for its slot; one
// whose context ended while it waited is answered as cancelled.
func (r *run) serveHostCalls(c *hostCall) {
	for ok := true; ok; {
		if c.ctx.Err() != nil {
			r.answerCancelled(c.ctx, c.m)
		} else {
			serveHostCall(c.ctx, r.w.p, r.req, c.m)
		}
		r.callDone()
		r.mu.Lock()
		c, ok = r.calls.Done()
		r.mu.Unlock()
	}
}

// callDone counts one host call of the run answered.
func (r *run) callDone() {
	if r.open.Add(-1) == 0 {
		r.w.parked.Add(-1)
	}
}

// answerCancelled answers a call whose context ended before it reached the
// host: a run that may retain its session still counts it as open, so it
// gets its answer.
func (r *run) answerCancelled(ctx context.Context, m *wire.Message) {
	if !r.req.RetainHandles {
		return
	}
	_ = r.w.p.send(&wire.Message{Kind: answerKind(m.Kind), ID: m.ID, HasErr: true, Err: context.Cause(ctx).Error()})
}

// serveHostCall calls the request's dispatch or outbound function for one
// frame and sends the answer back.
func serveHostCall(ctx context.Context, p *process, req *protocol.ExecuteRequest, m *wire.Message) {
	ans := answerFor(ctx, req, m)
	// A run that may retain its session still has the call open inside it
	// after it settles: it gets its (cancelled) answer, so the sandbox's
	// count of open host calls stays true for the invocations.
	if ctx.Err() == nil || req.RetainHandles {
		if err := p.send(ans); errors.Is(err, wire.ErrFrameTooLarge) {
			_ = p.send(&wire.Message{Kind: ans.Kind, ID: m.ID, HasErr: true,
				Err: protocol.NewHostAnswerTooLargeError().Error()})
		}
	}
}

// refuseHostCall answers a call past the in-flight bound with an error.
func refuseHostCall(ctx context.Context, p *process, m *wire.Message) {
	if ctx.Err() == nil {
		_ = p.send(&wire.Message{Kind: answerKind(m.Kind), ID: m.ID, HasErr: true,
			Err: protocol.NewHostCallBacklogError(maxOpenHostCalls + maxHostBacklog).Error()})
	}
}

// answerCompleted answers a tool call that reached the parent after the
// run settled with the completed text, without calling the host.
func answerCompleted(ctx context.Context, p *process, m *wire.Message) {
	if ctx.Err() == nil {
		_ = p.send(&wire.Message{Kind: wire.KindDispatchAnswer, ID: m.ID, Answer: protocol.ErrorEnvelope(protocol.CompletedText)})
	}
}

func answerKind(kind wire.Kind) wire.Kind {
	if kind == wire.KindOutbound {
		return wire.KindOutboundAnswer
	}
	return wire.KindDispatchAnswer
}

// answerFor runs the caller's function for one host-call frame. A panic in
// the caller's function becomes an error answer, never a crash of the
// gateway.
func answerFor(ctx context.Context, req *protocol.ExecuteRequest, m *wire.Message) (ans *wire.Message) {
	ans = &wire.Message{ID: m.ID}
	defer func() {
		if r := recover(); r != nil {
			ans.Answer, ans.OutboundResponse = "", nil
			ans.HasErr, ans.Err = true, "The host function failed."
		}
	}()
	switch m.Kind {
	case wire.KindDispatch:
		ans.Kind = wire.KindDispatchAnswer
		if req.Dispatch == nil {
			ans.HasErr, ans.Err = true, protocol.NewToolNotFoundError(m.Tool).Error()
			return ans
		}
		s, err := req.Dispatch(ctx, m.Provider, m.Tool, m.Args)
		if err != nil {
			ans.HasErr, ans.Err = true, err.Error()
			return ans
		}
		ans.Answer = s
	case wire.KindOutbound:
		ans.Kind = wire.KindOutboundAnswer
		fn := req.Outbound.Func()
		if fn == nil || m.OutboundRequest == nil {
			ans.HasErr, ans.Err = true, "This execution has no outbound function."
			return ans
		}
		r, err := fn(ctx, *m.OutboundRequest)
		if err != nil {
			ans.HasErr, ans.Err = true, err.Error()
			return ans
		}
		ans.OutboundResponse = &r
	}
	return ans
}

// deathNote is how a worker's death reads to each run it hosted: the
// process's kill reason and the run it was killed for (or that held the
// gate when the runtime died of memory).
type deathNote struct {
	closed bool       // the executor is closing
	reason killReason // the parent's, when it killed the worker
	blamed uint64     // the run the death is charged to; 0: none
	oom    bool       // the runtime died out of memory
	// used is what the worker's table said each run had used.
	used map[uint64]wire.Slot
}

// deathKind is what ended a worker, in the order a death is classified.
type deathKind uint8

const (
	deathCrashed  deathKind = iota // nothing of the parent's: the process died or broke the protocol by itself
	deathClosed                    // the executor is closing
	deathRSS                       // the parent killed it for memory (RSS, or a memory cancel ignored)
	deathTimeout                   // the parent killed it for a run past its deadline
	deathRlimit                    // the runtime ran out of its address space
	deathProtocol                  // the parent killed it for a frame it could not accept
	deathRetired                   // the pool stopped it
)

// String names the kind for span events.
func (k deathKind) String() string {
	return [...]string{"crashed", "closed", "rss", "timeout", "rlimit", "protocol", "retired"}[k]
}

// kind classifies the death; the stats, the log, the span and bound read
// it. A kill for memory or time outranks the runtime's own death of
// memory, which outranks the parent's other kills.
func (d deathNote) kind() deathKind {
	switch {
	case d.closed:
		return deathClosed
	case d.oom && d.reason != killMemory && d.reason != killOverrun:
		return deathRlimit
	}
	return deathByKill[d.reason]
}

// deathByKill is the kind of a death by the parent's kill reason.
var deathByKill = [...]deathKind{
	killNone:     deathCrashed,
	killMemory:   deathRSS,
	killClosed:   deathClosed,
	killProtocol: deathProtocol,
	killRetired:  deathRetired,
	killOverrun:  deathTimeout,
}

// bound is the declared failure a death reports to run r: the one blamed
// for a bound only stopping the process could hold. Nil when r is not to
// blame.
func (d deathNote) bound(r *run) error {
	if d.blamed != r.id {
		return nil
	}
	switch d.kind() {
	case deathRSS, deathRlimit:
		return boundError(r.job, protocol.FailureMemory)
	case deathTimeout:
		return boundError(r.job, protocol.FailureTimeout)
	}
	return nil
}

// boundError is the declared failure of job's run bound of kind k: the
// memory limit or the timeout it was granted. Nil for any other kind.
func boundError(job sandbox.Job, k protocol.FailureKind) error {
	switch k {
	case protocol.FailureMemory:
		return protocol.NewMemoryLimitError(job.MemoryLimitMB)
	case protocol.FailureTimeout:
		return protocol.NewExecutionTimeoutError(job.TimeoutMs)
	}
	return nil
}

// fault is the fault a death is to run r when no bound of its own ended it.
func (d deathNote) fault() error {
	switch {
	case d.closed:
		return brokenFault()
	case d.blamed != 0:
		return crashedFault("The worker process under this execution was stopped because another execution on it broke a bound that only stopping the process could hold; nothing this execution did is at fault. Run it again.")
	}
	return crashedFault("The worker process under the execution exited unexpectedly.")
}

// died settles a run whose worker is gone (or is going: a run stuck in Go
// code is settled before its worker is stopped), once, and returns the
// fault it met (nil when a bound of its own ended it, or it was settled
// already).
func (r *run) died(d deathNote) error {
	if !r.buried.CompareAndSwap(false, true) {
		return nil
	}
	r.traceDeath(d)
	r.runCancel()
	r.heldCancel()
	bound := d.bound(r)
	if h := r.held.Load(); h != nil {
		// What the session used since it was last billed, as the worker's
		// table last said.
		if s, ok := d.used[r.id]; ok {
			r.billRetained(&wire.Message{CPUNanos: int64(s.CPU), PeakHeap: s.Peak})
		}
		h.end(bound, d.fault())
		return h.endErr
	}
	var out runOutcome
	switch {
	case protocol.FailureOf(bound) == protocol.FailureTimeout && r.cancelledAt.Load() != 0:
		// Killed for holding on past its cancel: the caller has its answer.
		out.err = context.Canceled
	case bound != nil:
		out.res = failure(bound)
		out.res.RunClock = d.used[r.id].Clock
		out.res.Usage = r.usageOfSlot(d.used[r.id])
	default:
		out.err = d.fault()
	}
	r.settle(out)
	return out.err
}
