package capnweb

import (
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// When a session's read loop finds its socket empty the Go runtime parks
// it and, with nothing else to run, puts the thread to sleep in epoll; the
// peer's next message then has to wake that thread. On a virtualised
// machine a wake-up costs tens of microseconds on both sides, and a peer
// that answers quickly pays it for nearly every message: measured against
// the JS client, it was the largest difference between the Go server and a
// busy single-threaded Node server, which never sleeps between messages.
//
// With Options.ReadSpin an accepted connection therefore polls for a short
// while before it lets the runtime wait: it tries the socket again,
// yielding to other goroutines between tries, for up to the spin window.
// It does so only while messages have lately come within that window of
// the socket running dry, so a quiet or slow peer costs no polling: the
// time each wait took decides whether the next one polls.
//
// It is off by default because of what the yield cannot do: a goroutine
// that yields stays runnable, and the runtime looks for other ready
// network I/O (sockets, pipes) only when it has nothing runnable, or every
// 10 ms. While a connection polls, every other reader in the process waits
// for its data to be noticed until the window ends: a Go client in the
// same process as a polling server made half as many calls, and a server
// whose calls wait on pipes (the executor server's workers) would add the
// window to each of their answers.

// pollConn is an accepted connection whose reads poll before they wait.
// Read is called by one goroutine at a time (the WebSocket library's reader).
type pollConn struct {
	net.Conn
	raw  syscall.RawConn
	spin time.Duration
	// lastWait is how long the last read that found the socket empty
	// waited for data; the next empty socket is polled only when it was
	// within spin.
	lastWait time.Duration
	// polls counts reads that polled, hits those of them that found data.
	polls, hits atomic.Int64
}

// newPollConn wraps c when it is a socket and spin is positive; otherwise
// it returns c.
func newPollConn(c net.Conn, spin time.Duration) net.Conn {
	if spin <= 0 {
		return c
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &pollConn{Conn: c, raw: raw, spin: spin}
}

func (c *pollConn) Read(p []byte) (int, error) {
	start := time.Now()
	if c.lastWait <= c.spin && len(p) > 0 {
		c.polls.Add(1)
		for {
			if n := c.tryRead(p); n > 0 {
				c.lastWait = time.Since(start)
				c.hits.Add(1)
				return n, nil
			}
			if time.Since(start) >= c.spin {
				break
			}
			runtime.Gosched()
		}
	}
	// The ordinary read waits, and reports end of stream, errors and
	// deadlines as the connection does.
	n, err := c.Conn.Read(p)
	c.lastWait = time.Since(start)
	return n, err
}

// tryRead reads what the socket holds without waiting. Anything but data
// (empty, end of stream, an error) is 0: the caller's ordinary read then
// sees it.
func (c *pollConn) tryRead(p []byte) int {
	n := 0
	err := c.raw.Read(func(fd uintptr) bool {
		m, err := syscall.Read(int(fd), p)
		if err == nil && m > 0 {
			n = m
		}
		return true // never wait here
	})
	if err != nil {
		return 0
	}
	return n
}
