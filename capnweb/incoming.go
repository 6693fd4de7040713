package capnweb

import (
	"context"
	"errors"
	"runtime"
)

// Incoming: the reader goroutine and the handling of every message the peer
// sends.

func (s *Session) readLoop() {
	gate := s.reserveRead // one func value for the session's reads
	for {
		msg, err := s.read(gate)
		if err != nil {
			s.returnReserved()
			var pe *ProtocolError
			var ce *CloseError
			switch {
			case errors.As(err, &pe):
				s.protocolError(pe)
			case errors.As(err, &ce):
				s.shutdown(ce, nil, ce.Code, ce.Reason)
			default:
				s.shutdown(err, nil, 1011, "transport failed")
			}
			return
		}
		if int64(len(msg)) > s.opts.MaxMessageSize {
			s.protocolError(protoErrorf("message of %d bytes exceeds the limit of %d", len(msg), s.opts.MaxMessageSize))
			return
		}
		perr := s.handleMessage(msg)
		s.returnReserved()
		if perr != nil {
			s.protocolError(perr)
			return
		}
		// Let what the message woke (a caller awaiting its result, a call
		// just delivered) run now, on this thread, rather than wait for
		// another thread to be woken to take it over; this loop would only
		// go back to a socket that is most often empty.
		runtime.Gosched()
		select {
		case <-s.done:
			return
		default:
		}
	}
}

// read reads the next message; over a transport that can wait once a
// message begins to arrive, only when the memory budget has room for it
// (gate, which is s.reserveRead).
func (s *Session) read(gate func() bool) ([]byte, error) {
	if gr, ok := s.t.(gatedReader); ok && s.opts.Memory != nil {
		return gr.readGated(context.Background(), gate)
	}
	return s.t.ReadMessage(context.Background())
}

func (s *Session) newEvaluator() *evaluator {
	return &evaluator{s: s, maxDepth: MaxDepth, maxBig: MaxBigIntDigits, keepOrder: s.opts.KeepObjectOrder}
}

// handleMessage dispatches one message. It never waits for application
// work. A returned error aborts the session.
func (s *Session) handleMessage(raw []byte) (perr *ProtocolError) {
	defer func() {
		if r := recover(); r != nil {
			perr = protoErrorf("internal error handling message: %v", r)
		}
	}()
	return s.dispatch(raw)
}

// dispatch is handleMessage without the panic guard (fuzzed directly).
func (s *Session) dispatch(raw []byte) *ProtocolError {
	msg, err := parseMessageScratch(raw, MaxDepth, &s.parseScratch)
	if err != nil {
		return asProto(err)
	}
	switch msg[0].(string) {
	case "push":
		if len(msg) < 2 {
			return badMessage(raw)
		}
		return s.handlePush(msg[1], len(raw))
	case "pull":
		if len(msg) < 2 {
			return badMessage(raw)
		}
		id, ok := intID(msg[1])
		if !ok {
			return badMessage(raw)
		}
		return s.handlePull(id)
	case "resolve", "reject":
		if len(msg) < 3 {
			return badMessage(raw)
		}
		id, ok := intID(msg[1])
		if !ok {
			return badMessage(raw)
		}
		return s.handleResolve(id, msg[2], msg[0] == "reject")
	case "release":
		if len(msg) < 3 {
			return badMessage(raw)
		}
		id, ok1 := intID(msg[1])
		n, ok2 := intID(msg[2])
		if !ok1 || !ok2 || n < 1 {
			return badMessage(raw)
		}
		return s.handleRelease(id, n)
	case "abort":
		if len(msg) < 2 {
			return badMessage(raw)
		}
		s.handleAbort(msg[1])
		return nil
	case "stream":
		if len(msg) < 2 {
			return badMessage(raw)
		}
		s.mu.Lock()
		id := s.peerNext
		s.peerNext++
		var post []func()
		s.enqueue(s.rejectMessage(id, errStreams, &post))
		s.mu.Unlock()
		runAll(post)
		return nil
	case "pipe":
		s.mu.Lock()
		id, perr := s.nextPeerExport()
		if perr != nil {
			s.mu.Unlock()
			return perr
		}
		s.exports[id] = &export{id: id, refcount: 1, value: streamRefuser{}}
		s.mu.Unlock()
		return nil
	}
	return badMessage(raw)
}

// nextPeerExport takes the next id the peer numbers its exports with (a
// push, a pipe), or refuses one past MaxExports. Caller holds s.mu.
func (s *Session) nextPeerExport() (int64, *ProtocolError) {
	if len(s.exports) >= s.opts.MaxExports {
		return 0, &ProtocolError{Reason: OutstandingCallsText(s.opts.MaxExports)}
	}
	id := s.peerNext
	s.peerNext++
	return id, nil
}

func asProto(err error) *ProtocolError {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return pe
	}
	return &ProtocolError{Reason: err.Error()}
}

var errStreams = &Error{Name: "TypeError", Message: "capnweb Go peer does not support streams"}

