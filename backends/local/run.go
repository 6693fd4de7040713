package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/sandbox"
	"github.com/supolka/codemode-gateway/protocol"
)

// exitWait bounds how long the parent waits for a worker whose stream has
// ended to be reaped before it kills it.
const exitWait = 2 * time.Second

// runOn runs job on p and watches it: host calls, the run clock, RSS and the
// caller's ctx. reusable says whether p may serve another execution.
func (e *Executor) runOn(ctx context.Context, p *process, req *protocol.ExecuteRequest, job sandbox.Job) (res *protocol.ExecuteResult, reusable bool, err error) {
	p.runs++
	// Host calls get a ctx that ends with the execution: a tool call still
	// in flight when the run settles is cancelled, not leaked.
	hctx, hcancel := context.WithCancel(ctx)
	defer hcancel()

	if err := p.send(&message{Kind: kindJob, Job: &job}); err != nil {
		if errors.Is(err, errFrameTooLarge) {
			return nil, true, fmt.Errorf("local: %w", err)
		}
		p.kill(killProtocol)
	}

	clock := newRunClock(time.Duration(job.TimeoutMs)*time.Millisecond+e.opts.KillGrace, job.CountHostWaits, p.pid, time.Now())
	rssLimit := p.baseRSS + uint64(e.opts.MemoryLimitMB+e.opts.RSSHeadroomMB)<<20
	tick := time.NewTicker(monitorPoll)
	defer tick.Stop()

	hostDone := make(chan struct{})
	open := 0
	var backlog []*message
	startCall := func(m *message) {
		go e.serveHostCall(hctx, p, req, m, hostDone)
	}

	ctxDone := ctx.Done()
	var cancelDeadline time.Time
	for {
		select {
		case m, ok := <-p.frames:
			if !ok {
				res, err := e.afterDeath(ctx, p, job)
				return res, false, err
			}
			switch m.Kind {
			case kindDispatch, kindOutbound:
				if open == 0 {
					clock.hostStart(time.Now())
				}
				open++
				switch {
				case open <= maxOpenHostCalls:
					startCall(m)
				case len(backlog) < maxHostBacklog:
					backlog = append(backlog, m)
				default:
					go refuseHostCall(hctx, p, m, hostDone)
				}
			case kindResult:
				if m.Result == nil {
					p.kill(killProtocol)
					continue
				}
				if p.killedFor() == killClosed {
					return nil, false, brokenFault()
				}
				if m.OverLimit {
					e.stats.heapLimits.Add(1)
				}
				// A run that ended early (the caller's cancel, the timeout, the
				// heap limit) may leave goja busy in Go code the interrupt
				// cannot reach, so its worker is replaced, not reused.
				if ctx.Err() != nil {
					return nil, false, context.Cause(ctx)
				}
				// A result that crossed the parent's kill in the pipe still
				// stands, but its worker is gone.
				reusable := p.killedFor() == killNone && !m.OverLimit && !protocol.MatchesExecutionTimeout(m.Result.Error)
				return m.Result, reusable, nil
			default:
				p.kill(killProtocol)
			}
		case <-hostDone:
			open--
			if len(backlog) > 0 {
				startCall(backlog[0])
				backlog = backlog[1:]
			}
			if open == 0 {
				clock.hostEnd(time.Now())
			}
		case now := <-tick.C:
			if rss, ok := readRSS(p.pid); ok && rss > rssLimit {
				p.kill(killMemory)
			}
			clock.sample()
			if clock.elapsed(now) > clock.budget {
				p.kill(killTimeout)
			}
			if !cancelDeadline.IsZero() && now.After(cancelDeadline) {
				p.kill(killCancelled)
			}
		case <-ctxDone:
			ctxDone = nil
			cancelDeadline = time.Now().Add(e.opts.KillGrace)
			if p.send(&message{Kind: kindCancel}) != nil {
				p.kill(killCancelled)
			}
		}
	}
}

// reap waits until a worker whose stream ended has exited, killing it
// when it has not after exitWait.
func (p *process) reap() {
	select {
	case <-p.exited:
	case <-time.After(exitWait):
		p.kill(killProtocol)
		<-p.exited
	}
}

// afterDeath reports an execution whose worker's stream ended: the bound
// that killed it, or WORKER_CRASHED.
func (e *Executor) afterDeath(ctx context.Context, p *process, job sandbox.Job) (*protocol.ExecuteResult, error) {
	p.reap()
	reason := p.killedFor()
	switch {
	case reason == killClosed || (reason == killNone && e.isClosed()):
		return nil, brokenFault()
	case reason == killMemory:
		e.stats.rssKills.Add(1)
		return failure(protocol.NewMemoryLimitError(job.MemoryLimitMB).Error()), nil
	case p.ranOutOfMemory() && reason != killCancelled:
		e.stats.outOfMemory.Add(1)
		return failure(protocol.NewMemoryLimitError(job.MemoryLimitMB).Error()), nil
	case reason == killTimeout:
		e.stats.timeoutKills.Add(1)
		return failure(protocol.NewExecutionTimeoutError(job.TimeoutMs).Error()), nil
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	}
	e.stats.workersCrashed.Add(1)
	e.opts.Logger.Warn("local executor: worker crashed", "pid", p.pid, "exit", p.describeExit(), "stream", fmt.Sprint(p.readErr))
	return nil, crashedFault("The worker process under the execution exited unexpectedly.")
}

