// Package connlimit bounds what clients can hold on a listener before they
// prove who they are. A connection counts as unauthenticated from its
// accept until the handler calls Authenticated; past MaxUnauthenticated
// such connections the oldest is closed. And the listener accepts no more
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
)

// Defaults of Options.
const (
	DefaultMaxUnauthenticated = 256
	DefaultReserve            = 128
)

// Options configures a Listener. Every zero field takes its default.
type Options struct {
	// MaxUnauthenticated is how many accepted connections may be waiting
	// for authentication at once, and at most half of those the
	// descriptor bound lets the listener hold; the oldest is closed past
	// it.
	MaxUnauthenticated int
	// Reserve is how many descriptors under the process's limit the
	// listener leaves for the rest of the process.
	Reserve int
	// DescriptorLimit is the process's descriptor limit; default the
	// current soft RLIMIT_NOFILE (no bound where there is none).
	DescriptorLimit int
}

// Listener is a net.Listener under those bounds. Give ConnContext to the
// http.Server that serves it.
type Listener struct {
	net.Listener
	maxOpen    int // 0: no bound
	maxPending int

	mu      sync.Mutex
	room    *sync.Cond // signalled when a connection closes
	open    int
	pending list.List // *Conn waiting for authentication, oldest first
	closed  bool
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
	l.room = sync.NewCond(&l.mu)
	return l
}

// MaxOpen is how many connections the listener keeps open at most; 0 when
// there is no bound.
func (l *Listener) MaxOpen() int { return l.maxOpen }

// Accept waits until there is room under the descriptor bound, then
// accepts, closing the oldest unauthenticated connection when there are
// too many.
func (l *Listener) Accept() (net.Conn, error) {
	l.mu.Lock()
	for l.maxOpen > 0 && l.open >= l.maxOpen && !l.closed {
		l.room.Wait()
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
	tc := &Conn{Conn: c, l: l}
	var evicted *Conn
	l.mu.Lock()
	l.open++
	if l.pending.Len() >= l.maxPending {
		evicted = l.pending.Remove(l.pending.Front()).(*Conn)
		evicted.elem = nil
	}
	tc.elem = l.pending.PushBack(tc)
	l.mu.Unlock()
	if evicted != nil {
		evicted.Close()
	}
	return tc, nil
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
	return l.open, l.pending.Len()
}

// Conn is an accepted connection.
type Conn struct {
	net.Conn
	l    *Listener
	elem *list.Element // in l.pending while unauthenticated; guarded by l.mu
	once sync.Once
}

// Close closes the connection and gives its place back.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		if c.elem != nil {
			c.l.pending.Remove(c.elem)
			c.elem = nil
		}
		c.l.open--
		c.l.room.Signal()
		c.l.mu.Unlock()
	})
	return err
}

func (c *Conn) authenticated() {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.pending.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
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
