package capnweb

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
)

// errDisposed is the JavaScript library's text for using a released stub.
var errDisposed = &Error{Name: "Error", Message: "Attempted to use RPC stub after it has been disposed."}

// Stub is a reference to an object or function of the peer. Each Stub
// value is one handle: Dup makes another, Release drops this one, and the
// peer is told when the last handle is gone.
type Stub struct {
	sess     *Session
	ent      *importEntry
	released atomic.Bool
}

// Call calls method on the stub's object (method "" calls the stub itself,
// as for a callback) and waits for the result. Stubs in the result belong
// to the caller. If ctx ends first the result is given up.
func (s *Stub) Call(ctx context.Context, method string, args ...any) (any, error) {
	// The call is awaited at once, so its pull goes out with its push: one
	// write, and one wake-up of the peer, instead of two.
	p := s.invoke(methodPath(method), args, true)
	v, err := p.Await(ctx)
	if err != nil && ctx.Err() != nil && !p.settled() {
		p.Release()
	}
	return v, err
}

// Invoke sends a call of method and returns its promise without waiting.
// Await the promise, or Release it once it is no longer needed (for
// example when it was only used as an argument of further calls): until
// one of these, the peer keeps the result for pipelining.
func (s *Stub) Invoke(method string, args ...any) *Promise {
	return s.InvokePath(methodPath(method), args...)
}

// methodPath is the path that calls method; an empty method calls the
// target itself.
func methodPath(method string) []string {
	if method == "" {
		return nil
	}
	return []string{method}
}

// InvokePath calls the function found at path (an empty path calls the
// stub itself).
func (s *Stub) InvokePath(path []string, args ...any) *Promise {
	return s.invoke(path, args, false)
}

// invoke pushes a call of the function at path, its pull with it when pull
// is set.
func (s *Stub) invoke(path []string, args []any, pull bool) *Promise {
	if args == nil {
		args = []any{}
	}
	return s.sess.pushPulled(s, nil, path, args, true, pull)
}

// Get returns a promise for the property at path.
func (s *Stub) Get(path ...string) *Promise {
	return s.sess.push(s, nil, path, nil, false)
}

// Dup returns another handle on the same object. Dup of a released handle
// returns a released handle.
func (s *Stub) Dup() *Stub {
	if s.ent.id == 0 {
		return s
	}
	for {
		n := s.ent.handles.Load()
		if n <= 0 || s.released.Load() {
			d := &Stub{sess: s.sess, ent: s.ent}
			d.released.Store(true)
			return d
		}
		if s.ent.handles.CompareAndSwap(n, n+1) {
			return &Stub{sess: s.sess, ent: s.ent}
		}
	}
}

// Release drops this handle; when it was the last, the peer is told. It
// is idempotent, and does nothing on the main stub.
func (s *Stub) Release() {
	if s == nil || s.ent.id == 0 || !s.released.CompareAndSwap(false, true) {
		return
	}
	if s.ent.handles.Add(-1) == 0 {
		s.sess.releaseImport(s.ent)
	}
}

// Session returns the session the stub belongs to.
func (s *Stub) Session() *Session { return s.sess }

// Promise is the result of a call in flight. It can be awaited, used as an
// argument of further calls, and pipelined on before it settles.
type Promise struct {
	sess  *Session
	ent   *importEntry // the push whose result this is (part of); nil when local
	path  []string     // property path within that result
	local *cell        // the outcome when ent is nil

	mu      sync.Mutex
	derived *Promise // the property-read push made when a path promise is awaited
}

func rejected(s *Session, err error) *Promise {
	c := newCell()
	c.settle(nil, err)
	return &Promise{sess: s, local: c}
}

// push sends ["push", ["pipeline", id, path, args?]] on a stub or on an
// unsettled promise, and returns the promise of its result; nil when the
// promise's entry has been released (its result is then used locally).
func (s *Session) push(st *Stub, base *importEntry, path []string, args []any, hasArgs bool) *Promise {
	return s.pushPulled(st, base, path, args, hasArgs, false)
}

// pushPulled is push, which when pull is set also queues the result's pull
// right behind the push, in the same batch of the writer.
func (s *Session) pushPulled(st *Stub, base *importEntry, path []string, args []any, hasArgs, pull bool) *Promise {
	s.mu.Lock()
	if s.ended {
		err := s.err
		s.mu.Unlock()
		return rejected(s, err)
	}
	var id int64
	if st != nil {
		if st.released.Load() || st.ent.dropped {
			s.mu.Unlock()
			return rejected(s, errDisposed)
		}
		id = st.ent.id
	} else {
		if base.dropped {
			// Released since the caller looked: it works locally instead.
			s.mu.Unlock()
			return nil
		}
		id = base.id
	}
	e := s.newEncoder()
	e.buf = append(e.buf, `["push",["pipeline",`...)
	e.buf = strconv.AppendInt(e.buf, id, 10)
	if hasArgs || len(path) > 0 || st == nil {
		e.buf = append(e.buf, ',')
		e.path(path)
	}
	if hasArgs {
		e.buf = append(e.buf, ",["...)
		for i, a := range args {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(a, 1); err != nil {
				post := s.rollback(e)
				s.mu.Unlock()
				runAll(post)
				return rejected(s, err)
			}
		}
		e.buf = append(e.buf, ']')
	}
	e.buf = append(e.buf, "]]"...)
	ent := &importEntry{id: s.nextImport, intro: 1, cell: newCell()}
	s.nextImport++
	s.imports[ent.id] = ent
	post := s.commit(e)
	s.enqueue(e.buf)
	if pull {
		ent.pulled = true
		s.enqueue(idMessage(`["pull",`, ent.id))
	}
	s.mu.Unlock()
	runAll(post)
	return &Promise{sess: s, ent: ent}
}

