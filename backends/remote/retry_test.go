package remote_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// refusingExecutor turns the first refusals executions away with
// refusal, then runs them; calls counts every execution that arrived.
type refusingExecutor struct {
	*executortest.Recorder
	refusal  func() error
	refusals int64
	calls    atomic.Int64
}

func (r *refusingExecutor) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	if r.calls.Add(1) <= r.refusals {
		return nil, r.refusal()
	}
	return r.Recorder.ExecuteWith(ctx, req, p)
}

func (r *refusingExecutor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return r.ExecuteWith(ctx, req, protocol.Policy{})
}

// dialRetrying dials a loopback server that refuses refusals times with
// refusal, with retry.
func dialRetrying(t *testing.T, refusals int64, refusal func() error, retry remote.Retry) (*remote.Executor, *refusingExecutor) {
	t.Helper()
	fake := &refusingExecutor{Recorder: executortest.NewRecorder(), refusal: refusal, refusals: refusals}
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e, err := remote.Dial(ctx(t), url, remote.Options{Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, fake
}

// fast keeps the waits of a test short: the defaults are for real servers.
var fast = remote.Retry{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

func noExecutor() error { return protocol.NewNoExecutorError() }

// Two QUEUE_OVERFLOW refusals, then a result: the caller gets the result
// from the third attempt.
func TestRetryReturnsTheResultAfterRetryableRefusals(t *testing.T) {
	e, fake := dialRetrying(t, 2, noExecutor, fast)
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:7"})
	if err != nil || res.ResultJSON != "7" {
		t.Fatalf("got %+v, %v; want the result 7", res, err)
	}
	if n := fake.calls.Load(); n != 3 {
		t.Fatalf("the server saw %d attempts, want 3 (two retries)", n)
	}
}

// A crashed worker is retryable by the contract, but its program may have
// called tools already: the caller decides, so it is returned at once.
func TestRetryLeavesAWorkerCrashToTheCaller(t *testing.T) {
	crash := func() error { return protocol.NewFault(protocol.CodeWorkerCrashed, "the worker process died") }
	e, fake := dialRetrying(t, 1, crash, fast)
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:8"})
	if protocol.CodeOf(err) != protocol.CodeWorkerCrashed || fake.calls.Load() != 1 {
		t.Fatalf("got %v after %d attempts; want WORKER_CRASHED after 1", err, fake.calls.Load())
	}
}

// Attempts spent: the caller gets the last refusal, whole, and the
// server saw exactly Attempts executions.
func TestRetryReturnsTheLastFaultWhenAttemptsAreSpent(t *testing.T) {
	retry := fast
	retry.Attempts = 3
	e, fake := dialRetrying(t, 10, noExecutor, retry)
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1"})
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || err.Error() != protocol.NewNoExecutorError().Error() {
		t.Fatalf("got %v (%s), want the QUEUE_OVERFLOW refusal", err, protocol.CodeOf(err))
	}
	if n := fake.calls.Load(); n != 3 {
		t.Fatalf("the server saw %d attempts, want 3", n)
	}
}

// The default tries five times in all.
func TestRetryDefaultsToFourAttempts(t *testing.T) {
	e, fake := dialRetrying(t, 10, noExecutor, remote.Retry{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
	if _, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1"}); protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("got %v, want QUEUE_OVERFLOW", err)
	}
	if n := fake.calls.Load(); n != 5 {
		t.Fatalf("the server saw %d attempts, want 5", n)
	}
}

// Attempts: 1 turns retries off.
func TestRetryOff(t *testing.T) {
	e, fake := dialRetrying(t, 1, noExecutor, remote.Retry{Attempts: 1})
	if _, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1"}); protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("got %v, want QUEUE_OVERFLOW", err)
	}
	if n := fake.calls.Load(); n != 1 {
		t.Fatalf("the server saw %d attempts, want 1", n)
	}
}

// Codes that are not retryable are returned after one attempt.
func TestRetryLeavesOtherCodesAlone(t *testing.T) {
	for _, code := range []protocol.Code{protocol.CodeConnectionRejected, protocol.CodeInternal, protocol.CodeResponseTooLarge, protocol.CodeHandlesClosed} {
		e, fake := dialRetrying(t, 1, func() error { return protocol.NewFault(code, "refused") }, fast)
		_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1"})
		if protocol.CodeOf(err) != code {
			t.Fatalf("%s: got %v", code, err)
		}
		if n := fake.calls.Load(); n != 1 {
			t.Fatalf("%s: the server saw %d attempts, want 1", code, n)
		}
	}
}

// A refusal whose retry hint is past MaxDelay is returned at once, hint
// and all: waiting that long is the caller's decision.
func TestRetryHintPastMaxDelayIsReturned(t *testing.T) {
	long := func() error { return protocol.NewTenantLimitError("acme", protocol.InFlightBound(1), time.Hour) }
	e, fake := dialRetrying(t, 1, long, fast)
	_, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "result:1"})
	if hint, ok := protocol.RetryAfterOf(err); !ok || hint != time.Hour || err.Error() != long().Error() {
		t.Fatalf("got %v (hint %v, %v), want the tenant refusal with its hour", err, hint, ok)
	}
	if n := fake.calls.Load(); n != 1 {
		t.Fatalf("the server saw %d attempts, want 1", n)
	}
}

// refusingHandles turns the first refusals calls of each handle method
// away with refusal, then serves them; invokes and closes count the calls
// that arrived.
type refusingHandles struct {
	*executortest.Recorder
	refusal         func() error
	refusals        int64
	invokes, closes atomic.Int64
}

func (r *refusingHandles) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	if r.invokes.Add(1) <= r.refusals {
		return protocol.OutboundResponse{}, r.refusal()
	}
	return r.Recorder.InvokeHandle(ctx, id, handle, req)
}

