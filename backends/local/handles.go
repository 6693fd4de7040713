package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/sandbox"
	"github.com/supolka/codemode-gateway/protocol"
)

// held is one retained execution: its worker, pinned to it from the grant
// until the handles close, and the goroutine (holder) that owns the
// worker's pipe meanwhile.
type held struct {
	id  string
	e   *Executor
	p   *process
	req *protocol.ExecuteRequest // its outbound function serves the handler's fetches
	job sandbox.Job

	invokes chan *heldCall // unbuffered: waiting callers queue in arrival order
	closeCh chan struct{}  // CloseHandles asks the holder to end
	done    chan struct{}  // closed once the execution is Closed and its worker gone

	// Guarded by e.mu.
	closing bool   // CloseHandles was called
	endText string // the bound's text the next invocation reports, once
}

type heldCall struct {
	req   protocol.OutboundRequest
	reply chan heldAnswer // buffered: the holder never blocks on it
}

type heldAnswer struct {
	resp protocol.OutboundResponse
	err  error
}

// newExecutionID is 128 random bits in hex.
func newExecutionID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// hold pins p to a granted execution and starts its holder, which from now
// on owns p and the pool slot the execution took; res gets the
// executionId. It returns false when the grant cannot be kept (the
// executor is closing), and the caller keeps p and the slot.
func (e *Executor) hold(p *process, req *protocol.ExecuteRequest, job sandbox.Job, res *protocol.ExecuteResult) bool {
	id, err := newExecutionID()
	if err != nil {
		return false
	}
	h := &held{
		id: id, e: e, p: p, req: req, job: job,
		invokes: make(chan *heldCall),
		closeCh: make(chan struct{}),
		done:    make(chan struct{}),
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	e.handles[id] = h
	e.holders.Add(1)
	e.mu.Unlock()
	e.stats.handlesGranted.Add(1)
	res.ExecutionID = id
	res.Handles = []string{sandbox.HandleFetch}
	go h.run()
	return true
}

// InvokeHandle calls the fetch handler of a retained execution with req and
// returns its serialized Response. Invocations of one execution run one at
// a time, in the order they arrive, each under a fresh bound of the
// execution's timeout. A handler's throw, an answer that is not a Response
// or does not fit the wire shape, and a handle name other than "fetch"
// (HandleNotFoundError) reject with their text and the handles keep
// serving. An invocation that a bound ends rejects with the bound's text
// (ExecutionTimeoutError, MemoryLimitError) and closes the handles; so does
// the first invocation after the memory limit ended the isolate between
// invocations. An execution whose handles are gone, or were never granted,
// fails with HANDLES_CLOSED; a closed executor with CONNECTION_BROKEN.
func (e *Executor) InvokeHandle(ctx context.Context, executionID, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	var none protocol.OutboundResponse
	e.mu.Lock()
	closed := e.closed
	h := e.handles[executionID]
	e.mu.Unlock()
	if closed {
		return none, brokenFault()
	}
	if h == nil {
		return none, protocol.NewHandlesClosedError(executionID)
	}
	select {
	case <-h.done:
		return none, h.closedError()
	default:
	}
	if handle != sandbox.HandleFetch {
		return none, protocol.NewHandleNotFoundError(executionID, handle, []string{sandbox.HandleFetch})
	}
	c := &heldCall{req: req, reply: make(chan heldAnswer, 1)}
	select {
	case h.invokes <- c:
	case <-h.done:
		return none, h.closedError()
	case <-ctx.Done():
		return none, context.Cause(ctx)
	}
	select {
	case a := <-c.reply:
		return a.resp, a.err
	case <-ctx.Done():
		// The invocation keeps its place; its answer is dropped.
		return none, context.Cause(ctx)
	}
}

// CloseHandles closes a retained execution: its worker is retired and its
// pool slot freed before it returns. An execution whose handles are
// already gone, or were never granted, fails with HANDLES_CLOSED.
func (e *Executor) CloseHandles(ctx context.Context, executionID string) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return brokenFault()
	}
	h := e.handles[executionID]
	if h == nil || h.closing {
		e.mu.Unlock()
		return protocol.NewHandlesClosedError(executionID)
	}
	select {
	case <-h.done:
		// Ended by a bound; nobody invoked it since, so its text goes.
		delete(e.handles, executionID)
		e.mu.Unlock()
		return protocol.NewHandlesClosedError(executionID)
	default:
	}
	h.closing = true
	e.mu.Unlock()
	close(h.closeCh)
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// closedError is what a call on a Closed execution gets: the text of the
// bound that ended it, once, to the first invocation after it; then
// HANDLES_CLOSED.
func (h *held) closedError() error {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.handles[h.id] == h {
		delete(e.handles, h.id)
	}
	if text := h.endText; text != "" {
		h.endText = ""
		return errors.New(text)
	}
	return protocol.NewHandlesClosedError(h.id)
}

