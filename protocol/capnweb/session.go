package capnweb

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Options configures a Session. The zero value gives the defaults.
type Options struct {
	// MaxDepth bounds the nesting of a received value; default 256, as in
	// the JavaScript library.
	MaxDepth int
	// MaxBigIntDigits bounds the digits of a received bigint; default
	// 16384, as in the JavaScript library.
	MaxBigIntDigits int
	// MaxMessageSize bounds one received message in bytes; default 1 MiB.
	// The WebSocket transport made by Dial and Accept uses it as its read
	// limit.
	MaxMessageSize int64
	// MaxExports bounds the peer's outstanding entries in our exports
	// table (calls it pushed and has not released, pipes); default 65536.
	// A peer beyond it is aborted, so a hostile peer cannot grow the
	// table without bound.
	MaxExports int
	// Memory, when set, is the budget this session's held bytes count
	// against (shared by the sessions of a server); see MemoryBudget.
	Memory *MemoryBudget
	// KeepObjectOrder makes received plain objects decode to Object, in
	// the order the peer wrote their keys, instead of map[string]any.
	KeepObjectOrder bool
	// BaseContext is the parent of every served call's context; default
	// context.Background(). Served calls are cancelled when it is.
	BaseContext context.Context
	// CloseTimeout bounds flushing the last messages when the session
	// ends; default 5s.
	CloseTimeout time.Duration
	// ReadSpin, when positive, is how long the read loop of a connection
	// made by Accept keeps polling an empty socket before it lets the
	// runtime wait for data, while messages have lately arrived within
	// that time; zero or negative: never poll (the default). It trades
	// CPU for latency, and while a connection polls the runtime does not
	// look for other ready network I/O in the process (see poll.go): use
	// it only in a process whose sessions are its only I/O.
	ReadSpin time.Duration
	// Dial and Accept are passed to coder/websocket by Dial and Accept.
	Dial   *websocket.DialOptions
	Accept *websocket.AcceptOptions
}

