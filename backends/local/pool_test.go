package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// quietLogger keeps expected worker crashes out of the test output.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// newScripted builds an executor whose workers run scriptedRun.
func newScripted(t testing.TB, o Options) *Executor {
	t.Helper()
	o.WorkerEnv = append(o.WorkerEnv, scriptedEnv)
	if o.Logger == nil {
		o.Logger = quietLogger
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// runScript executes a script and fails the test on a fault.
func runScript(t *testing.T, e *Executor, code string) *protocol.ExecuteResult {
	t.Helper()
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: code})
	if err != nil {
		t.Fatalf("Execute(%q): %v", code, err)
	}
	return res
}

// values decodes a scripted run's result.
func values(t *testing.T, res *protocol.ExecuteResult) []any {
	t.Helper()
	if res.HasError {
		t.Fatalf("run failed: %s", res.Error)
	}
	var v []any
	if err := json.Unmarshal([]byte(res.ResultJSON), &v); err != nil {
		t.Fatalf("result %q: %v", res.ResultJSON, err)
	}
	return v
}

func pidOf(t *testing.T, e *Executor) int {
	t.Helper()
	v := values(t, runScript(t, e, "pid"))
	return int(v[0].(float64))
}

func TestWorkerIsReused(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	first := pidOf(t, e)
	for range 5 {
		if got := pidOf(t, e); got != first {
			t.Fatalf("worker pid changed from %d to %d between healthy runs", first, got)
		}
	}
}

func TestWorkerReplacedAfterMaxRuns(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, MaxRunsPerWorker: 2})
	a, b, c := pidOf(t, e), pidOf(t, e), pidOf(t, e)
	if a != b {
		t.Fatalf("runs 1 and 2 on different workers: %d, %d", a, b)
	}
	if c == b {
		t.Fatalf("run 3 still on worker %d after MaxRunsPerWorker=2", c)
	}
	if d := pidOf(t, e); d != c {
		t.Fatalf("the replacement was not reused: %d then %d", c, d)
	}
}

func TestCrashIsWorkerCrashedAndNextRunWorks(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	before := pidOf(t, e)
	_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "exit 7"})
	if protocol.CodeOf(err) != protocol.CodeWorkerCrashed {
		t.Fatalf("crash: got %v, want WORKER_CRASHED", err)
	}
	if !protocol.CodeOf(err).Retryable() {
		t.Fatalf("WORKER_CRASHED must be retryable")
	}
	after := pidOf(t, e)
	if after == before {
		t.Fatalf("the crashed worker %d served again", before)
	}
}

// A worker killed from outside while a tool call is open is a crash too.
func TestWorkerKilledDuringToolCall(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	pid := pidOf(t, e)
	_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "dispatch 1",
		Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
			syscall.Kill(pid, syscall.SIGKILL)
			select {
			case <-ctx.Done(): // released when the execution ends
			case <-time.After(20 * time.Second):
			}
			return "", errors.New("released")
		},
	})
	if protocol.CodeOf(err) != protocol.CodeWorkerCrashed {
		t.Fatalf("got %v, want WORKER_CRASHED", err)
	}
	if got := pidOf(t, e); got == pid {
		t.Fatalf("the killed worker %d served again", pid)
	}
}

func TestWorkerThatNeverStarts(t *testing.T) {
	for name, cmd := range map[string][]string{
		"exits at once":   {"/bin/false"},
		"not executable":  {"/nonexistent/worker"},
		"never answers":   {"/bin/sleep", "30"},
		"writes garbage":  {"/bin/sh", "-c", "printf 'this is not a frame'; sleep 30"},
		"oversized frame": {"/bin/sh", "-c", "printf '\\377\\377\\377\\377'; sleep 30"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newScripted(t, Options{PoolSize: 1, WorkerCommand: cmd, StartTimeout: 2 * time.Second})
			_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"})
			if protocol.CodeOf(err) != protocol.CodeWorkerCrashed {
				t.Fatalf("got %v, want WORKER_CRASHED", err)
			}
		})
	}
}

// readyFrame is the frame a fake worker sends to pass the start handshake.
func readyFrame(t *testing.T) []byte {
	t.Helper()
	var b strings.Builder
	if err := wire.NewWriter(&b).Write(&wire.Message{Kind: wire.KindReady, Ready: &wire.Ready{PID: 1}}, wire.MaxWorkerFrame); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// shellOctal writes bytes as a printf format.
func shellOctal(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		fmt.Fprintf(&s, "\\%03o", c)
	}
	return s.String()
}