func (p *Promise) settled() bool {
	if p.ent != nil {
		return p.ent.cell.isSettled()
	}
	return p.local.isSettled()
}

// peek returns the outcome of a promise that has settled and needs no
// further work to read.
func (p *Promise) peek() (any, error, bool) {
	if p.ent == nil {
		return p.local.peek()
	}
	if len(p.path) == 0 {
		return p.ent.cell.peek()
	}
	return nil, nil, false
}

// Await waits for the result. It may be called many times and returns the
// same value; stubs in it belong to the caller (Release releases them).
// Inside a served call it gives up the handler's turn (see Detach).
func (p *Promise) Await(ctx context.Context) (any, error) {
	Detach(ctx)
	if p.ent == nil {
		return p.local.wait(ctx)
	}
	if len(p.path) > 0 {
		return p.derive().Await(ctx)
	}
	p.pull()
	return p.ent.cell.wait(ctx)
}

// Pull asks the peer to send the result now, without waiting for it, so
// that it is already here when Await is called; Await pulls by itself.
// Use it when many calls are in flight and each will be awaited (a result
// only used in further calls need not be pulled).
func (p *Promise) Pull() {
	if p.ent == nil {
		return
	}
	if len(p.path) > 0 {
		p.derive().Pull()
		return
	}
	p.pull()
}

func (p *Promise) pull() {
	s := p.sess
	s.mu.Lock()
	if !p.ent.pulled && !p.ent.dropped && !s.ended {
		p.ent.pulled = true
		s.enqueue(idMessage(`["pull",`, p.ent.id))
	}
	s.mu.Unlock()
}

// derive returns the promise that reads this promise's path: a property
// read pushed to the peer while the base is unsettled, else a local walk.
func (p *Promise) derive() *Promise {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.derived != nil {
		return p.derived
	}
	s := p.sess
	p.derived = s.push(nil, p.ent, p.path, nil, false)
	if p.derived == nil {
		p.derived = s.localPromise(func(ctx context.Context) (any, error) {
			v, err := p.ent.cell.wait(ctx)
			if err != nil {
				return nil, err
			}
			return walkPath(ctx, v, p.path)
		})
	}
	return p.derived
}

// localPromise runs fn on the session's context and returns its promise.
func (s *Session) localPromise(fn func(ctx context.Context) (any, error)) *Promise {
	c := newCell()
	go func() {
		v, err := fn(s.ctx)
		c.settle(v, err)
	}()
	return &Promise{sess: s, local: c}
}

// Get returns a promise for the property at path of the result. Nothing
// is sent until it is awaited or used.
func (p *Promise) Get(path ...string) *Promise {
	full := append(append([]string(nil), p.path...), path...)
	if p.ent == nil {
		return p.sess.localPromise(func(ctx context.Context) (any, error) {
			v, err := p.local.wait(ctx)
			if err != nil {
				return nil, err
			}
			return walkPath(ctx, v, path)
		})
	}
	return &Promise{sess: p.sess, ent: p.ent, path: full}
}

// Invoke calls method on the result without waiting for it.
func (p *Promise) Invoke(method string, args ...any) *Promise {
	return p.InvokePath(methodPath(method), args...)
}

// InvokePath calls the function at path of the result: pipelined to the
// peer while the result is unsettled, else on the settled value.
func (p *Promise) InvokePath(path []string, args ...any) *Promise {
	if args == nil {
		args = []any{}
	}
	full := append(append([]string(nil), p.path...), path...)
	if p.ent != nil {
		if pr := p.sess.push(nil, p.ent, full, args, true); pr != nil {
			return pr
		}
	}
	return p.sess.localPromise(func(ctx context.Context) (any, error) {
		var v any
		var err error
		if p.ent != nil {
			v, err = p.ent.cell.wait(ctx)
			path = full
		} else {
			v, err = p.local.wait(ctx)
		}
		if err != nil {
			return nil, err
		}
		return callAt(ctx, v, path, args)
	})
}

// Release gives the promise up: before it settles the peer is told to
// drop the result; after, every stub in the result is released.
func (p *Promise) Release() {
	p.mu.Lock()
	d := p.derived
	p.mu.Unlock()
	if d != nil {
		d.Release()
	}
	if p.ent == nil {
		if v, _, ok := p.local.peek(); ok {
			walkStubs(v, (*Stub).Release)
		}
		return
	}
	if len(p.path) > 0 {
		return
	}
	s := p.sess
	s.mu.Lock()
	if !p.ent.dropped && !s.ended && !p.ent.cell.isSettled() {
		p.ent.dropped = true
		delete(s.imports, p.ent.id)
		s.enqueue(idMessage(`["release",`, p.ent.id, 1))
		s.mu.Unlock()
		p.ent.cell.settle(nil, errCanceled)
		return
	}
	s.mu.Unlock()
	if v, _, ok := p.ent.cell.peek(); ok {
		walkStubs(v, (*Stub).Release)
	}
}

var errCanceled = errors.New("RPC was canceled because the RpcPromise was disposed.")
