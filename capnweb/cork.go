package capnweb

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// The WebSocket library flushes every message with its own write system
// call. When the session has several messages queued at once (many calls
// answered together, or a call's push and pull) that is a system call,
// and on a loopback or virtualised network a wake-up of the peer, per
// message. An accepted connection is therefore corked for a batch: the
// library's writes of every message but the last are held, and the last
// one's write sends them all in one call, inside the library's own write
// (so its cancellation and close handling cover it).

// MessageBatchWriter is an optional Transport method: WriteMessages sends
// msgs, in order, as one batch. The session uses it when several messages
// are queued at once.
type MessageBatchWriter interface {
	WriteMessages(ctx context.Context, msgs [][]byte) error
}

// corkMaxBytes bounds what a corked connection holds back; a batch past it
// goes out in more than one write.
const corkMaxBytes = 256 << 10

// corkCopyMax is the largest last write of a batch that is copied behind
// what is held, to go out in one Write; a larger one is written beside it.
const corkCopyMax = 64 << 10

// corkConn is an accepted connection whose writes can be held back.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	held   []byte
	// pair and bufs write held and the next write together; kept here so
	// that such a write allocates nothing.
	pair   [2][]byte
	bufs   net.Buffers
	writes atomic.Int64 // writes that reached the network
}

// Write sends p, or holds it while the connection is corked. It never holds
// more than corkMaxBytes: past that it sends what it holds with p.
func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.corked && len(c.held)+len(p) <= corkMaxBytes {
		c.held = append(c.held, p...)
		return len(p), nil
	}
	c.writes.Add(1)
	if len(c.held) == 0 {
		return c.Conn.Write(p)
	}
	var err error
	if len(p) <= corkCopyMax {
		// One Write of the whole batch. net.Buffers would write the two
		// parts with one writev only on the net package's own connections,
		// and a server's listener often wraps them (the gateway's does, to
		// count them): then it is a Write, a system call, per part.
		c.held = append(c.held, p...)
		_, err = c.Conn.Write(c.held)
	} else {
		c.pair = [2][]byte{c.held, p}
		c.bufs = c.pair[:]
		_, err = c.bufs.WriteTo(c.Conn)
		c.pair, c.bufs = [2][]byte{}, nil // p is the caller's
	}
	c.held = c.held[:0]
	if cap(c.held) > corkMaxBytes {
		c.held = nil
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// cork holds back writes until uncork.
func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork lets the next write go out with everything held before it.
func (c *corkConn) uncork() {
	c.mu.Lock()
	c.corked = false
	c.mu.Unlock()
}

// reset drops what is held after a batch failed part way: the session is
// ending with a write error, and a later write (the close frame) must not
// wait behind bytes that may never go out.
func (c *corkConn) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	c.held = c.held[:0]
}

// corkingWriter wraps an http.ResponseWriter so that the connection the
// WebSocket library hijacks is a corkConn.
type corkingWriter struct {
	http.ResponseWriter
	conn *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	// The controller finds the Hijacker through wrappers that Unwrap.
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	// Whatever the server buffered for writing goes out first; nothing
	// does before the library's handshake response, but be exact.
	if brw.Writer.Buffered() > 0 {
		if err := brw.Writer.Flush(); err != nil {
			conn.Close()
			return nil, nil, err
		}
	}
	w.conn = &corkConn{Conn: conn}
	return w.conn, bufio.NewReadWriter(brw.Reader, bufio.NewWriterSize(w.conn, brw.Writer.Size())), nil
}

// Unwrap lets http.ResponseController reach the original writer.
func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