// A worker that passes the handshake and then answers the job with garbage
// is killed and its execution fails with WORKER_CRASHED; the parent goes on.
func TestMalformedFrameKillsWorker(t *testing.T) {
	for name, tail := range map[string]string{
		"garbage":        "printf 'garbage that is no frame at all'",
		"bad json":       "printf '\\000\\000\\000\\003{x}'",
		"no kind":        "printf '\\000\\000\\000\\002{}'",
		"truncated":      "printf '\\000\\000\\001\\000{}'; exec >&-",
		"result without": "printf '\\000\\000\\000\\021{\"kind\":\"result\"}'",
		"unknown kind":   "printf '\\000\\000\\000\\021{\"kind\":\"gossip\"}'",
	} {
		t.Run(name, func(t *testing.T) {
			// Wait for the job's first byte (after the init frame was
			// consumed), then misbehave.
			script := fmt.Sprintf("printf '%s'; n=$(head -c 4 | od -An -tu1 | awk '{print $1*16777216+$2*65536+$3*256+$4}'); head -c $n >/dev/null; head -c 1 >/dev/null; %s; sleep 30",
				shellOctal(readyFrame(t)), tail)
			e := newScripted(t, Options{PoolSize: 1, WorkerCommand: []string{"/bin/sh", "-c", script}})
			start := time.Now()
			_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"})
			if protocol.CodeOf(err) != protocol.CodeWorkerCrashed {
				t.Fatalf("got %v, want WORKER_CRASHED", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("took %v: the parent waited for the worker instead of killing it", d)
			}
		})
	}
}

// One place in one worker: the first execution takes it, the second waits,
// the third is refused at once with the queue text and its retry hint.
func TestQueueOverflowIsImmediateAndSparesRunningWork(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, RunsPerWorker: 1, QueueBound: 1})
	pidOf(t, e) // warm
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "sleep 1500\npid"})
			if err == nil && res.HasError {
				err = errors.New(res.Error)
			}
			results[i] = err
		}()
		// Let the first take the worker and the second enter the queue.
		testutil.WaitFor(t, 10*time.Second, func() bool { s := e.Stats(); return s.Runs == 1 && s.Queued == i }, "one run and %d queued", i)
	}
	_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"})
	var qo *protocol.QueueOverflowError
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || !errors.As(err, &qo) || qo.Bound != 1 {
		t.Fatalf("third execution: got %v, want QUEUE_OVERFLOW at a bound of 1", err)
	}
	if err.Error() != protocol.NewQueueOverflowError(1, qo.RetryAfter).Error() {
		t.Fatalf("text %q", err)
	}
	if !protocol.CodeOf(err).Retryable() {
		t.Fatal("QUEUE_OVERFLOW must be retryable")
	}
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Fatalf("execution %d was disturbed by the overflow: %v", i, err)
		}
	}
}

func TestNoQueueRefusesWhenBusy(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, RunsPerWorker: 1, QueueBound: -1})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runScript(t, e, "sleep 800")
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Runs == 1 }, "the run to start")
	_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"})
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("got %v, want QUEUE_OVERFLOW", err)
	}
	<-done
}

func TestCloseBreaksRunningAndLaterCalls(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 2})
	pid := pidOf(t, e)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "sleep 30000"})
		errc <- err
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Runs == 1 }, "the run to start")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitBroken(t, errc, 10*time.Second, "the running execution")
	if _, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"}); protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("Execute after Close: %v", err)
	}
	if _, err := e.InvokeHandle(context.Background(), "x", "fetch", protocol.OutboundRequest{}); protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("InvokeHandle after Close: %v", err)
	}
	if err := e.CloseHandles(context.Background(), "x"); protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("CloseHandles after Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("worker %d still exists after Close: %v", pid, err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// An executionId nobody was granted holds no handles.
func TestUnknownExecutionHoldsNoHandles(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	if _, err := e.InvokeHandle(context.Background(), "ex-1", "fetch", protocol.OutboundRequest{}); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("InvokeHandle: %v", err)
	}
	if err := e.CloseHandles(context.Background(), "ex-1"); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("CloseHandles: %v", err)
	}
}

func TestToolCallsCrossThePipe(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	type call struct{ provider, tool, args string }
	var mu sync.Mutex
	var calls []call
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "dispatch 3",
		Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
			mu.Lock()
			calls = append(calls, call{provider, tool, args})
			mu.Unlock()
			if tool == "tool1" {
				return "", errors.New("No such customer.")
			}
			return `{"result":"` + tool + `"}`, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := values(t, res)
	want := []any{`{"result":"tool0"}`, "error: No such customer.", `{"result":"tool2"}`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("answers %q, want %q", got, want)
	}
	wantCalls := []call{{"store", "tool0", "[0]"}, {"store", "tool1", "[1]"}, {"store", "tool2", "[2]"}}
	if fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Fatalf("calls %v, want %v", calls, wantCalls)
	}
}

