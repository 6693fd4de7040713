package gateway

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// A member's pins are counted through every way a pin goes (a drop, the
// table's bound, a tenant's bound, closeAll), and released(m) closes when
// the last one naming m goes, not before.
func TestPinsReleaseAMemberWhenItsLastPinGoes(t *testing.T) {
	ps := newPins(2)
	a := &member{name: "a", exec: &fakeBackend{}}
	b := &member{name: "b", exec: &fakeBackend{}}
	if !isClosed(ps.released(a)) || ps.holds(a) {
		t.Fatal("a member without pins is not released")
	}
	ps.add("a1", pin{member: a, tenant: "x"}, 10)
	ps.add("a2", pin{member: a, tenant: "y"}, 10)
	ps.add("a3", pin{member: a, tenant: "x"}, 10) // the table's bound evicts a1
	gone := ps.released(a)
	ps.drop("a3")
	if isClosed(gone) || !ps.holds(a) {
		t.Fatal("a was released while a2 still names it")
	}
	ps.add("a2", pin{member: a, tenant: "y"}, 10) // replaced in place: still one pin
	ps.add("b1", pin{member: b, tenant: "y"}, 1)  // y's bound of one takes a2
	if !isClosed(gone) || ps.holds(a) {
		t.Fatal("a was not released when its last pin went")
	}
	if !ps.holds(b) || isClosed(ps.released(b)) {
		t.Fatal("b, which holds b1, reads released")
	}
	goneB := ps.released(b)
	ps.closeAll()
	if !isClosed(goneB) {
		t.Fatal("closeAll left b unreleased")
	}
}

// Drain waits for the executions in flight without polling: it returns as
// the last one ends, and with ctx's error when one outlives ctx.
func TestDrainWaitsForTheExecutionsInFlight(t *testing.T) {
	rig := newRig(t, config.Policy{})
	rig.gw.tenants = map[string]*tenant{"acme": rig.t}
	rig.be.hold = make(chan struct{})
	ran := make(chan error, 1)
	go func() { ran <- rig.execute() }()
	for rig.t.unanswered.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := rig.gw.Drain(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with an execution outliving ctx: %v", err)
	}
	drained := make(chan error, 1)
	go func() { drained <- rig.gw.Drain(context.Background()) }()
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while an execution ran", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(rig.be.hold)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("Drain after the last execution ended: %v", err)
	}
}

// Served over capnweb, an execution has left the tenant's concurrency bound
// by the time its answer is queued (a client may send its next call the
// moment it reads it), while a drain still counts it until then.
func TestAnExecutionLeavesTheConcurrencyBoundBeforeItsAnswer(t *testing.T) {
	rig := newRig(t, config.Policy{MaxConcurrent: 1})
	type counts struct{ running, unanswered int64 }
	seen := make(chan counts, 1)
	a, b := capnweb.Pipe()
	server := capnweb.NewSession(a, capnweb.Methods{"run": func(ctx context.Context, _ []any) (any, error) {
		// Added before the tenant's own hook, so it runs first: at the
		// moment the answer is queued.
		capnweb.AfterAnswer(ctx, func() { seen <- counts{rig.t.running.Load(), rig.t.unanswered.Load()} })
		_, err := rig.t.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
		return "ran", err
	}}, capnweb.Options{})
	client := capnweb.NewSession(b, nil, capnweb.Options{})
	t.Cleanup(func() { client.Close(); server.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if v, err := client.Main().Invoke("run").Await(ctx); err != nil || v != "ran" {
		t.Fatalf("run: %v, %v", v, err)
	}
	if got := <-seen; got != (counts{0, 1}) {
		t.Fatalf("as the answer was queued: %+v, want running 0 and unanswered 1", got)
	}
	testutil.WaitFor(t, 5*time.Second, func() bool { return rig.t.unanswered.Load() == 0 }, "the drain count to fall to zero")
}
