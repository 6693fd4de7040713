package capnweb

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Options configures a Session. The zero value gives the defaults.
type Options struct {
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
	// KeepObjectOrder makes received plain objects decode to
	// jsvalue.Object, in the order the peer wrote their keys, instead of
	// map[string]any.
	KeepObjectOrder bool
	// ErrorProps gives the own properties a Go error that is not an *Error
	// is sent with; nil sends its message alone.
	ErrorProps ErrorProps
	// BaseContext is the parent of every served call's context; default
	// context.Background(). Served calls are cancelled when it is.
	BaseContext context.Context
	// Dial and Accept are passed to coder/websocket by Dial and Accept.
	Dial   *websocket.DialOptions
	Accept *websocket.AcceptOptions
}

func (o Options) withDefaults() Options {
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.BaseContext == nil {
		o.BaseContext = context.Background()
	}
	if o.MaxExports <= 0 {
		o.MaxExports = 1 << 16
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
	// reserved is what the reader reserved of Options.Memory for the
	// message it reads and has not yet kept or given back.
	reserved int64

	wake        chan struct{}
	done        chan struct{}
	writerDone  chan struct{}
	writeCtx    context.Context
	writeCancel context.CancelFunc
	closeTimer  *time.Timer
	main        *Stub
	// releaseTimer wakes the writer for releases queued without waking it
	// (enqueueRelease) when nothing else went out meanwhile;
	// releaseArmed says it is set.
	releaseTimer *time.Timer
	releaseArmed bool

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
// (at most 5 s) for the last messages to be written.
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
	je := errorToJS(reason, s.opts.ErrorProps)
	e := &encoder{maxDepth: MaxDepth}
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
	once sync.Once
	s    *Session
	ex   *export // whose queue a released turn hands to a new goroutine
	kept bool    // the handler returned still holding its turn
}

func (t *turn) release() { t.once.Do(t.handOff) }

func (t *turn) handOff() { go t.s.runQueue(t.ex) }

// end is called when the handler returned: it reports whether the calling
// goroutine still runs the queue.
func (t *turn) end() bool {
	t.once.Do(func() { t.kept = true })
	return t.kept
}

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
	if c, ok := ctx.Value(servedKey{}).(*servedCall); ok && c.turn != nil {
		c.turn.release()
	}
}
