package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// held is one retained execution: a run whose session lives on in its
// worker beside the worker's other runs, and the goroutine (its holder)
// that sends it invocations one at a time and closes it.
type held struct {
	id string
	e  *Executor
	r  *run

	line    callLine      // callers waiting for their turn, in arrival order
	closeCh chan struct{} // CloseHandles asks the holder to end
	done    chan struct{} // closed once the session is gone and its place freed

	// The worker's watcher talks to the holder through these.
	cur     atomic.Uint64      // the id of the invocation at the worker; 0: none
	answers chan *wire.Message // buffered: the answer of cur
	gone    chan struct{}      // closed when the session ended in the worker
	bound   error              // the bound it ended with, nil when released; set before gone closes
	endErr  error              // the fault an invocation in flight meets at a death

	// Guarded by e.mu.
	closing bool  // CloseHandles was called
	next    error // the bound the next invocation reports, once
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

// hold makes a granted run a retained execution and starts its holder; res
// gets the executionId. It returns false when the grant cannot be kept
// (the executor is closing, or the worker died under it), and the caller
// releases the run.
func (e *Executor) hold(r *run, res *protocol.ExecuteResult) bool {
	id, err := newExecutionID()
	if err != nil {
		return false
	}
	h := &held{
		id: id, e: e, r: r,
		line:    callLine{ready: make(chan struct{}, 1), waiting: &e.stats.invocationsWaiting},
		closeCh: make(chan struct{}),
		done:    make(chan struct{}),
		answers: make(chan *wire.Message, 1),
		gone:    make(chan struct{}),
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return false
	}
	// The worker's watcher sees the held execution from here on; a death
	// that came first has already settled the run.
	r.w.mu.Lock()
	alive := r.w.byRun[r.id] == r
	if alive {
		r.held.Store(h)
	}
	r.w.mu.Unlock()
	if !alive {
		e.mu.Unlock()
		return false
	}
	e.handles[id] = h
	e.heldLocked(r.w)
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
// the first invocation after a bound ended the session between
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
	h.line.join(c)
	select {
	case a := <-c.reply:
		return a.resp, a.err
	case <-h.done:
		// The holder answers a call it took before it ends.
		select {
		case a := <-c.reply:
			return a.resp, a.err
		default:
		}
		h.line.leave(c)
		return none, h.closedError()
	case <-ctx.Done():
		// A call still in line leaves it; one the holder took keeps its
		// place, and its answer is dropped.
		h.line.leave(c)
		return none, context.Cause(ctx)
	}
}

// callLine is the queue of a retained execution's callers: the holder
// takes them one at a time in the order they joined.
type callLine struct {
	mu      sync.Mutex
	calls   []*heldCall
	ready   chan struct{} // buffered (1): the line may have a call
	waiting *atomic.Int64 // the executor's gauge of callers in line
}

// join puts c at the end of the line.
func (l *callLine) join(c *heldCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.waiting.Add(1)
	l.mu.Unlock()
	l.signal()
}

// signal tells the holder the line may have a call.
func (l *callLine) signal() {
	select {
	case l.ready <- struct{}{}:
	default:
	}
}

// take removes and returns the first call, or nil when the line is empty;
// it signals again when calls remain.
func (l *callLine) take() *heldCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) == 0 {
		return nil
	}
	c := l.calls[0]
	l.calls[0] = nil
	l.calls = l.calls[1:]
	l.waiting.Add(-1)
	if len(l.calls) > 0 {
		l.signal()
	}
	return c
}

// leave removes c from the line if it is still there.
func (l *callLine) leave(c *heldCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.calls {
		if x == c {
			l.calls = append(l.calls[:i], l.calls[i+1:]...)
			l.waiting.Add(-1)
			return
		}
	}
}

// CloseHandles closes a retained execution: its session is dropped in its
// worker and its place freed before it returns. An execution whose handles
// are already gone, or were never granted, fails with HANDLES_CLOSED.
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

// closedError is what a call on a closed execution gets: the text of the
// bound that ended it, once, to the first invocation after it; then
// HANDLES_CLOSED.
func (h *held) closedError() error {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.handles[h.id] == h {
		delete(e.handles, h.id)
	}
	if bound := h.next; bound != nil {
		h.next = nil
		return bound
	}
	return protocol.NewHandlesClosedError(h.id)
}