// run is the holder: it serves the worker's frames (the handler's host
// calls, invocation answers), sends invocations one at a time, keeps the
// parent's run clock and RSS poll on each, and ends the execution on
// CloseHandles, the idle bound, a bound or a death of the worker, or Close.
func (h *held) run() {
	e, p := h.e, h.p
	hctx, hcancel := context.WithCancel(context.Background())
	var endText string
	var cur *heldCall // the invocation at the worker
	defer func() {
		if cur != nil {
			// Closed under it (closeHandles, the executor's Close).
			cur.reply <- heldAnswer{err: protocol.NewHandlesClosedError(h.id)}
		}
		hcancel()
		e.retire(p)
		e.mu.Lock()
		h.endText = endText
		if endText == "" && e.handles[h.id] == h {
			delete(e.handles, h.id)
		}
		e.mu.Unlock()
		if endText != "" {
			// Kept for the next invocation to report; dropped at the idle
			// bound if nobody comes.
			time.AfterFunc(e.opts.HandlesIdleTimeout, func() {
				e.mu.Lock()
				if e.handles[h.id] == h {
					delete(e.handles, h.id)
				}
				e.mu.Unlock()
			})
		}
		<-e.slots
		e.refill()
		if fn := h.req.HandlesClosed; fn != nil {
			go fn(h.id)
		}
		close(h.done)
		e.holders.Done()
	}()

	idle := time.NewTimer(e.opts.HandlesIdleTimeout)
	defer idle.Stop()
	tick := time.NewTicker(monitorPoll)
	defer tick.Stop()
	rssLimit := p.baseRSS + uint64(e.opts.MemoryLimitMB+e.opts.RSSHeadroomMB)<<20
	budget := time.Duration(h.job.TimeoutMs)*time.Millisecond + e.opts.KillGrace

	hostDone := make(chan struct{})
	open := 0
	var backlog []*message
	var curID uint64
	var clock *runClock
	answer := func(a heldAnswer) {
		cur.reply <- a
		cur, clock = nil, nil
	}

	for {
		invokes := h.invokes
		if cur != nil {
			invokes = nil
		}
		select {
		case c := <-invokes:
			idle.Stop()
			curID++
			cur = c
			now := time.Now()
			clock = newRunClock(budget, h.job.CountHostWaits, p.pid, now)
			if open > 0 {
				clock.hostStart(now)
			}
			req := c.req
			if err := p.send(&message{Kind: kindInvoke, ID: curID, OutboundRequest: &req}); err != nil {
				if errors.Is(err, errFrameTooLarge) {
					answer(heldAnswer{err: errors.New("The request is too large to deliver to the fetch handler. Send a smaller body.")})
					idle.Reset(e.opts.HandlesIdleTimeout)
					continue
				}
				p.kill(killProtocol)
			}
		case m, ok := <-p.frames:
			if !ok {
				endText = h.afterDeath(cur != nil)
				if cur != nil {
					if endText != "" {
						answer(heldAnswer{err: errors.New(endText)})
						endText = ""
					} else if p.killedFor() == killClosed || e.isClosed() {
						answer(heldAnswer{err: brokenFault()})
					} else {
						answer(heldAnswer{err: crashedFault("The worker process under the retained execution exited unexpectedly; its handles are closed.")})
					}
				}
				return
			}
			switch m.Kind {
			case kindDispatch, kindOutbound:
				if open == 0 && clock != nil {
					clock.hostStart(time.Now())
				}
				open++
				switch {
				case m.Kind == kindDispatch:
					// Dispatch belongs to the run that ended.
					go answerCompleted(hctx, p, m, hostDone)
				case open <= maxOpenHostCalls:
					go e.serveHostCall(hctx, p, h.req, m, hostDone)
				case len(backlog) < maxHostBacklog:
					backlog = append(backlog, m)
				default:
					go refuseHostCall(hctx, p, m, hostDone)
				}
			case kindInvokeAnswer:
				if cur == nil || m.ID != curID || (!m.HasErr && m.OutboundResponse == nil) {
					p.kill(killProtocol)
					continue
				}
				if m.Ended {
					if m.OverLimit {
						e.stats.heapLimits.Add(1)
					}
					answer(heldAnswer{err: h.boundError(m.Err)})
					return
				}
				if m.HasErr {
					answer(heldAnswer{err: errors.New(m.Err)})
				} else {
					answer(heldAnswer{resp: *m.OutboundResponse})
				}
				idle.Reset(e.opts.HandlesIdleTimeout)
			case kindEnded:
				if m.OverLimit {
					e.stats.heapLimits.Add(1)
				}
				endText = m.Err
				if cur != nil {
					answer(heldAnswer{err: h.boundError(m.Err)})
					endText = ""
				}
				return
			default:
				p.kill(killProtocol)
			}
		case <-hostDone:
			open--
			if len(backlog) > 0 {
				go e.serveHostCall(hctx, p, h.req, backlog[0], hostDone)
				backlog = backlog[1:]
			}
			if open == 0 && clock != nil {
				clock.hostEnd(time.Now())
			}
		case now := <-tick.C:
			if rss, ok := readRSS(p.pid); ok && rss > rssLimit {
				p.kill(killMemory)
			}
			if clock != nil {
				clock.sample()
				if clock.elapsed(now) > clock.budget {
					p.kill(killTimeout)
				}
			}
		case <-idle.C:
			e.stats.handlesExpired.Add(1)
			return
		case <-h.closeCh:
			return
		case <-e.closing:
			if cur != nil {
				answer(heldAnswer{err: brokenFault()})
			}
			return
		}
	}
}