func TestToolCallWithoutDispatch(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	got := values(t, runScript(t, e, "dispatch 1"))
	if want := "error: " + protocol.NewToolNotFoundError("tool0").Error(); got[0] != want {
		t.Fatalf("got %q, want %q", got[0], want)
	}
}

func TestOutboundCrossesThePipe(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	var seen protocol.OutboundRequest
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "outbound",
		Outbound: protocol.OutboundVia(func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			seen = req
			return protocol.OutboundResponse{Status: 201, Body: []byte("made")}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, res); got[0] != "201 made" {
		t.Fatalf("got %q", got[0])
	}
	if seen.Method != "GET" || seen.URL != "https://example.test/x" || string(seen.Body) != "hi" {
		t.Fatalf("the outbound function saw %+v", seen)
	}
}

func TestDispatchPanicDoesNotCrashTheGateway(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code:     "dispatch 1",
		Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) { panic("boom") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, res); !strings.HasPrefix(got[0].(string), "error: ") {
		t.Fatalf("got %q, want an error answer", got[0])
	}
}

func TestStdoutCannotCorruptFrames(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	if got := values(t, runScript(t, e, "print")); got[0] != "printed" {
		t.Fatalf("got %v", got)
	}
}

func TestCallerCancelEndsTheRun(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, KillGrace: 200 * time.Millisecond})
	for _, code := range []string{"ctxwait", "spin 0"} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		_, err := e.Execute(ctx, &protocol.ExecuteRequest{Code: code})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: got %v, want the ctx's error", code, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s: took %v after cancellation", code, d)
		}
		pidOf(t, e) // the pool still serves
	}
}

// A cancelled run is in Go code past its cancel only once it has computed
// a kill grace beyond it: one whose piece waits without computing (as a
// compile waits for the CPU behind a flood of its tenant's own) keeps its
// worker, and one that computes on has the worker stopped once only
// cancelled runs are left.
func TestCancelledRunStopsItsWorkerOnlyWhenItComputes(t *testing.T) {
	for _, c := range []struct {
		code     string
		replaced bool
	}{
		{"hold 1500", false},
		{"spin 3000", true},
	} {
		e := newScripted(t, Options{PoolSize: 1, KillGrace: 200 * time.Millisecond})
		before := pidOf(t, e)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := e.Execute(ctx, &protocol.ExecuteRequest{Code: c.code, Timeout: protocol.TimeoutOf(60000)})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: got %v, want the ctx's error", c.code, err)
		}
		testutil.WaitFor(t, 20*time.Second, func() bool { return e.Stats().Runs == 0 }, "the cancelled run to leave its worker")
		if after := pidOf(t, e); (after != before) != c.replaced {
			t.Fatalf("%s: the worker was %d before the cancel and %d after it; want it replaced: %v", c.code, before, after, c.replaced)
		}
	}
}

// The parent's clock is the backstop for Go code no interrupt reaches.
func TestParentKillsAtDeadline(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, KillGrace: 300 * time.Millisecond})
	before := pidOf(t, e)
	start := time.Now()
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "spin 0", Timeout: protocol.TimeoutOf(300)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != protocol.NewExecutionTimeoutError(300).Error() || res.Failure != protocol.FailureTimeout {
		t.Fatalf("got %q (%q), want the timeout text", res.Error, res.Failure)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v", d)
	}
	if after := pidOf(t, e); after == before {
		t.Fatal("the killed worker served again")
	}
}

// A run waiting on its host holds no gate, so the parent's backstop never
// counts the wait: a 1.5 s tool call under a 300 ms bound completes.
// (countHostWaits is the sandbox's clock to apply: TestPoolRunClock.)
func TestBackstopIgnoresHostWaits(t *testing.T) {
	slowTool := func(ctx context.Context, provider, tool, args string) (string, error) {
		select {
		case <-time.After(1500 * time.Millisecond):
			return `{"result":1}`, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	e := newScripted(t, Options{PoolSize: 1, KillGrace: 200 * time.Millisecond})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "dispatch 1", Dispatch: slowTool, Timeout: protocol.TimeoutOf(300),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, res); got[0] != `{"result":1}` {
		t.Fatalf("got %v", got)
	}
	if s := e.Stats(); s.TimeoutKills != 0 {
		t.Fatalf("the backstop killed a run waiting on its host: %+v", s)
	}
}

// A tool call open beside it cannot shield a run stuck in Go code: the run
// holds the gate, and past its deadline the parent stops the process.
func TestParentClockCountsComputeDuringHostCall(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, KillGrace: 200 * time.Millisecond})
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	// The tool never answers within the test; the script spins meanwhile.
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code:    "spinwhilecall",
		Timeout: protocol.TimeoutOf(300),
		Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return "", errors.New("released")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != protocol.NewExecutionTimeoutError(300).Error() || res.Failure != protocol.FailureTimeout {
		t.Fatalf("got %q (%q), want the timeout text", res.Error, res.Failure)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("took %v", d)
	}
}

