package connlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Each test has a listener of its own and spends its time waiting on
// wall clocks (read deadlines, SpokenGrace), so the tests run in parallel.
func listen(t *testing.T, o Options) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.DeferAccept == 0 {
		// Accepted at once, silent or not, unless a test asks otherwise.
		o.DeferAccept = -1
	}
	l := New(inner, o)
	t.Cleanup(func() { l.Close() })
	return l
}

func dial(t *testing.T, l *Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server side closed c within half a
// second: an end of stream, or a reset where the server closed with what
// c sent unread.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// closedByPeerEach is closedByPeer of each of conns, read side by side so
// that the half seconds of those left open are waited once, not in turn.
func closedByPeerEach(conns []net.Conn) []bool {
	closed := make([]bool, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { closed[i] = closedByPeer(c) })
	}
	wg.Wait()
	return closed
}

// TestOldestUnauthenticatedIsClosed: past MaxUnauthenticated the oldest
// waiting connection goes when none has spoken; an authenticated one
// never counts.
func TestOldestUnauthenticatedIsClosed(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxUnauthenticated: 3, DescriptorLimit: 1000, Reserve: 10})
	var clients []net.Conn
	var served []net.Conn
	for i := 0; i < 6; i++ {
		clients = append(clients, dial(t, l))
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, s)
		if i == 0 {
			// The first authenticates and is never evicted.
			ctx := ConnContext(context.Background(), s)
			Authenticated(ctx)
		}
	}
	// Five waited, at most three at once: 1 went when 4 came, 2 when 5
	// came.
	closed := closedByPeerEach(clients)
	for i, want := range []bool{false, true, true, false, false, false} {
		if got := closed[i]; got != want {
			t.Errorf("client %d closed: %v, want %v", i, got, want)
		}
	}
	if open, pending := l.Counts(); open != 4 || pending != 3 {
		t.Errorf("counts %d open, %d unauthenticated; want 4, 3", open, pending)
	}
	for _, s := range served {
		s.Close()
	}
	if open, pending := l.Counts(); open != 0 || pending != 0 {
		t.Errorf("after closing every connection: %d open, %d unauthenticated", open, pending)
	}
}

// TestAcceptWaitsForRoomUnderTheDescriptorLimit: the listener keeps
// Reserve descriptors free; a connection past that waits in the backlog
// until one closes.
func TestAcceptWaitsForRoomUnderTheDescriptorLimit(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{DescriptorLimit: 12, Reserve: 10})
	if l.MaxOpen() != 2 {
		t.Fatalf("MaxOpen %d, want 2", l.MaxOpen())
	}
	var served []net.Conn
	for i := 0; i < 2; i++ {
		dial(t, l)
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		Authenticated(ConnContext(context.Background(), s))
		served = append(served, s)
	}
	if open, pending := l.Counts(); open != 2 || pending != 0 {
		t.Fatalf("%d open, %d unauthenticated; want 2, 0", open, pending)
	}
	dial(t, l) // waits in the backlog
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := l.Accept()
		if err == nil {
			accepted <- s
		}
	}()
	select {
	case <-accepted:
		t.Fatal("accepted a third connection at a bound of two")
	case <-time.After(200 * time.Millisecond):
	}
	served[0].Close()
	select {
	case s := <-accepted:
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("no accept after a connection closed")
	}
	served[1].Close()
}

// TestUnauthenticatedTakeAtMostHalf: under a descriptor bound the
// unauthenticated connections hold at most half its places, so they never
// stop the listener from accepting.
func TestUnauthenticatedTakeAtMostHalf(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxUnauthenticated: 100, DescriptorLimit: 18, Reserve: 10})
	for i := 0; i < 12; i++ {
		dial(t, l)
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
	}
	if open, pending := l.Counts(); open != 4 || pending != 4 {
		t.Fatalf("%d open, %d unauthenticated; want 4, 4 (half of 8)", open, pending)
	}
}

