package local

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// A run placed on a worker that dies before the job reaches it (killed
// from outside, say, as the run was placed) is placed again: nothing ran,
// so the caller gets the result, not WORKER_CRASHED.
func TestRunPlacedOnADyingWorkerIsPlacedAgain(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2})
	var once sync.Once
	var killed, second *worker
	e.placed = func(w *worker) {
		once.Do(func() {
			killed = w
			syscall.Kill(w.p.pid, syscall.SIGKILL)
			<-w.watched // the parent has seen it die
		})
		second = w
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := e.ExecuteWith(ctx, &protocol.ExecuteRequest{Code: "async () => 6 * 7"}, protocol.Policy{Tenant: "t"})
	if err != nil || res.ResultJSON != "42" {
		t.Fatalf("got %+v, %v; want 42 from a second worker", res, err)
	}
	if killed == nil || second == killed {
		t.Fatalf("the run was not placed again on another worker (killed %p, second %p)", killed, second)
	}
}

// Placed a second time on a dying worker, the run fails with the text
// that says nothing ran.
func TestRunPlacedTwiceOnDyingWorkersFails(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2})
	e.placed = func(w *worker) {
		syscall.Kill(w.p.pid, syscall.SIGKILL)
		<-w.watched
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.ExecuteWith(ctx, &protocol.ExecuteRequest{Code: "async () => 6 * 7"}, protocol.Policy{Tenant: "t"})
	const want = "The worker process for this execution exited before it started; nothing ran. Run it again."
	if protocol.CodeOf(err) != protocol.CodeWorkerCrashed || err.Error() != want {
		t.Fatalf("got %v (code %q), want WORKER_CRASHED %q", err, protocol.CodeOf(err), want)
	}
	if _, wrapped := err.(notStartedError); wrapped {
		t.Fatal("the caller got the pool's internal wrapper")
	}
}