// Close leaves nothing running in the parent: every reader, monitor and
// host-call goroutine ends with the executor.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newScripted(t, Options{PoolSize: 2})
	dispatch := func(ctx context.Context, provider, tool, args string) (string, error) { return `{"result":1}`, nil }
	for _, code := range []string{"pid", "dispatch 3", "exit 1", "spin 0"} {
		e.Execute(context.Background(), &protocol.ExecuteRequest{Code: code, Dispatch: dispatch, Timeout: protocol.TimeoutOf(200)})
	}
	e.Close()
	waitGoroutinesBack(t, before)
}

// A worker that dies while idle is noticed and replaced; the next
// execution runs on a fresh one.
func TestIdleWorkerDeathIsHealed(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	pid := pidOf(t, e)
	started := e.Stats().WorkersStarted
	syscall.Kill(pid, syscall.SIGKILL)
	testutil.WaitFor(t, 10*time.Second, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }, "worker %d to exit", pid)
	// The process is reaped a moment before the pool hears of it: wait
	// for the pool to start the worker that replaces it.
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().WorkersStarted > started }, "a worker to replace %d", pid)
	if got := pidOf(t, e); got == pid {
		t.Fatalf("the dead worker %d served", pid)
	}
}

// A tool call still open when its run settles is cancelled with the
// execution: the caller's function sees its ctx end.
func TestUnawaitedToolCallIsCancelled(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	opened, ended := make(chan struct{}), make(chan error, 1)
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "fire",
		Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
			if tool == "awaited" {
				select {
				case <-opened:
				case <-time.After(20 * time.Second):
					ended <- errors.New("never reached the host")
				}
				return `{"result":1}`, nil
			}
			close(opened)
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-time.After(20 * time.Second):
				ended <- errors.New("never cancelled")
			}
			return "", ctx.Err()
		},
	})
	if err != nil || values(t, res)[0] != "fired" {
		t.Fatalf("run: %+v, %v", res, err)
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the open tool call: %v", err)
	}
}

// Many executions at once share two workers, and each tool call reaches
// the dispatch of its own execution only.
func TestConcurrentExecutionsKeepTheirOwnHost(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 2})
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := fmt.Sprintf(`{"result":%d}`, i)
			res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
				Code: "dispatch 3",
				Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
					return mine, nil
				},
			})
			if err != nil {
				errs <- err
				return
			}
			var got []string
			if json.Unmarshal([]byte(res.ResultJSON), &got) != nil || len(got) != 3 {
				errs <- fmt.Errorf("execution %d: %+v", i, res)
				return
			}
			for _, g := range got {
				if g != mine {
					errs <- fmt.Errorf("execution %d got another execution's answer %s", i, g)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := e.Stats(); s.WorkersStarted > 2 {
		t.Fatalf("healthy runs replaced workers: %+v", s)
	}
}

// waitGoroutinesBack waits until the goroutine count is back to before,
// failing with every stack when it is not within ten seconds.
func waitGoroutinesBack(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A worker gets none of the gateway's environment but the few variables
// that shape Go code there (workerEnvPassed) and Options.WorkerEnv: a
// secret in the gateway's environment never reaches guest code's process.
func TestWorkerEnvironmentKeepsTheGatewaysSecrets(t *testing.T) {
	t.Setenv("CODEMODE_TEST_SECRET", "s3cret")
	t.Setenv("TZ", "Europe/Oslo")
	e := newScripted(t, Options{PoolSize: 1, WorkerEnv: []string{"CODEMODE_TEST_GIVEN=yes"}})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "env CODEMODE_TEST_SECRET\nenv TZ\nenv CODEMODE_TEST_GIVEN\nenv HOME"})
	if err != nil || res.ResultJSON != `["unset","Europe/Oslo","yes","unset"]` {
		t.Fatalf("%+v, %v", res, err)
	}
}

// waitWarm waits until the pool has started n workers.
func waitWarm(t *testing.T, e *Executor, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().WorkersStarted < n {
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not warm: %+v", e.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pidFor runs the scripted "pid" job for tenant and returns the worker's
// process id.
func pidFor(t *testing.T, e *Executor, tenant string) int {
	t.Helper()
	res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "pid"}, protocol.Policy{Tenant: tenant})
	if err != nil || res.HasError {
		t.Fatalf("pid for %q: %+v, %v", tenant, res, err)
	}
	var pids []int
	if err := json.Unmarshal([]byte(res.ResultJSON), &pids); err != nil || len(pids) != 1 {
		t.Fatalf("pid for %q: %q", tenant, res.ResultJSON)
	}
	return pids[0]
}