func (o Options) withDefaults() Options {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxBigIntDigits <= 0 {
		o.MaxBigIntDigits = DefaultMaxBigIntDigits
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.BaseContext == nil {
		o.BaseContext = context.Background()
	}
	if o.MaxExports <= 0 {
		o.MaxExports = 1 << 16
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 5 * time.Second
	}
	return o
}

// Stats are the sizes of a session's tables. Both include id 0 (the main
// objects) while the session runs; they return to their starting sizes
// once every call has settled and every stub has been released.
type Stats struct {
	Imports int
	Exports int
}

// Session is one capnweb RPC session over a Transport. All its methods
// are safe for concurrent use.
type Session struct {
	t    Transport
	opts Options

	// ctx is the parent of served calls; cancelled with the BrokenError.
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu          sync.Mutex
	exports     map[int64]*export
	imports     map[int64]*importEntry
	nextImport  int64 // id our next push takes (1, 2, …)
	nextExport  int64 // id our next export takes (-1, -2, …)
	peerNext    int64 // id the peer's next push takes in exports
	outq        [][]byte
	ended       bool
	closing     bool
	closeCode   int
	closeReason string
	err         *BrokenError
	// held is what the session has charged to Options.Memory.
	held int64

	wake        chan struct{}
	done        chan struct{}
	writerDone  chan struct{}
	writeCtx    context.Context
	writeCancel context.CancelFunc
	closeTimer  *time.Timer
	main        *Stub

	// parseScratch is the JSON parser's array scratch, reused from one
	// message to the next; only the reading goroutine touches it.
	parseScratch []any
}

// export is an entry of our exports table: something the peer may call.
type export struct {
	id       int64
	refcount int64
	value    any   // Target, or a *Stub of another session we forward to (owned)
	prom     *cell // push results and promise exports
	pulled   bool
	freed    bool
	retained []*Stub // stubs of the settled result, released when freed
	cost     int64   // bytes charged to the session's budget for it
	queue    []*delivery
	running  bool
}

// importEntry is an entry of our imports table: something of the peer.
type importEntry struct {
	id      int64
	intro   int64        // introductions by the peer: the release count
	handles atomic.Int64 // live Stub handles (stub entries)
	dropped bool         // released or forgotten; never used again
	cell    *cell        // promise entries: push results and ["promise"]
	pulled  bool
}

// delivery is one call or property read queued on an export, delivered
// in arrival order.
type delivery struct {
	path   []string
	args   []any
	call   bool
	result *cell
}

// NewSession starts a session over t serving main (nil serves nothing:
// calls on it fail) and returns at once.
func NewSession(t Transport, main Target, opts Options) *Session {
	opts = opts.withDefaults()
	s := &Session{
		t:          t,
		opts:       opts,
		exports:    map[int64]*export{},
		imports:    map[int64]*importEntry{},
		nextImport: 1,
		nextExport: -1,
		peerNext:   1,
		wake:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.WithValue(opts.BaseContext, sessionKey{}, s))
	s.writeCtx, s.writeCancel = context.WithCancel(context.Background())
	var mainValue any
	if main != nil {
		mainValue = main
	}
	s.exports[0] = &export{id: 0, refcount: 1, value: mainValue}
	ent := &importEntry{id: 0}
	ent.handles.Store(1)
	s.imports[0] = ent
	s.main = &Stub{sess: s, ent: ent}
	go s.readLoop()
	go s.writeLoop()
	return s
}

// Main returns the stub for the peer's main object. Releasing it does
// nothing; Close ends the session.
func (s *Session) Main() *Stub { return s.main }

// Close ends the session: pending calls fail with a *BrokenError, served
// calls are cancelled, and the transport closes with code 1000. It waits
// (at most Options.CloseTimeout) for the last messages to be written.
func (s *Session) Close() error {
	s.shutdown(ErrSessionClosed, nil, CloseNormal, "RPC session was closed")
	<-s.writerDone
	return nil
}

// CloseWith is Close with the close code and reason the peer reads: 1000,
// or 3000-4999 for an application's own, or 1001 for a server going away.
// The reason is cut to the 123 bytes a close frame holds.
func (s *Session) CloseWith(code int, reason string) error {
	s.shutdown(ErrSessionClosed, nil, code, reason)
	<-s.writerDone
	return nil
}

// Abort ends the session by sending an abort with reason to the peer, then
// closing with code 3000.
func (s *Session) Abort(reason error) {
	if reason == nil {
		reason = errors.New("RPC session aborted")
	}
	je := errorToJS(reason)
	e := &encoder{maxDepth: s.opts.MaxDepth}
	e.buf = append(e.buf, `["abort",`...)
	if err := e.errorValue(je, 0); err != nil {
		e.buf = append(e.buf[:0], `["abort",`...)
		_ = e.errorValue(&Error{Name: je.Name, Message: je.Message}, 0)
	}
	e.buf = append(e.buf, ']')
	s.shutdown(reason, e.buf, CloseAbort, je.Message)
}

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err is nil while the session runs, then the *BrokenError that ended it.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		return nil
	}
	return s.err
}

// Stats returns the current table sizes.
func (s *Session) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Imports: len(s.imports), Exports: len(s.exports)}
}

// turn is a served call's hold on its target's delivery queue. The
// queue's goroutine runs the handler itself (a goroutine per call would
// cost a thread wake-up per call); if the handler gives up its turn before
// it returns (Detach, or awaiting a promise), the rest of the queue moves
// to a new goroutine and this one ends with the handler.
type turn struct {
	once    sync.Once
	handOff func()
	kept    bool // the handler returned still holding its turn
}

func (t *turn) release() { t.once.Do(t.handOff) }

// end is called when the handler returned: it reports whether the calling
// goroutine still runs the queue.
func (t *turn) end() bool {
	t.once.Do(func() { t.kept = true })
	return t.kept
}

type turnKey struct{}

type sessionKey struct{}