// streamRefuser is the writable end of a pipe the peer creates: every
// write fails, since this peer does not support streams.
type streamRefuser struct{}

func (streamRefuser) CallMethod(context.Context, string, []any) (any, error) {
	return nil, errStreams
}

func (s *Session) handlePush(expr any, size int) *ProtocolError {
	s.mu.Lock()
	id, perr := s.nextPeerExport()
	if perr != nil {
		s.mu.Unlock()
		return perr
	}
	ex := &export{id: id, refcount: 1, cost: int64(size) + exportOverhead}
	if abort := s.accountReserved(ex.cost); abort != nil {
		defer abort() // after the lock is released
	}
	// The call's decoded arguments, and what its handler makes of them,
	// are held until it settles.
	decoded := s.chargeWhile(callFactor * int64(size))
	ev := s.newEvaluator()
	v, err := ev.eval(expr, 0)
	if err != nil {
		ue := asUnsupported(err)
		if ue == nil {
			s.mu.Unlock()
			decoded()
			return asProto(err)
		}
		ex.prom = newCell()
		s.exports[id] = ex
		s.mu.Unlock()
		decoded()
		for _, st := range ev.stubs {
			st.Release()
		}
		ex.prom.settle(nil, ue.err)
		return nil
	}
	h, isHole := v.(*hole)
	direct := isHole && h.fresh && len(h.path) == 0
	if direct {
		ex.prom = h.c
	} else {
		ex.prom = newCell()
	}
	s.exports[id] = ex
	owned := ev.stubs
	// Arguments' stubs are released when the call settles, except those
	// the result hands on, which live as long as the result's entry.
	ex.prom.then(func(res any, _ error) {
		decoded()
		var inResult map[*Stub]bool
		walkStubs(res, func(st *Stub) {
			if inResult == nil {
				inResult = map[*Stub]bool{}
			}
			inResult[st] = true
		})
		if inResult == nil && len(owned) == 0 {
			return
		}
		s.mu.Lock()
		var rel []func()
		if !ex.freed && !s.ended {
			for st := range inResult {
				ex.retained = append(ex.retained, st)
			}
		} else {
			for st := range inResult {
				rel = append(rel, st.Release)
			}
		}
		s.mu.Unlock()
		for _, st := range owned {
			if !inResult[st] {
				st.Release()
			}
		}
		runAll(rel)
	})
	s.mu.Unlock()
	s.chargeResult(ex)
	if !direct {
		if ev.holes {
			go func() {
				filled, err := fill(s.ctx, v)
				ex.prom.settle(filled, err)
			}()
		} else {
			ex.prom.settle(v, nil)
		}
	}
	return nil
}

// chargeResult charges the result of a pushed call to the session's
// budget once it settles, until the peer releases it.
func (s *Session) chargeResult(ex *export) {
	if s.opts.Memory == nil {
		return
	}
	ex.prom.then(func(v any, err error) {
		n := approxSize(v, 0)
		if err != nil {
			n += approxSize(err, 0)
		}
		s.mu.Lock()
		var abort func()
		if !ex.freed {
			ex.cost += n
			abort = s.account(n)
		}
		s.mu.Unlock()
		if abort != nil {
			abort()
		}
	})
}

func (s *Session) handlePull(id int64) *ProtocolError {
	s.mu.Lock()
	ex := s.exports[id]
	if ex == nil {
		s.mu.Unlock()
		return protoErrorf("no such export ID: %d", id)
	}
	if ex.pulled {
		s.mu.Unlock()
		return nil
	}
	ex.pulled = true
	if ex.prom == nil {
		var post []func()
		s.enqueue(s.rejectMessage(id, &Error{Name: "Error", Message: "Tried to resolve a non-promise stub."}, &post))
		s.mu.Unlock()
		runAll(post)
		return nil
	}
	s.mu.Unlock()
	ex.prom.then(func(v any, err error) { s.sendResolution(ex, v, err) })
	return nil
}

func (s *Session) handleRelease(id, n int64) *ProtocolError {
	s.mu.Lock()
	ex := s.exports[id]
	if ex == nil {
		s.mu.Unlock()
		return protoErrorf("no such export ID: %d", id)
	}
	if n > ex.refcount {
		s.mu.Unlock()
		return protoErrorf("refcount would go negative for export ID %d", id)
	}
	ex.refcount -= n
	var post []func()
	if ex.refcount == 0 {
		delete(s.exports, id)
		ex.freed = true
		post = ex.releaseOwned()
		s.account(-ex.cost)
	}
	s.mu.Unlock()
	runAll(post)
	return nil
}