// TestCloseWakesAWaitingAccept: closing the listener ends an Accept that
// waits for room.
func TestCloseWakesAWaitingAccept(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{DescriptorLimit: 11, Reserve: 10})
	dial(t, l)
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }()
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept kept waiting after Close")
	}
}

// speak sends the start of a request on c, and accept takes the next
// connection from l, reading the first byte of what it sent when read is
// true (as the HTTP server does).
func speak(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\n")); err != nil {
		t.Fatal(err)
	}
}

func accept(t *testing.T, l *Listener, read bool) net.Conn {
	t.Helper()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if read {
		if _, err := s.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestSilentConnectionsGoBeforeThoseThatSpoke: a flood of connections that
// send nothing closes its own oldest, never a client that sent its request
// before them.
func TestSilentConnectionsGoBeforeThoseThatSpoke(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxUnauthenticated: 3, DescriptorLimit: 1000, Reserve: 10})
	real := dial(t, l)
	speak(t, real)
	accept(t, l, true)
	var flood []net.Conn
	for range 10 {
		flood = append(flood, dial(t, l))
		accept(t, l, false)
	}
	closed := closedByPeerEach(append([]net.Conn{real}, flood...))
	if closed[0] {
		t.Fatal("the client that spoke was closed by the flood")
	}
	for i := range flood {
		if want := i < 8; closed[1+i] != want {
			t.Errorf("silent connection %d closed: %v, want %v", i, !want, want)
		}
	}
	if open, pending := l.Counts(); open != 3 || pending != 3 {
		t.Errorf("counts %d open, %d unauthenticated; want 3, 3", open, pending)
	}
}

// TestABurstThatSpeaksIsServedWhole: connections that sent their request
// are not closed at MaxUnauthenticated. Past the larger bound for them
// (half the descriptor places here) the next waits in the backlog until
// one is authenticated, or until the oldest has had SpokenGrace, and then
// that one closes.
func TestABurstThatSpeaksIsServedWhole(t *testing.T) {
	t.Parallel()
	l := listen(t, Options{MaxUnauthenticated: 2, DescriptorLimit: 40, Reserve: 10})
	if l.maxSpoken != 15 {
		t.Fatalf("bound for connections that spoke %d, want 15 (half of 30)", l.maxSpoken)
	}
	var burst []net.Conn
	var served []net.Conn
	var second time.Time // after the second was accepted
	for i := range 15 {
		c := dial(t, l)
		speak(t, c)
		burst = append(burst, c)
		served = append(served, accept(t, l, true))
		if i == 1 {
			second = time.Now()
		}
	}
	next := func() <-chan net.Conn {
		c := dial(t, l)
		speak(t, c)
		burst = append(burst, c)
		got := make(chan net.Conn, 1)
		go func() {
			s, err := l.Accept()
			if err == nil {
				t.Cleanup(func() { s.Close() })
				got <- s
			}
		}()
		return got
	}
	accepted := next()
	select {
	case <-accepted:
		t.Fatal("accepted a 16th at a bound of 15 with none authenticated")
	case <-time.After(300 * time.Millisecond):
	}
	Authenticated(ConnContext(context.Background(), served[0]))
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no accept after a connection was authenticated")
	}
	accepted = next()
	select {
	case <-accepted:
		if age := time.Since(second); age < SpokenGrace {
			t.Errorf("accepted when the oldest was %v old, before its grace", age)
		}
	case <-time.After(SpokenGrace + 5*time.Second):
		t.Fatal("no accept after the oldest had its grace")
	}
	closed := closedByPeerEach(burst)
	for i := range burst {
		if want := i == 1; closed[i] != want {
			t.Errorf("connection %d of the burst closed: %v, want %v", i, !want, want)
		}
	}
	if open, pending := l.Counts(); open != 16 || pending != 15 {
		t.Errorf("counts %d open, %d unauthenticated; want 16, 15", open, pending)
	}
}
