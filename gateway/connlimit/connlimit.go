// Package connlimit bounds what clients can hold on a listener before they
// prove who they are. A connection counts as unauthenticated from its
// accept until the handler calls Authenticated. Past MaxUnauthenticated
// such connections the oldest that has sent nothing yet is closed; those
// that sent something (a request being read and authenticated, which takes
// a prompt client milliseconds) are closed only past a larger bound, the
// oldest first. A flood of connections that never speak therefore never
// closes a client that sent its request, a burst of real clients larger
// than MaxUnauthenticated is served whole, and
// on Linux the kernel holds such connections back from the listener for
// DeferAccept besides (TCP_DEFER_ACCEPT, as nginx's "deferred" listen
// parameter), so that they rarely reach it. And the listener accepts no more
// connections than the process's descriptor limit leaves after a reserve,
// so that at any load the process still has descriptors for what it must
// open itself (worker processes' pipes above all): past that point it
// stops accepting, and new clients wait in the kernel's backlog.
package connlimit

import (
	"container/list"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultMaxUnauthenticated = 256
	DefaultReserve            = 128
	DefaultDeferAccept        = 10 * time.Second
)

// MaxSpoken bounds the unauthenticated connections that sent something,
// and MaxHeaderBytes what each may send before it is authenticated (give
// it to the http.Server): together they bound what a slow sender's
// connections hold.
const (
	MaxSpoken      = 4096
	MaxHeaderBytes = 32 << 10
)

// SpokenGrace is how long a connection that spoke may take to be
// authenticated before, at MaxSpoken, a new connection closes it; until
// then new connections wait in the kernel's backlog.
const SpokenGrace = 2 * time.Second

// Options configures a Listener. Every zero field takes its default.
type Options struct {
	// MaxUnauthenticated is how many accepted connections may be waiting
	// for authentication at once, and at most half of those the
	// descriptor bound lets the listener hold, before the oldest of them
	// that has sent nothing is closed. Those that sent something are
	// closed, the oldest first, past MaxSpoken (or that half).
	MaxUnauthenticated int
	// Reserve is how many descriptors under the process's limit the
	// listener leaves for the rest of the process.
	Reserve int
	// DescriptorLimit is the process's descriptor limit; default the
	// current soft RLIMIT_NOFILE (no bound where there is none).
	DescriptorLimit int
	// DeferAccept is how long the kernel may hold a new TCP connection
	// that has sent nothing before the listener accepts it (Linux only;
	// elsewhere nothing holds it). Negative: not at all.
	DeferAccept time.Duration
}

// Listener is a net.Listener under those bounds. Give ConnContext to the
// http.Server that serves it.
type Listener struct {
	net.Listener
	maxOpen    int // 0: no bound
	maxPending int // unauthenticated connections past which a silent one goes
	maxSpoken  int // unauthenticated connections that spoke past which the oldest goes

	mu     sync.Mutex
	room   *sync.Cond // signalled when a connection closes
	open   int
	silent list.List // *Conn waiting for authentication that sent nothing yet, oldest first
	spoken list.List // *Conn waiting for authentication that sent something, oldest first
	closed bool
}