func (r *refusingHandles) CloseHandles(ctx context.Context, id string) error {
	if r.closes.Add(1) <= r.refusals {
		return r.refusal()
	}
	return r.Recorder.CloseHandles(ctx, id)
}

// retainedOn dials a loopback server whose handle calls are refused
// refusals times with refusal, and retains one execution there.
func retainedOn(t *testing.T, refusals int64, refusal func() error) (*remote.Executor, *refusingHandles, string) {
	t.Helper()
	fake := &refusingHandles{Recorder: executortest.NewRecorder(), refusal: refusal, refusals: refusals}
	url, _ := serve(t, fake, executorapi.ServerOptions{})
	e, err := remote.Dial(ctx(t), url, remote.Options{Retry: fast})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	res, err := e.Execute(ctx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	return e, fake, res.ExecutionID
}

// Handle calls are retried like executions: two QUEUE_OVERFLOW refusals
// (a gateway that could not reach the handles' server), then the answer.
func TestRetryHandleCallsAfterRetryableRefusals(t *testing.T) {
	e, fake, id := retainedOn(t, 2, func() error { return protocol.NewHandlesUnreachableError() })
	resp, err := e.InvokeHandle(ctx(t), id, "fetch", protocol.OutboundRequest{Method: "POST", URL: "https://app.example/", Body: []byte("x")})
	if err != nil || string(resp.Body) != "echo:x" {
		t.Fatalf("InvokeHandle: %+v, %v; want the handle's echo:x", resp, err)
	}
	if n := fake.invokes.Load(); n != 3 {
		t.Fatalf("the server saw %d invokeHandle attempts, want 3 (two retries)", n)
	}
	if err := e.CloseHandles(ctx(t), id); err != nil {
		t.Fatalf("CloseHandles: %v", err)
	}
	if n, held := fake.closes.Load(), fake.Held(); n != 3 || held != 0 {
		t.Fatalf("the server saw %d closeHandles attempts and holds %d executions, want 3 and 0", n, held)
	}
}

// A broken connection (outcome unknown) and closed handles are returned
// after one handle call; attempts spent return the last refusal whole.
func TestRetryLeavesHandleCallFaultsAlone(t *testing.T) {
	for _, c := range []struct {
		refusal func() error
		calls   int64
	}{
		{func() error { return protocol.NewFault(protocol.CodeConnectionBroken, "the connection broke") }, 1},
		{func() error { return protocol.NewHandlesClosedError("gone") }, 1},
		{func() error { return protocol.NewHandlesUnreachableError() }, 5},
	} {
		want := c.refusal()
		e, fake, id := retainedOn(t, 10, c.refusal)
		_, err := e.InvokeHandle(ctx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
		if protocol.CodeOf(err) != protocol.CodeOf(want) || err.Error() != want.Error() {
			t.Fatalf("InvokeHandle: %v (%s), want %s %q", err, protocol.CodeOf(err), protocol.CodeOf(want), want)
		}
		err = e.CloseHandles(ctx(t), id)
		if protocol.CodeOf(err) != protocol.CodeOf(want) || err.Error() != want.Error() {
			t.Fatalf("CloseHandles: %v (%s), want %s %q", err, protocol.CodeOf(err), protocol.CodeOf(want), want)
		}
		if i, cl := fake.invokes.Load(), fake.closes.Load(); i != c.calls || cl != c.calls {
			t.Fatalf("%s: the server saw %d invokeHandle and %d closeHandles attempts, want %d each", protocol.CodeOf(want), i, cl, c.calls)
		}
	}
}