// failure is a result envelope carrying a declared failure's text.
func failure(text string) *protocol.ExecuteResult {
	return &protocol.ExecuteResult{Error: text, HasError: true, Logs: []protocol.LogLine{}}
}

// serveHostCall calls the request's dispatch or outbound function for one
// frame and sends the answer back.
func (e *Executor) serveHostCall(ctx context.Context, p *process, req *protocol.ExecuteRequest, m *message, done chan<- struct{}) {
	ans := answerFor(ctx, req, m)
	// A run that may retain its session still has the call open inside it
	// after it settles: it gets its (cancelled) answer, so the sandbox's
	// count of open host calls stays true for the invocations.
	if ctx.Err() == nil || req.RetainHandles {
		if err := p.send(ans); errors.Is(err, errFrameTooLarge) {
			_ = p.send(&message{Kind: ans.Kind, ID: m.ID, HasErr: true,
				Err: "The host's answer is too large to deliver to the sandbox."})
		}
	}
	select {
	case done <- struct{}{}:
	case <-ctx.Done():
	}
}

// refuseHostCall answers a call past the in-flight bound with an error.
func refuseHostCall(ctx context.Context, p *process, m *message, done chan<- struct{}) {
	kind := kindDispatchAnswer
	if m.Kind == kindOutbound {
		kind = kindOutboundAnswer
	}
	if ctx.Err() == nil {
		_ = p.send(&message{Kind: kind, ID: m.ID, HasErr: true,
			Err: fmt.Sprintf("Too many host calls in flight: at most %d may wait at once. Await some before starting more.", maxOpenHostCalls+maxHostBacklog)})
	}
	select {
	case done <- struct{}{}:
	case <-ctx.Done():
	}
}

// answerFor runs the caller's function for one host-call frame. A panic in
// the caller's function becomes an error answer, never a crash of the
// gateway.
func answerFor(ctx context.Context, req *protocol.ExecuteRequest, m *message) (ans *message) {
	ans = &message{ID: m.ID}
	defer func() {
		if r := recover(); r != nil {
			ans.Answer, ans.OutboundResponse = "", nil
			ans.HasErr, ans.Err = true, "The host function failed."
		}
	}()
	switch m.Kind {
	case kindDispatch:
		ans.Kind = kindDispatchAnswer
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
	case kindOutbound:
		ans.Kind = kindOutboundAnswer
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

// runClock is the parent's copy of the run clock, the backstop behind the
// sandbox's own. While no host call is open it runs on the wall clock.
// While one is open, only the worker's CPU time advances it (guest compute
// counts even then, and a run stuck in Go code that goja's interrupt cannot
// reach still burns CPU); with countHostWaits it is the wall clock
// throughout. The CPU time is sampled on the monitor's ticks, never on a
// host call's path, so a short tool call costs no /proc read; a pause
// counts the CPU from its first tick to its last.
type runClock struct {
	budget     time.Duration // the run bound plus the kill grace
	countWaits bool
	pid        int

	spent  time.Duration // closed segments
	mark   time.Time     // start of the open wall segment
	paused bool          // a host call is open and waits do not count
	// CPU ticks of the worker at the pause's first sample and its latest;
	// sampled is false until the first sample of a pause.
	cpu0, cpu1 uint64
	sampled    bool
}

func newRunClock(budget time.Duration, countWaits bool, pid int, now time.Time) *runClock {
	return &runClock{budget: budget, countWaits: countWaits, pid: pid, mark: now}
}

func (c *runClock) hostStart(now time.Time) {
	if c.countWaits || c.paused {
		return
	}
	c.spent += now.Sub(c.mark)
	c.paused, c.sampled = true, false
}

func (c *runClock) hostEnd(now time.Time) {
	if !c.paused {
		return
	}
	c.spent += c.pausedCPU()
	c.paused = false
	c.mark = now
}

// sample reads the worker's CPU time during a pause; the monitor calls it
// on every tick.
func (c *runClock) sample() {
	if !c.paused {
		return
	}
	t, ok := readCPUTicks(c.pid)
	if !ok {
		return
	}
	if !c.sampled {
		c.cpu0, c.sampled = t, true
	}
	c.cpu1 = max(c.cpu1, t)
	if c.cpu1 < c.cpu0 {
		c.cpu1 = c.cpu0
	}
}

func (c *runClock) pausedCPU() time.Duration {
	if !c.sampled {
		return 0
	}
	return time.Duration(c.cpu1-c.cpu0) * time.Second / clockTicks
}

// elapsed is the run time spent so far.
func (c *runClock) elapsed(now time.Time) time.Duration {
	if c.paused {
		return c.spent + c.pausedCPU()
	}
	return c.spent + now.Sub(c.mark)
}
