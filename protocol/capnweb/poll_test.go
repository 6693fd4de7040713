package capnweb

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair: the first end as a pollConn
// with the given spin window, the second plain.
func tcpPair(t *testing.T, spin time.Duration) (*pollConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	pc, ok := newPollConn(c, spin).(*pollConn)
	if !ok {
		t.Fatal("a TCP connection was not wrapped for polling")
	}
	t.Cleanup(func() { pc.Close(); peer.Close() })
	return pc, peer
}

func readString(t *testing.T, c net.Conn, n int) string {
	t.Helper()
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(buf)
}

// Data that arrives within the window is read by polling, not by a wait.
func TestPollConnReadsQuickDataByPolling(t *testing.T) {
	pc, peer := tcpPair(t, 10*time.Second)
	go func() {
		peer.Write([]byte("a"))
		time.Sleep(5 * time.Millisecond)
		peer.Write([]byte("b"))
	}()
	if got := readString(t, pc, 1) + readString(t, pc, 1); got != "ab" {
		t.Fatalf("read %q, want ab", got)
	}
	if polls, hits := pc.polls.Load(), pc.hits.Load(); polls != 2 || hits != 2 {
		t.Fatalf("%d of 2 reads polled and %d found data so, want 2 and 2", polls, hits)
	}
}

// After a wait longer than the window the next read does not poll at all:
// a slow or quiet peer costs no polling.
func TestPollConnStopsPollingAfterALongWait(t *testing.T) {
	pc, peer := tcpPair(t, time.Millisecond)
	go func() {
		time.Sleep(50 * time.Millisecond)
		peer.Write([]byte("a"))
		time.Sleep(50 * time.Millisecond)
		peer.Write([]byte("b"))
	}()
	if got := readString(t, pc, 1); got != "a" {
		t.Fatalf("read %q", got)
	}
	if pc.lastWait <= pc.spin {
		t.Fatalf("a 50 ms wait was recorded as %v", pc.lastWait)
	}
	start := time.Now()
	if got := readString(t, pc, 1); got != "b" {
		t.Fatalf("read %q", got)
	}
	// The first read polled (nothing was known of the peer yet) and found
	// nothing; the second did not poll.
	if polls, hits := pc.polls.Load(), pc.hits.Load(); polls != 1 || hits != 0 {
		t.Fatalf("%d reads polled and %d found data so, want 1 and 0: the peer was never quick", polls, hits)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("the second read returned before the peer wrote")
	}
}

// End of stream, a closed connection and a passed deadline come back as
// the connection reports them.
func TestPollConnPassesEndsAndErrorsThrough(t *testing.T) {
	pc, peer := tcpPair(t, time.Millisecond)
	peer.Write([]byte("x"))
	peer.Close()
	if got := readString(t, pc, 1); got != "x" {
		t.Fatalf("read %q", got)
	}
	if _, err := pc.Read(make([]byte, 8)); err != io.EOF {
		t.Fatalf("after the peer closed: %v, want io.EOF", err)
	}

	pc2, _ := tcpPair(t, time.Millisecond)
	pc2.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	if _, err := pc2.Read(make([]byte, 8)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("past the deadline: %v, want a deadline error", err)
	}
	pc2.Close()
	if _, err := pc2.Read(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v, want net.ErrClosed", err)
	}
}

// A zero or negative window, or a connection without a socket, is left as
// it is.
func TestPollConnOnlyWrapsSockets(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if c := newPollConn(a, time.Millisecond); c != a {
		t.Fatal("an in-memory pipe was wrapped")
	}
	pc, _ := tcpPair(t, time.Millisecond)
	if c := newPollConn(pc.Conn, 0); c != pc.Conn {
		t.Fatal("a zero window still wrapped the connection")
	}
	if c := newPollConn(pc.Conn, -1); c != pc.Conn {
		t.Fatal("a negative window still wrapped the connection")
	}
}

// Accept polls its connection's reads only when ReadSpin is positive.
// Calls work either way.
func TestAcceptPollsReadsOnlyWhenAsked(t *testing.T) {
	echo := Methods{"echo": func(ctx context.Context, args []any) (any, error) { return args[0], nil }}
	for _, c := range []struct {
		spin, want time.Duration
	}{{0, 0}, {-1, 0}, {time.Millisecond, time.Millisecond}} {
		url, sessions := wsServer(t, echo, Options{ReadSpin: c.spin})
		ctx := ctx10(t)
		client := wsDial(t, ctx, url)
		srv := <-sessions
		for i := range 20 {
			if v, err := client.Main().Call(ctx, "echo", i); err != nil || v != float64(i) {
				t.Fatalf("ReadSpin %v: echo(%d) = %v, %v", c.spin, i, v, err)
			}
		}
		pc, polled := srv.t.(*wsTransport).cork.Conn.(*pollConn)
		switch {
		case c.want == 0 && polled:
			t.Errorf("ReadSpin %v: the connection polls", c.spin)
		case c.want != 0 && !polled:
			t.Errorf("ReadSpin %v: the connection does not poll", c.spin)
		case c.want != 0 && pc.spin != c.want:
			t.Errorf("ReadSpin %v: polls for %v, want %v", c.spin, pc.spin, c.want)
		}
	}
}