func (s *Session) handleResolve(id int64, expr any, reject bool) *ProtocolError {
	s.mu.Lock()
	ev := s.newEvaluator()
	v, err := ev.eval(expr, 0)
	var ue *unsupportedError
	if err != nil {
		// (Found in a function of its own: a variable errors.As writes to
		// is a heap allocation wherever it is declared.)
		if ue = asUnsupported(err); ue == nil {
			s.mu.Unlock()
			return asProto(err)
		}
	}
	ent := s.imports[id]
	if ent == nil || ent.cell == nil || ent.dropped {
		// Unknown or not a promise: dispose of what the value brought.
		s.mu.Unlock()
		for _, st := range ev.stubs {
			st.Release()
		}
		return nil
	}
	delete(s.imports, id)
	ent.dropped = true
	s.enqueueRelease(idMessage(`["release",`, id, ent.intro))
	s.mu.Unlock()
	if ue != nil {
		for _, st := range ev.stubs {
			st.Release()
		}
		ent.cell.settle(nil, ue.err)
		return nil
	}
	if ev.holes {
		go func() {
			filled, err := fill(s.ctx, v)
			settleResolution(ent.cell, filled, err, reject)
		}()
	} else {
		settleResolution(ent.cell, v, nil, reject)
	}
	return nil
}

// settleResolution settles an import's promise with its resolution: a
// reject's value becomes the error.
func settleResolution(c *cell, v any, err error, reject bool) {
	if err == nil && reject {
		err = rejection(v)
		v = nil
	}
	c.settle(v, err)
}

// asUnsupported is err's *unsupportedError, or nil.
func asUnsupported(err error) *unsupportedError {
	var ue *unsupportedError
	if errors.As(err, &ue) {
		return ue
	}
	return nil
}

// rejection turns a received reject value into a Go error.
func rejection(v any) error {
	if e, ok := v.(*Error); ok {
		return e
	}
	return &Thrown{Value: v}
}

func (s *Session) handleAbort(expr any) {
	s.mu.Lock()
	ev := s.newEvaluator()
	v, err := ev.eval(expr, 0)
	s.mu.Unlock()
	var reason error
	switch {
	case err != nil:
		reason = errors.New("peer aborted the session with an unreadable reason")
	default:
		reason = rejection(v)
	}
	msg := reason.Error()
	if e, ok := reason.(*Error); ok {
		msg = e.Message
	}
	cause := &peerAbort{reason}
	s.shutdown(cause, nil, CloseAbort, msg)
}

// peerAbort is the cause of a session the peer aborted.
type peerAbort struct{ reason error }

func (p *peerAbort) Error() string { return "peer aborted the session: " + p.reason.Error() }
func (p *peerAbort) Unwrap() error { return p.reason }

// introduceStub records an ["export", id] of the peer. Caller holds s.mu.
func (s *Session) introduceStub(ev *evaluator, id int64) (*Stub, error) {
	if id >= 0 {
		return nil, protoErrorf("export ID must be negative: %d", id)
	}
	ent := s.imports[id]
	if ent != nil && ent.cell != nil {
		return nil, protoErrorf("ID %d is already a promise", id)
	}
	if ent == nil {
		ent = &importEntry{id: id}
		s.imports[id] = ent
	}
	ent.intro++
	ent.handles.Add(1)
	st := &Stub{sess: s, ent: ent}
	ev.stubs = append(ev.stubs, st)
	return st, nil
}

// introducePromise records a ["promise", id] of the peer. Caller holds s.mu.
func (s *Session) introducePromise(ev *evaluator, id int64) (*importEntry, error) {
	if id >= 0 {
		return nil, protoErrorf("promise ID must be negative: %d", id)
	}
	if s.imports[id] != nil {
		return nil, protoErrorf("promise ID %d is already imported", id)
	}
	ent := &importEntry{id: id, intro: 1, cell: newCell(), pulled: true}
	s.imports[id] = ent
	ev.promises = append(ev.promises, ent)
	return ent, nil
}

// releaseImport tells the peer we dropped every handle of ent.
func (s *Session) releaseImport(ent *importEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ent.dropped || ent.handles.Load() > 0 || s.ended {
		return
	}
	ent.dropped = true
	delete(s.imports, ent.id)
	s.enqueue(idMessage(`["release",`, ent.id, ent.intro))
}

// reference evaluates ["import"|"pipeline", id, path, args] against our
// exports. Caller holds s.mu.
func (s *Session) reference(ev *evaluator, id int64, path []string, args []any, hasArgs bool) (any, error) {
	ex := s.exports[id]
	if ex == nil {
		return nil, protoErrorf("no such entry on exports table: %d", id)
	}
	if hasArgs || len(path) > 0 || ex.prom != nil {
		if !hasArgs && ex.prom != nil {
			ev.holes = true
			return &hole{c: ex.prom, path: path}, nil
		}
		d := &delivery{path: path, args: args, call: hasArgs, result: newCell()}
		s.deliver(ex, d)
		ev.holes = true
		return &hole{c: d.result, fresh: true}, nil
	}
	if st, ok := ex.value.(*Stub); ok {
		// Our forwarding export came back: hand out a handle of our own.
		d := st.Dup()
		ev.stubs = append(ev.stubs, d)
		return d, nil
	}
	return ex.value, nil
}