// CallSession returns the session a served call arrived on, or nil
// outside a served call.
func CallSession(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// Detach releases the calling handler's turn on its target, so the next
// call on the same target may start while this one keeps running. Call it
// before long work that does not wait on RPC results. It does nothing
// outside a served call.
func Detach(ctx context.Context) {
	if t, ok := ctx.Value(turnKey{}).(*turn); ok {
		t.release()
	}
}

// ---- outgoing ----

// enqueue queues one message for the writer. Caller holds s.mu.
func (s *Session) enqueue(msg []byte) {
	if s.ended {
		return
	}
	// Messages waiting for the writer count until written; an abort this
	// picks runs on its own, since the caller holds s.mu.
	if abort := s.account(int64(len(msg))); abort != nil {
		go abort()
	}
	s.outq = append(s.outq, msg)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Session) writeLoop() {
	defer close(s.writerDone)
	var werr error
	for {
		s.mu.Lock()
		for len(s.outq) == 0 && !s.closing {
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		batch := s.outq
		s.outq = nil
		closing, code, reason := s.closing, s.closeCode, s.closeReason
		s.mu.Unlock()
		if werr == nil && len(batch) > 0 {
			if bw, ok := s.t.(MessageBatchWriter); ok && len(batch) > 1 {
				werr = bw.WriteMessages(s.writeCtx, batch)
			} else {
				for _, m := range batch {
					if werr = s.t.WriteMessage(s.writeCtx, m); werr != nil {
						break
					}
				}
			}
			if werr != nil {
				s.shutdown(fmt.Errorf("write failed: %w", werr), nil, 1011, "write failed")
			}
			var written int64
			for _, m := range batch {
				written += int64(len(m))
			}
			s.mu.Lock()
			s.account(-written) // giving back never aborts
			s.mu.Unlock()
		}
		if closing && len(batch) == 0 {
			_ = s.t.Close(code, reason)
			s.mu.Lock()
			if s.closeTimer != nil {
				s.closeTimer.Stop()
			}
			s.mu.Unlock()
			s.writeCancel()
			return
		}
	}
}

func (s *Session) newEncoder() *encoder {
	return &encoder{s: s, maxDepth: s.opts.MaxDepth, buf: make([]byte, 0, 128)}
}

// commit makes the exports created by a successful encoding live. Caller
// holds s.mu; the returned actions run after it is released.
func (s *Session) commit(e *encoder) []func() {
	for _, ex := range e.pending {
		s.exports[ex.id] = ex
	}
	post := e.post
	for i, ex := range e.promises {
		ex, p := ex, e.foreign[i]
		post = append(post, func() {
			ex.prom.then(func(v any, err error) { s.sendResolution(ex, v, err) })
			go func() {
				v, err := p.Await(s.ctx)
				ex.prom.settle(v, err)
			}()
		})
	}
	return post
}

// rollback undoes a failed encoding; the ids it took stay used, as in JS.
func (s *Session) rollback(e *encoder) []func() {
	var post []func()
	for _, d := range e.dups {
		post = append(post, d.Release)
	}
	return post
}

func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// sendResolution answers a pulled promise export with resolve or reject.
func (s *Session) sendResolution(ex *export, v any, err error) {
	s.mu.Lock()
	if s.ended || ex.freed {
		s.mu.Unlock()
		return
	}
	var post []func()
	if err == nil {
		e := s.newEncoder()
		e.buf = append(e.buf, `["resolve",`...)
		e.buf = strconv.AppendInt(e.buf, ex.id, 10)
		e.buf = append(e.buf, ',')
		if encErr := e.value(v, 0); encErr != nil {
			post = append(post, s.rollback(e)...)
			err = encErr
		} else {
			e.buf = append(e.buf, ']')
			post = append(post, s.commit(e)...)
			s.enqueue(e.buf)
		}
	}
	if err != nil {
		s.enqueue(s.rejectMessage(ex.id, err, &post))
	}
	s.mu.Unlock()
	runAll(post)
}

// rejectMessage encodes ["reject", id, reason]. Caller holds s.mu.
func (s *Session) rejectMessage(id int64, reason error, post *[]func()) []byte {
	var val any
	var th *Thrown
	if errors.As(reason, &th) {
		val = th.Value
	} else {
		val = errorToJS(reason)
	}
	e := s.newEncoder()
	e.buf = append(e.buf, `["reject",`...)
	e.buf = strconv.AppendInt(e.buf, id, 10)
	e.buf = append(e.buf, ',')
	if err := e.value(val, 0); err != nil {
		*post = append(*post, s.rollback(e)...)
		je := errorToJS(reason)
		e = s.newEncoder()
		e.buf = append(e.buf, `["reject",`...)
		e.buf = strconv.AppendInt(e.buf, id, 10)
		e.buf = append(e.buf, ',')
		_ = e.errorValue(&Error{Name: je.Name, Message: je.Message}, 0)
	} else {
		*post = append(*post, s.commit(e)...)
	}
	return append(e.buf, ']')
}

// ---- session end ----

func (s *Session) shutdown(cause error, abortMsg []byte, code int, reason string) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	be := &BrokenError{Cause: cause}
	var ce *CloseError
	var pe *ProtocolError
	switch {
	case errors.As(cause, &ce):
		be.CloseCode, be.Reason = ce.Code, ce.Reason
		be.text = fmt.Sprintf("capnweb: connection broken: peer closed the connection: %d %s", ce.Code, ce.Reason)
	case errors.As(cause, &pe):
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: protocol error: " + pe.Reason
	case cause == ErrSessionClosed:
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: RPC session was closed"
	case abortMsg != nil:
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: session aborted: " + cause.Error()
	default:
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: " + cause.Error()
	}
	s.err = be
	s.releaseAll()
	s.ended = true
	var cells []*cell
	for _, ent := range s.imports {
		ent.dropped = true
		if ent.cell != nil {
			cells = append(cells, ent.cell)
		}
	}
	var post []func()
	for _, ex := range s.exports {
		ex.freed = true
		post = append(post, ex.releaseOwned()...)
		if ex.prom != nil {
			cells = append(cells, ex.prom)
		}
		for _, d := range ex.queue {
			cells = append(cells, d.result)
		}
		ex.queue = nil
	}
	s.imports = map[int64]*importEntry{}
	s.exports = map[int64]*export{}
	if abortMsg != nil {
		s.outq = append(s.outq, abortMsg)
	}
	s.closing = true
	s.closeCode, s.closeReason = code, truncateReason(reason)
	s.closeTimer = time.AfterFunc(s.opts.CloseTimeout, s.writeCancel)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.mu.Unlock()
	s.cancel(be)
	for _, c := range cells {
		c.settle(nil, be)
	}
	runAll(post)
	close(s.done)
}

// releaseOwned returns the releases of the stubs an export holds. Caller
// holds s.mu.
func (ex *export) releaseOwned() []func() {
	var post []func()
	for _, st := range ex.retained {
		post = append(post, st.Release)
	}
	ex.retained = nil
	if st, ok := ex.value.(*Stub); ok {
		post = append(post, st.Release)
	}
	if d, ok := ex.value.(Disposer); ok {
		post = append(post, func() { go d.Dispose() })
	}
	return post
}

// truncateReason cuts a close reason to 123 bytes on a character
// boundary, the most a WebSocket close frame carries.
func truncateReason(r string) string {
	r = strings.ToValidUTF8(r, "\uFFFD")
	if len(r) <= 123 {
		return r
	}
	r = r[:123]
	for len(r) > 0 && !utf8.ValidString(r) {
		r = r[:len(r)-1]
	}
	return r
}

// protocolError aborts the session because the peer sent malformed input.
// The reason may quote the peer's bytes: what goes back is valid UTF-8
// (each invalid sequence, lone surrogates included, becomes U+FFFD), so
// the abort never echoes what the peer should not have sent.
func (s *Session) protocolError(pe *ProtocolError) {
	reason := strings.ToValidUTF8(pe.Reason, "\uFFFD")
	e := &encoder{maxDepth: s.opts.MaxDepth}
	e.buf = append(e.buf, `["abort",`...)
	_ = e.errorValue(&Error{Name: "Error", Message: reason}, 0)
	e.buf = append(e.buf, ']')
	s.shutdown(pe, e.buf, CloseAbort, reason)
}

// ---- incoming ----

func (s *Session) readLoop() {
	for {
		msg, err := s.t.ReadMessage(context.Background())
		if err != nil {
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
		if perr := s.handleMessage(msg); perr != nil {
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

func (s *Session) newEvaluator() *evaluator {
	return &evaluator{s: s, maxDepth: s.opts.MaxDepth, maxBig: s.opts.MaxBigIntDigits, keepOrder: s.opts.KeepObjectOrder}
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
	msg, err := parseMessageScratch(raw, s.opts.MaxDepth, &s.parseScratch)
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
		if len(s.exports) >= s.opts.MaxExports {
			s.mu.Unlock()
			return &ProtocolError{Reason: OutstandingCallsText(s.opts.MaxExports)}
		}
		id := s.peerNext
		s.peerNext++
		s.exports[id] = &export{id: id, refcount: 1, value: streamRefuser{}}
		s.mu.Unlock()
		return nil
	}
	return badMessage(raw)
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
	if len(s.exports) >= s.opts.MaxExports {
		s.mu.Unlock()
		return &ProtocolError{Reason: OutstandingCallsText(s.opts.MaxExports)}
	}
	id := s.peerNext
	s.peerNext++
	ex := &export{id: id, refcount: 1, cost: int64(size) + exportOverhead}
	if abort := s.account(ex.cost); abort != nil {
		defer abort() // after the lock is released
	}
	ev := s.newEvaluator()
	v, err := ev.eval(expr, 0)
	if err != nil {
		var ue *unsupportedError
		if !errors.As(err, &ue) {
			s.mu.Unlock()
			return asProto(err)
		}
		ex.prom = newCell()
		s.exports[id] = ex
		s.mu.Unlock()
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
	if err != nil && !errors.As(err, &ue) {
		s.mu.Unlock()
		return asProto(err)
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
	msg := []byte(`["release",`)
	msg = strconv.AppendInt(msg, id, 10)
	msg = append(msg, ',')
	msg = strconv.AppendInt(msg, ent.intro, 10)
	msg = append(msg, ']')
	s.enqueue(msg)
	s.mu.Unlock()
	if ue != nil {
		for _, st := range ev.stubs {
			st.Release()
		}
		ent.cell.settle(nil, ue.err)
		return nil
	}
	finish := func(v any, err error) {
		if err == nil && reject {
			err = rejection(v)
			v = nil
		}
		ent.cell.settle(v, err)
	}
	if ev.holes {
		go func() {
			filled, err := fill(s.ctx, v)
			finish(filled, err)
		}()
	} else {
		finish(v, nil)
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
	msg := []byte(`["release",`)
	msg = strconv.AppendInt(msg, ent.id, 10)
	msg = append(msg, ',')
	msg = strconv.AppendInt(msg, ent.intro, 10)
	msg = append(msg, ']')
	s.enqueue(msg)
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
			s.perform(ctx, target, d, args.([]any), nil)
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
	t := &turn{handOff: func() { go s.runQueue(ex) }}
	s.perform(ctx, target, d, argList, t)
	return t.end()
}

// perform runs one delivery's call and settles its result. t, when not
// nil, is the target's turn, which the handler may give up before it
// returns (Detach, or awaiting a promise).
func (s *Session) perform(ctx context.Context, target any, d *delivery, args []any, t *turn) {
	var v any
	var err error
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &Error{Name: "Error", Message: fmt.Sprintf("internal error: handler panicked: %v", r)}
		}
		// Settled before the queue moves on (runDelivery returns), so
		// that the next call on this target already sees this result.
		d.result.settle(v, err)
	}()
	if !d.call {
		v, err = walkPath(ctx, target, d.path)
		return
	}
	if t != nil {
		ctx = context.WithValue(ctx, turnKey{}, t)
	}
	v, err = callAt(ctx, target, d.path, args)
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
