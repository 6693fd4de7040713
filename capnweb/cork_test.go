package capnweb

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// countingConn records the Write calls that reach the network.
type countingConn struct {
	net.Conn
	mu     sync.Mutex
	writes [][]byte
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, append([]byte(nil), p...))
	return len(p), nil
}

func (c *countingConn) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.writes)
}

// Writes made while corked reach the network with the first write after
// uncork, in one call and in order; uncorked writes go straight out.
func TestCorkHoldsWritesUntilTheNextUncorkedOne(t *testing.T) {
	under := &countingConn{}
	c := &corkConn{Conn: under}
	c.Write([]byte("a"))
	c.cork()
	c.Write([]byte("b"))
	c.Write([]byte("c"))
	if n := under.count(); n != 1 {
		t.Fatalf("%d writes reached the network while corked, want 1", n)
	}
	c.uncork()
	c.Write([]byte("d"))
	c.Write([]byte("e"))
	// net.Buffers may use writev or one Write per buffer on a non-TCP
	// conn; what matters is the order and that nothing is held.
	var all bytes.Buffer
	for _, w := range under.writes {
		all.Write(w)
	}
	if all.String() != "abcde" {
		t.Fatalf("the network saw %q", all.String())
	}
	if len(c.held) != 0 {
		t.Fatalf("%d bytes still held", len(c.held))
	}
}

// A corked connection never holds more than corkMaxBytes, and reset drops
// what it holds without sending it.
func TestCorkBoundsAndReset(t *testing.T) {
	under := &countingConn{}
	c := &corkConn{Conn: under}
	c.cork()
	big := bytes.Repeat([]byte("x"), corkMaxBytes/2+1)
	c.Write(big)
	c.Write(big) // past the bound: both go out
	if len(c.held) != 0 || under.count() == 0 {
		t.Fatalf("held %d bytes past the bound", len(c.held))
	}
	c.Write([]byte("dropped"))
	c.reset()
	c.Write([]byte("after"))
	if last := under.writes[len(under.writes)-1]; string(last) != "after" {
		t.Fatalf("after reset the network saw %q", last)
	}
}

// Through a real accepted WebSocket, answers that are queued together
// reach the client intact and in order, in fewer network writes than
// messages. The network is held (the test owns the cork's lock, which every
// write takes) while the answers are produced, so that a batch forms
// whatever the scheduler does.
func TestAcceptedConnectionWritesABatchTogether(t *testing.T) {
	gate := make(chan struct{})
	main := Methods{
		"afterGate": func(ctx context.Context, args []any) (any, error) {
			Detach(ctx) // let every call wait at once
			<-gate
			return args[0], nil
		},
	}
	url, sessions := wsServer(t, main, Options{})
	ctx := ctx10(t)
	c := wsDial(t, ctx, url)
	srv := <-sessions

	const n = 200
	ps := make([]*Promise, n)
	for i := range ps {
		ps[i] = c.Main().Invoke("afterGate", i)
		ps[i].Pull()
	}
	waitStats(t, srv, Stats{Imports: 1, Exports: n + 1})
	cork := srv.t.(*wsTransport).cork
	before := cork.writes.Load()
	// While the lock is held the writer can take at most one batch (it then
	// waits on the lock inside its write), so once every answer exists one of
	// the two parts, its batch or the queue, holds several. The loop ends
	// when the queue shows it, or after a grace period in which the writer's
	// batch took (nearly) all of them.
	cork.mu.Lock()
	close(gate)
	for grace := time.Now().Add(2 * time.Second); time.Now().Before(grace); time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		queued := len(srv.outq)
		srv.mu.Unlock()
		if queued >= 2 {
			break
		}
	}
	cork.mu.Unlock()
	for i, p := range ps {
		v, err := p.Await(ctx)
		if err != nil || v != float64(i) {
			t.Fatalf("call %d = %v, %v", i, v, err)
		}
	}
	writes := cork.writes.Load() - before
	t.Logf("%d answers in %d network writes", n, writes)
	if writes >= n {
		t.Fatalf("%d writes for %d answers: no batch was written together", writes, n)
	}
	if v, err := c.Main().Call(ctx, "afterGate", "again"); err != nil || v != "again" {
		t.Fatalf("a call after the batches = %v, %v", v, err)
	}
}
