package sandbox

import (
	"errors"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

// HandleFetch is the one handle name a granted fetch handler serves.
const HandleFetch = "fetch"

// Invocation is how one invocation of a retained handler ended.
type Invocation struct {
	// Response is the handler's serialized Response when Err is empty.
	Response protocol.OutboundResponse
	// Err is why the invocation was rejected: the handler's throw, an
	// answer that is not a Response or does not fit the wire shape, a
	// request that cannot become a Request, or, with Ended, the bound that
	// ended the session.
	Err    string
	HasErr bool
	// Ended says the session is gone: Err is the bound's text (the timeout
	// or the memory limit), or empty when it was closed. Every later
	// invocation gets the same.
	Ended bool
	// Failure is what ended the session, with Ended: the kind of Err.
	Failure protocol.FailureKind
	// Broken says the sandbox itself broke (with Ended: the session broke):
	// the invocation fails with an INTERNAL fault, not a rejection text.
	Broken bool
	// RunClock is what the invocation spent on its run clock.
	RunClock time.Duration
}

// Fault is the error the invocation fails with: an INTERNAL fault when the
// sandbox broke, the rejection text otherwise, nil when it answered.
func (inv Invocation) Fault() error {
	switch {
	case inv.Broken:
		return InternalFault()
	case inv.HasErr:
		return errors.New(inv.Err)
	}
	return nil
}

// Retained is a session kept alive after its entry settled to a fetch
// handler. Its runtime, module state and timers live on a goroutine of
// their own until Close, the run's context ending (the memory watchdog),
// or an invocation running past its bound. Its methods are safe for
// concurrent use; invocations run one at a time in the order they arrive.
type Retained struct {
	s       *session
	invokes chan *pendingInvocation
	closeCh chan struct{}
	once    sync.Once
	ended   chan struct{}
	// end is why the session ended, and broken whether the sandbox broke;
	// read them only after ended closed.
	end    failure
	broken bool
}

type pendingInvocation struct {
	req      protocol.OutboundRequest
	clock    *runClock
	reply    chan Invocation // buffered: the loop never blocks on it
	answered bool
}

// grant records that the entry settled to a fetch handler under
// RetainHandles (bootstrap.js decides the shape).
func (s *session) grant(call goja.FunctionCall) goja.Value {
	if s.completed || s.stopped {
		return goja.Undefined()
	}
	s.completed = true
	s.granted = true
	s.handler = call.Argument(0)
	return goja.Undefined()
}

// live reports whether the loop still has work to run: before the entry
// settles, and afterwards for as long as a retained session lives.
func (s *session) live() bool {
	return !s.stopped && (!s.completed || s.granted)
}

// isException reports whether err is a JavaScript exception, as opposed to
// an interrupt or a stack overflow.
func isException(err error) bool {
	var ex *goja.Exception
	return errors.As(err, &ex)
}

// retain hands the session to a goroutine of its own that serves
// invocations; the run's clock is done.
func (s *session) retain() *Retained {
	s.clock.disarm()
	s.clock = nil
	r := &Retained{
		s:       s,
		invokes: make(chan *pendingInvocation),
		closeCh: make(chan struct{}),
		ended:   make(chan struct{}),
	}
	go r.serve()
	return r
}

// Invoke calls the handler with req under a fresh bound of the run's
// timeout, measured on the run clock with the job's CountHostWaits, and
// waits for its answer or the end of the session.
func (r *Retained) Invoke(req protocol.OutboundRequest) Invocation {
	inv := &pendingInvocation{req: req, clock: r.s.newClock(r.s.job.CountHostWaits), reply: make(chan Invocation, 1)}
	select {
	case r.invokes <- inv:
	case <-r.ended:
		return r.endedInvocation()
	}
	select {
	case ans := <-inv.reply:
		return ans
	case <-r.ended:
		select {
		case ans := <-inv.reply:
			return ans
		default:
		}
		return r.endedInvocation()
	}
}

func (r *Retained) endedInvocation() Invocation {
	return Invocation{Err: r.end.text, HasErr: r.end.text != "", Ended: true, Failure: r.end.kind, Broken: r.broken}
}

// Close ends the session: its timers stop, host calls in flight are
// cancelled, and the runtime is dropped. It waits for the loop to let go.
func (r *Retained) Close() {
	r.once.Do(func() { close(r.closeCh) })
	<-r.ended
}

// Done is closed once the session has ended, for whatever reason.
func (r *Retained) Done() <-chan struct{} { return r.ended }

// EndText is why the session ended by itself: the memory or timeout text,
// empty after Close. Read it after Done is closed.
func (r *Retained) EndText() string {
	<-r.ended
	return r.end.text
}

// EndFailure is the kind of EndText: what ended the session by itself.
func (r *Retained) EndFailure() protocol.FailureKind {
	<-r.ended
	return r.end.kind
}

// TakeBetween returns the time the session's work between invocations
// (its timers' callbacks) spent since the last call, and starts again from
// zero: a retained execution bills it with its next invocation or its end.
func (r *Retained) TakeBetween() time.Duration {
	return time.Duration(r.s.between.Swap(0))
}

// Broken reports whether the session ended because the sandbox broke.
// Read it after Done is closed.
func (r *Retained) Broken() bool {
	<-r.ended
	return r.broken
}

// serve runs the kept session's loop on a goroutine of its own until the
// session ends.
func (r *Retained) serve() {
	s := r.s
	defer func() {
		if p := recover(); p != nil {
			s.stopped = true
			s.broken = true
		}
		if s.inv != nil {
			s.inv.clock.disarm()
		}
		s.leave()
		r.end = s.fatal
		r.broken = s.broken
		s.release()
		close(r.ended)
	}()
	s.loop(r)
}

// startInvocation builds the Request and calls the handler; its settlement
// answers inv from a promise job.
func (s *session) startInvocation(inv *pendingInvocation) {
	answer := func(a Invocation) {
		if inv.answered {
			return
		}
		inv.answered = true
		a.RunClock = inv.clock.elapsed()
		inv.reply <- a
	}
	reject := func(text string) { answer(Invocation{Err: text, HasErr: true}) }
	reqValue, err := s.platform.Request(inv.req)
	if err != nil {
		if isUncatchable(err) {
			s.stop(err)
			return
		}
		reject(err.Error())
		return
	}
	done := s.function("done", func(call goja.FunctionCall) goja.Value {
		if !call.Argument(0).ToBoolean() {
			reject(call.Argument(1).String())
			return goja.Undefined()
		}
		resp, err := s.platform.Response(call.Argument(1))
		if err != nil {
			if isUncatchable(err) {
				panic(err)
			}
			reject(err.Error())
			return goja.Undefined()
		}
		answer(Invocation{Response: resp})
		return goja.Undefined()
	})
	if _, err := s.callHandler(goja.Undefined(), s.handler, reqValue, done); err != nil {
		s.stop(err)
	}
}

// isUncatchable reports whether err is one JavaScript cannot catch: an
// interrupt or a stack overflow.
func isUncatchable(err error) bool {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	return errors.As(err, &ie) || errors.As(err, &so)
}