// answer takes the worker's answer to the invocation in flight (the
// watcher calls it); false when no invocation with that id is in flight.
func (h *held) answer(m *wire.Message) bool {
	if m.ID == 0 || !h.cur.CompareAndSwap(m.ID, 0) || (!m.Ended && !m.HasErr && m.OutboundResponse == nil) {
		return false
	}
	h.answers <- m
	return true
}

// end records that the session is gone (the watcher calls it): with the
// error of the bound that ended it, else with the fault an invocation in
// flight meets (nil when it was released).
func (h *held) end(bound, fault error) {
	if bound != nil {
		h.bound = bound
	} else {
		h.endErr = fault
	}
	close(h.gone)
}

// run is the holder: it sends invocations one at a time and ends the
// execution on CloseHandles, the idle bound, a bound or a death of the
// worker, or Close.
func (h *held) run() {
	e, r := h.e, h.r
	var end error // the bound the next invocation reports
	defer func() {
		e.mu.Lock()
		h.next = end
		if end == nil && e.handles[h.id] == h {
			delete(e.handles, h.id)
		}
		e.mu.Unlock()
		if end != nil {
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
		if fn := r.handlesClosed; fn != nil {
			go fn(h.id)
		}
		close(h.done)
		e.holders.Done()
	}()

	idle := time.NewTimer(e.opts.HandlesIdleTimeout)
	defer idle.Stop()
	closeCh := h.closeCh
	var seq uint64
	for {
		select {
		case <-h.line.ready:
			c := h.line.take()
			if c == nil {
				continue
			}
			idle.Stop()
			seq++
			h.cur.Store(seq)
			req := c.req
			if err := r.w.p.send(&wire.Message{Kind: wire.KindInvoke, Run: r.id, ID: seq, OutboundRequest: &req}); err != nil {
				h.cur.Store(0)
				if big, ok := err.(*wire.FrameTooLargeError); ok {
					c.reply <- heldAnswer{err: protocol.NewDeliveryTooLargeError(protocol.DeliveryHandleRequest, big.Size, big.Max)}
					idle.Reset(e.opts.HandlesIdleTimeout)
					continue
				}
				r.w.kill(killProtocol, 0)
			}
			closing := false
			for answered := false; !answered; {
				select {
				case m := <-h.answers:
					answered = true
					switch {
					case m.Ended:
						<-h.gone
						c.reply <- heldAnswer{err: h.goneError()}
						return
					case m.Broken:
						c.reply <- heldAnswer{err: sandbox.InternalFault()}
					case m.HasErr:
						c.reply <- heldAnswer{err: errors.New(m.Err)}
					default:
						c.reply <- heldAnswer{resp: *m.OutboundResponse}
					}
				case <-h.gone:
					c.reply <- heldAnswer{err: h.goneError()}
					return
				case <-closeCh:
					// Closed under the invocation: the release ends it, and
					// it answers as ended (HANDLES_CLOSED).
					closeCh, closing = nil, true
					r.w.release(r)
				}
			}
			if closing {
				<-h.gone
				return
			}
			idle.Reset(e.opts.HandlesIdleTimeout)
		case <-h.gone:
			// Ended by itself between invocations (the memory limit, a
			// callback past the bound) or by a death of its worker.
			end = h.bound
			return
		case <-idle.C:
			e.stats.handlesExpired.Add(1)
			h.releaseAndWait()
			return
		case <-closeCh:
			h.releaseAndWait()
			return
		case <-e.closing:
			// Close kills the worker; its watcher closes gone.
			<-h.gone
			return
		}
	}
}

// releaseAndWait asks the worker to drop the session and waits until it
// did (or died).
func (h *held) releaseAndWait() {
	h.r.w.release(h.r)
	<-h.gone
}

// goneError is what the invocation in flight meets when the session went
// under it.
func (h *held) goneError() error {
	if h.bound != nil {
		return h.bound
	}
	if h.endErr != nil {
		if protocol.CodeOf(h.endErr) == protocol.CodeWorkerCrashed {
			return crashedFault("The worker process under the retained execution exited unexpectedly; its handles are closed.")
		}
		return h.endErr
	}
	return protocol.NewHandlesClosedError(h.id)
}

// endError is the error an invocation meets when the session ended with
// a failure of kind, whose text is text: the protocol's own value for a
// run bound, the text as it reads for anything else (the call stack
// bound), nil when the session was released.
func (h *held) endError(kind protocol.FailureKind, text string) error {
	if err := boundError(h.r.job, kind); err != nil {
		return err
	}
	if text == "" {
		return nil
	}
	return errors.New(text)
}