// New wraps inner.
func New(inner net.Listener, o Options) *Listener {
	if o.MaxUnauthenticated <= 0 {
		o.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if o.Reserve <= 0 {
		o.Reserve = DefaultReserve
	}
	if o.DescriptorLimit <= 0 {
		o.DescriptorLimit = descriptorLimit()
	}
	if o.DeferAccept == 0 {
		o.DeferAccept = DefaultDeferAccept
	}
	if tl, ok := inner.(*net.TCPListener); ok && o.DeferAccept > 0 {
		// Best effort: a listener without it still bounds what it holds.
		_ = deferAccept(tl, o.DeferAccept)
	}
	l := &Listener{Listener: inner, maxPending: o.MaxUnauthenticated}
	if o.DescriptorLimit > 0 {
		// At least one connection, even under a reserve larger than the
		// limit: a listener that never accepts would serve nobody.
		l.maxOpen = max(o.DescriptorLimit-o.Reserve, 1)
		// Unauthenticated connections take at most half the places, so
		// that they never stop the listener accepting: past their bound
		// a new connection closes an old one instead.
		l.maxPending = max(min(l.maxPending, l.maxOpen/2), 1)
	}
	// Those that spoke may take the rest of that half, up to the kernel's
	// usual accept backlog: a burst the kernel would have queued is served,
	// and what they hold (a goroutine and their request headers, at most
	// MaxHeaderBytes) stays bounded.
	l.maxSpoken = MaxSpoken
	if l.maxOpen > 0 {
		l.maxSpoken = min(l.maxSpoken, l.maxOpen/2)
	}
	l.maxSpoken = max(l.maxSpoken, l.maxPending)
	l.room = sync.NewCond(&l.mu)
	return l
}

// MaxOpen is how many connections the listener keeps open at most; 0 when
// there is no bound.
func (l *Listener) MaxOpen() int { return l.maxOpen }

// Accept waits until there is room under the descriptor bound (and, at
// MaxSpoken connections that spoke, until the oldest has had SpokenGrace),
// then accepts, closing an unauthenticated connection when there are too
// many: the oldest silent one past MaxUnauthenticated, else the oldest
// that spoke past MaxSpoken.
func (l *Listener) Accept() (net.Conn, error) {
	l.mu.Lock()
	for !l.closed {
		if l.maxOpen > 0 && l.open >= l.maxOpen {
			l.room.Wait()
			continue
		}
		if l.silent.Len() == 0 && l.spoken.Len() >= l.maxSpoken {
			// A burst of clients that spoke: they are being authenticated,
			// which takes each milliseconds; the next waits in the backlog
			// rather than close one of them, unless the oldest has taken
			// longer than SpokenGrace (a sender too slow to wait for).
			if wait := time.Until(l.spoken.Front().Value.(*Conn).since.Add(SpokenGrace)); wait > 0 {
				t := time.AfterFunc(wait, l.wake)
				l.room.Wait()
				t.Stop()
				continue
			}
		}
		break
	}
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &Conn{Conn: c, l: l, since: time.Now()}
	// A client that sent its request before the accept (all of them, where
	// the kernel defers accepts) has spoken already: the flood accepted
	// after it must not make it the oldest silent connection before the
	// server's first read. (Asked before the lock: it is a system call.)
	spoke := hasPending(c)
	var evicted *Conn
	l.mu.Lock()
	l.open++
	var from *list.List
	switch {
	case l.silent.Len() > 0 && l.silent.Len()+l.spoken.Len() >= l.maxPending:
		from = &l.silent
	case l.spoken.Len() >= l.maxSpoken:
		from = &l.spoken
	}
	if from != nil {
		evicted = from.Front().Value.(*Conn)
		evicted.leaveLocked()
	}
	if spoke {
		tc.spoke.Store(true)
		tc.elem, tc.in = l.spoken.PushBack(tc), &l.spoken
	} else {
		tc.elem, tc.in = l.silent.PushBack(tc), &l.silent
	}
	l.mu.Unlock()
	if evicted != nil {
		evicted.Close()
	}
	return tc, nil
}

// wake wakes an Accept waiting for room.
func (l *Listener) wake() {
	l.mu.Lock()
	l.room.Broadcast()
	l.mu.Unlock()
}

// Close closes the listener and wakes an Accept waiting for room.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// Counts are how many connections are open and how many of them wait for
// authentication.
func (l *Listener) Counts() (open, unauthenticated int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, l.silent.Len() + l.spoken.Len()
}

// Conn is an accepted connection.
type Conn struct {
	net.Conn
	l     *Listener
	since time.Time   // accepted
	spoke atomic.Bool // a Read returned bytes
	once  sync.Once

	// Guarded by l.mu: while unauthenticated, the connection's element
	// and the list that holds it (l.silent or l.spoken).
	elem *list.Element
	in   *list.List
}

// Read reads from the connection; its first bytes move it from the silent
// connections to those that spoke.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.spoke.Load() && c.spoke.CompareAndSwap(false, true) {
		c.l.mu.Lock()
		if c.in == &c.l.silent {
			c.l.silent.Remove(c.elem)
			c.elem, c.in = c.l.spoken.PushBack(c), &c.l.spoken
		}
		c.l.mu.Unlock()
	}
	return n, err
}

// Close closes the connection and gives its place back.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		c.leaveLocked()
		c.l.open--
		c.l.room.Broadcast()
		c.l.mu.Unlock()
	})
	return err
}

func (c *Conn) authenticated() {
	c.l.mu.Lock()
	c.leaveLocked()
	c.l.mu.Unlock()
}

// leaveLocked takes the connection off the unauthenticated lists.
func (c *Conn) leaveLocked() {
	if c.in != nil {
		c.in.Remove(c.elem)
		c.elem, c.in = nil, nil
		c.l.room.Broadcast()
	}
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it lets Authenticated find a
// request's connection, through a TLS layer too. A connection of another
// listener keeps ctx as it is.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	for {
		if tc, ok := c.(*Conn); ok {
			return context.WithValue(ctx, connKey{}, tc)
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return ctx
		}
		c = u.NetConn()
	}
}

// Authenticated marks the connection of the request whose context is ctx
// as authenticated: it no longer counts against MaxUnauthenticated. It does
// nothing for a request served through another listener.
func Authenticated(ctx context.Context) {
	if tc, ok := ctx.Value(connKey{}).(*Conn); ok {
		tc.authenticated()
	}
}
