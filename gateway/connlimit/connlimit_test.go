package connlimit

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func listen(t *testing.T, o Options) *Listener {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
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

// closedByPeer reports whether the server side closed c within a second.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// TestOldestUnauthenticatedIsClosed: past MaxUnauthenticated the oldest
// waiting connection goes; an authenticated one never counts.
func TestOldestUnauthenticatedIsClosed(t *testing.T) {
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
	for i, want := range []bool{false, true, true, false, false, false} {
		if got := closedByPeer(clients[i]); got != want {
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
