package capnweb

import (
	"context"
	"fmt"
	"sync"
)

// Delivery: calls queued on an export, run one at a time in arrival order,
// each with its turn.

// deliver queues d on ex. Caller holds s.mu.
func (s *Session) deliver(ex *export, d *delivery) {
	ex.queue = append(ex.queue, d)
	if !ex.running {
		ex.running = true
		go s.runQueue(ex)
	}
}

func (s *Session) runQueue(ex *export) {
	for {
		s.mu.Lock()
		if len(ex.queue) == 0 {
			ex.running = false
			s.mu.Unlock()
			return
		}
		d := ex.queue[0]
		ex.queue[0] = nil
		ex.queue = ex.queue[1:]
		s.mu.Unlock()
		if !s.runDelivery(ex, d) {
			return
		}
	}
}

// runDelivery performs one queued call: it waits for the target and the
// arguments and runs the handler on this goroutine. It reports whether this
// goroutine still runs the queue: false when the handler gave up its turn
// and a new goroutine took the queue over.
func (s *Session) runDelivery(ex *export, d *delivery) bool {
	ctx := s.ctx
	target := ex.value
	if ex.prom != nil {
		v, err := ex.prom.wait(ctx)
		if err != nil {
			d.result.settle(nil, err)
			return true
		}
		target = v
	}
	if !holesSettled(d.args, 0) {
		// Like JavaScript, a call whose arguments wait for promises is
		// delivered when they settle, and later calls may overtake it.
		go func() {
			args, err := fill(ctx, d.args)
			if err != nil {
				d.result.settle(nil, err)
				return
			}
			s.perform(ctx, target, d, args.([]any), &servedCall{})
		}()
		return true
	}
	args, err := fill(ctx, d.args)
	if err != nil {
		d.result.settle(nil, err)
		return true
	}
	var argList []any
	if a, ok := args.([]any); ok {
		argList = a
	}
	if !d.call {
		if needsRemote(target) {
			go func() {
				v, err := walkPath(ctx, target, d.path)
				d.result.settle(v, err)
			}()
			return true
		}
		v, err := walkPath(ctx, target, d.path)
		d.result.settle(v, err)
		return true
	}
	// The call and its turn are one allocation.
	call := &servedCall{own: turn{s: s, ex: ex}}
	call.turn = &call.own
	s.perform(ctx, target, d, argList, call)
	return call.own.end()
}

// perform runs one delivery's call and settles its result. call.turn,
// when not nil, is the target's turn, which the handler may give up before
// it returns (Detach, or awaiting a promise).
func (s *Session) perform(ctx context.Context, target any, d *delivery, args []any, call *servedCall) {
	var v any
	var err error
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &Error{Name: "Error", Message: fmt.Sprintf("internal error: handler panicked: %v", r)}
		}
		// Settled before the queue moves on (runDelivery returns), so
		// that the next call on this target already sees this result.
		d.result.settle(v, err)
		call.answered.run()
	}()
	if !d.call {
		v, err = walkPath(ctx, target, d.path)
		return
	}
	ctx = context.WithValue(ctx, servedKey{}, call)
	v, err = callAt(ctx, target, d.path, args)
}

// servedCall is what a served call's context carries: its turn on the
// target's queue (nil when it has none to give up) and what to run once it
// is answered.
type servedCall struct {
	turn     *turn
	own      turn // the turn, when the call holds one (turn points here)
	answered answerHooks
}

type servedKey struct{}

// AfterAnswer runs fn once the served call ctx belongs to has been
// answered: its result settled and, when the peer asked for it, queued for
// writing, so that a session closed afterwards still delivers it (Close
// writes what is queued). It runs nothing and returns false when ctx is not
// a served call's. A server that counts its calls in flight, to close its
// sessions once none is, counts a call out here rather than when its
// handler returns.
func AfterAnswer(ctx context.Context, fn func()) bool {
	c, ok := ctx.Value(servedKey{}).(*servedCall)
	if ok {
		c.answered.add(fn)
	}
	return ok
}

// answerHooks are the functions a served call asked to run once it is
// answered; one added later runs at once.
type answerHooks struct {
	mu   sync.Mutex
	done bool
	fns  []func()
}

func (h *answerHooks) add(fn func()) {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		fn()
		return
	}
	h.fns = append(h.fns, fn)
	h.mu.Unlock()
}

func (h *answerHooks) run() {
	h.mu.Lock()
	h.done = true
	fns := h.fns
	h.fns = nil
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func needsRemote(v any) bool {
	switch v.(type) {
	case *Stub, *Promise:
		return true
	}
	return false
}

// callAt calls the function at path of target: a method of a Target, a
// Func or Target found in a plain value, or a stub of a peer (forwarded).
func callAt(ctx context.Context, target any, path []string, args []any) (any, error) {
	v := target
	for i := 0; i < len(path); i++ {
		switch x := v.(type) {
		case *Stub:
			return x.InvokePath(path[i:], args...).Await(ctx)
		case *Promise:
			return x.InvokePath(path[i:], args...).Await(ctx)
		case Target:
			if i == len(path)-1 {
				if isPrototypeKey(path[i]) {
					return nil, notAFunction(joinPath(path))
				}
				return x.CallMethod(ctx, path[i], args)
			}
		}
		next, err := walkPath(ctx, v, path[i:i+1])
		if err != nil {
			return nil, err
		}
		v = next
	}
	switch x := v.(type) {
	case *Stub:
		return x.InvokePath(nil, args...).Await(ctx)
	case *Promise:
		return x.InvokePath(nil, args...).Await(ctx)
	case Target:
		return x.CallMethod(ctx, "", args)
	case nil:
		if len(path) == 0 {
			return nil, &Error{Name: "TypeError", Message: "no main object is served"}
		}
	}
	return nil, notAFunction(joinPath(path))
}

func joinPath(path []string) string {
	out := ""
	for i, p := range path {
		if i > 0 {
			out += "."
		}
		out += p
	}
	return out
}
