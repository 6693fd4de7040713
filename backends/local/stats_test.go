package local

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestStatsGauges: the gauges read the pool as it is: one execution parked
// in a tool call holds the only place of the only worker, the next waits in
// the queue.
func TestStatsGauges(t *testing.T) {
	ex, err := New(Options{PoolSize: 1, RunsPerWorker: 1, QueueBound: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	parked, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{}, 2)
	go func() {
		ex.Execute(ctx, &protocol.ExecuteRequest{
			Code:      "async () => await s.wait()",
			Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}},
			Dispatch: func(context.Context, string, string, string) (string, error) {
				close(parked)
				<-release
				return `{"result":1}`, nil
			},
		})
		done <- struct{}{}
	}()
	<-parked
	go func() {
		ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 2"})
		done <- struct{}{}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for ex.Stats().Queued != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the second execution never showed as queued: %+v", ex.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := ex.Stats(); s.Busy != 1 || s.WorkersAlive != 1 || s.Runs != 1 || s.Parked != 1 || s.Tenants != 1 {
		t.Fatalf("stats %+v, want one busy worker of one alive, its one run parked", s)
	}
	close(release)
	<-done
	<-done
	// The tool call counts as parked until its goroutine is done with it,
	// which may be a moment after the run it answered settled.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		s := ex.Stats()
		return s.Queued == 0 && s.Busy == 0 && s.Runs == 0 && s.Parked == 0
	}, "the gauges to read idle after both finished")
}

// TestStatsInvocationsWaiting: the gauge counts the invocations of a
// retained execution that wait behind the one at its handler, and lets go
// of each that leaves the line: answered, given up by its caller, or ended
// by the close.
func TestStatsInvocationsWaiting(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	reached := make(chan struct{}, 4)
	id := grant(t, e, &protocol.ExecuteRequest{Code: awaitUpstream, Outbound: parkedUpstream(reached), Timeout: protocol.TimeoutOf(60000)})
	errs := make(chan error, 3)
	invoke := func(ctx context.Context) {
		_, err := e.InvokeHandle(ctx, id, "fetch", getReq("/"))
		errs <- err
	}
	go invoke(context.Background())
	<-reached // the first is at the handler, not waiting
	if s := e.Stats(); s.Invocations != 0 {
		t.Fatalf("with one invocation at the handler: %d waiting, want 0", s.Invocations)
	}
	gaveUp, giveUp := context.WithCancel(context.Background())
	go invoke(gaveUp)
	go invoke(context.Background())
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Invocations == 2 }, "two invocations to wait")
	giveUp()
	if err := <-errs; err != context.Canceled {
		t.Fatalf("the invocation whose caller gave up: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Invocations == 1 }, "the one left to wait")
	if err := e.CloseHandles(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; protocol.CodeOf(err) != protocol.CodeHandlesClosed {
			t.Fatalf("an invocation the close ended: %v, want HANDLES_CLOSED", err)
		}
	}
	if s := e.Stats(); s.Invocations != 0 {
		t.Fatalf("after the close: %d waiting, want 0", s.Invocations)
	}
}

// TestStatsTenantWorkers: two tenants parked in tool calls at once hold
// one worker process each, and Stats names each tenant's by its pid.
func TestStatsTenantWorkers(t *testing.T) {
	ex, err := New(Options{MaxWorkers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	release := make(chan struct{})
	parked := make(chan struct{}, 2)
	done := make(chan error, 2)
	for _, tenant := range []string{"a", "b"} {
		go func() {
			_, err := ex.ExecuteWith(ctx, &protocol.ExecuteRequest{
				Code:      "async () => await s.wait()",
				Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}},
				Dispatch: func(context.Context, string, string, string) (string, error) {
					parked <- struct{}{}
					<-release
					return `{"result":1}`, nil
				},
			}, protocol.Policy{Tenant: tenant})
			done <- err
		}()
	}
	<-parked
	<-parked
	tw := ex.Stats().TenantWorkers
	if len(tw) != 2 || len(tw["a"]) != 1 || len(tw["b"]) != 1 || tw["a"][0] == tw["b"][0] || tw["a"][0] <= 0 {
		t.Fatalf("TenantWorkers %v, want one distinct worker pid for each of a and b", tw)
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
