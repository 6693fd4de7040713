package capnweb

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
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
	// The held writes go out with the first uncorked one in one Write,
	// although the connection under the cork is not the net package's own
	// (a listener's wrapper, as the gateway's, is not either).
	var got []string
	for _, w := range under.writes {
		got = append(got, string(w))
	}
	if want := []string{"a", "bcd", "e"}; !slices.Equal(got, want) {
		t.Fatalf("the network saw the writes %q, want %q", got, want)
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

// batchRecorder is a transport that records the batches the writer hands
// it, each as the messages in it.
type batchRecorder struct {
	Transport
	mu      sync.Mutex
	batches [][]string
}

func (b *batchRecorder) record(msgs ...[]byte) {
	batch := make([]string, len(msgs))
	for i, m := range msgs {
		batch[i] = string(m)
	}
	b.mu.Lock()
	b.batches = append(b.batches, batch)
	b.mu.Unlock()
}

func (b *batchRecorder) WriteMessage(ctx context.Context, msg []byte) error {
	b.record(msg)
	return b.Transport.WriteMessage(ctx, msg)
}

func (b *batchRecorder) WriteMessages(ctx context.Context, msgs [][]byte) error {
	b.record(msgs...)
	for _, m := range msgs {
		if err := b.Transport.WriteMessage(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// echoOverRecorder connects a client whose writes rec records to a server
// with an echo method, and makes calls calls of it, pausing pause after
// each.
func echoOverRecorder(t *testing.T, calls int, pause time.Duration) (server *Session, rec *batchRecorder) {
	t.Helper()
	a, b := Pipe()
	rec = &batchRecorder{Transport: b}
	server = NewSession(a, Methods{"echo": func(_ context.Context, args []any) (any, error) { return args[0], nil }}, Options{})
	client := NewSession(rec, nil, Options{})
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	ctx := ctx10(t)
	for i := range calls {
		if v, err := client.Main().Call(ctx, "echo", float64(i)); err != nil || v != float64(i) {
			t.Fatalf("call %d = %v, %v", i, v, err)
		}
		time.Sleep(pause)
	}
	return server, rec
}

// A call awaited at once (Stub.Call) sends its push and its pull in one
// batch of the writer, so that they reach the network in one write.
func TestCallSendsItsPushAndPullTogether(t *testing.T) {
	_, rec := echoOverRecorder(t, 20, 0)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	pushes := 0
	for _, batch := range rec.batches {
		for j, m := range batch {
			if !strings.HasPrefix(m, `["push",`) {
				continue
			}
			pushes++
			id := pushes // the client's imports count from 1, one per call
			want := `["pull",` + strconv.Itoa(id) + `]`
			if j+1 >= len(batch) || batch[j+1] != want {
				t.Fatalf("the push of call %d was not followed by its pull in its batch: %q", id, batch)
			}
		}
	}
	if pushes != 20 {
		t.Fatalf("%d pushes were written, want 20", pushes)
	}
}

// The release that follows a call's answer waits for the next message to
// go out with it: the caller's next call takes it along in one batch.
func TestReleaseGoesOutWithTheNextCall(t *testing.T) {
	// A millisecond between calls is time enough for the writer to send a
	// release it was woken for, well inside releaseDelay.
	const calls = 20
	server, rec := echoOverRecorder(t, calls, time.Millisecond)
	// The last release goes out on its own after releaseDelay: the
	// server's table is back to its main export.
	waitStats(t, server, Stats{Imports: 1, Exports: 1})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	released, along := 0, 0
	for _, batch := range rec.batches {
		for j, m := range batch {
			if !strings.HasPrefix(m, `["release",`) {
				continue
			}
			released++
			if j+1 < len(batch) && strings.HasPrefix(batch[j+1], `["push",`) {
				along++
			}
		}
	}
	if released != calls {
		t.Fatalf("%d releases were written, want %d", released, calls)
	}
	// Each call follows the last one's answer by a millisecond; a machine
	// would have to stall past releaseDelay between most of them for their
	// releases to go out alone.
	if along < calls/2 {
		t.Fatalf("only %d of %d releases went out with the next call's push", along, calls)
	}
}