// boundError is the error an invocation that a bound ended rejects with:
// the protocol's own value when the text is one of its bounds.
func (h *held) boundError(text string) error {
	switch {
	case text == protocol.NewMemoryLimitError(h.job.MemoryLimitMB).Error():
		return protocol.NewMemoryLimitError(h.job.MemoryLimitMB)
	case text == protocol.NewExecutionTimeoutError(h.job.TimeoutMs).Error():
		return protocol.NewExecutionTimeoutError(h.job.TimeoutMs)
	case text == "":
		return protocol.NewHandlesClosedError(h.id)
	}
	return errors.New(text)
}

// afterDeath is the text a retained execution whose worker died reports:
// the bound that killed it, or nothing (a crash, Close) and the execution
// simply closes.
func (h *held) afterDeath(invoking bool) string {
	e, p := h.e, h.p
	p.reap()
	reason := p.killedFor()
	switch {
	case reason == killClosed || (reason == killNone && e.isClosed()):
		return ""
	case reason == killMemory:
		e.stats.rssKills.Add(1)
		return protocol.NewMemoryLimitError(h.job.MemoryLimitMB).Error()
	case p.ranOutOfMemory():
		e.stats.outOfMemory.Add(1)
		return protocol.NewMemoryLimitError(h.job.MemoryLimitMB).Error()
	case reason == killTimeout && invoking:
		e.stats.timeoutKills.Add(1)
		return protocol.NewExecutionTimeoutError(h.job.TimeoutMs).Error()
	}
	e.stats.workersCrashed.Add(1)
	e.opts.Logger.Warn("local executor: worker holding handles crashed", "pid", p.pid, "exit", p.describeExit(), "stream", fmt.Sprint(p.readErr))
	return ""
}

// answerCompleted answers a tool call that reached the parent after the
// run settled with the completed text, without calling the host.
func answerCompleted(ctx context.Context, p *process, m *message, done chan<- struct{}) {
	if ctx.Err() == nil {
		_ = p.send(&message{Kind: kindDispatchAnswer, ID: m.ID, Answer: protocol.ErrorEnvelope(protocol.CompletedText)})
	}
	select {
	case done <- struct{}{}:
	case <-ctx.Done():
	}
}
