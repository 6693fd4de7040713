package worker

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// workerPipe runs serveWorker in this process over pipes.
type workerPipe struct {
	toWorker   *io.PipeWriter
	fromWorker *io.PipeReader
	exit       chan int
}

// startWorker serves a worker on pipes with run as its run function (nil:
// the sandbox); run answers with an envelope, never a fault.
func startWorker(t testing.TB, envelopeOf func(context.Context, sandbox.Job, sandbox.Host) *protocol.ExecuteResult) *workerPipe {
	t.Helper()
	var run RunFunc
	if envelopeOf != nil {
		run = func(ctx context.Context, job sandbox.Job, host sandbox.Host) (*protocol.ExecuteResult, error) {
			return envelopeOf(ctx, job, host), nil
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &workerPipe{toWorker: inW, fromWorker: outR, exit: make(chan int, 1)}
	go func() {
		code := serveWorker(inR, outW, run)
		outW.Close()
		inR.Close()
		w.exit <- code
	}()
	// The worker sets this process's GC percent and memory limit; put
	// them back for the tests that follow.
	gcPercent := debug.SetGCPercent(100)
	debug.SetGCPercent(gcPercent)
	memLimit := debug.SetMemoryLimit(-1)
	maxStack := debug.SetMaxStack(1 << 30)
	debug.SetMaxStack(maxStack)
	t.Cleanup(func() {
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(memLimit)
		debug.SetMaxStack(maxStack)
	})
	// No address-space limit: this is the test process itself.
	w.send(t, &wire.Message{Kind: wire.KindInit, Init: &wire.Init{MemoryLimitMB: 1024}})
	if m := w.recv(t); m.Kind != wire.KindReady || m.Ready == nil {
		t.Fatalf("handshake: %+v", m)
	}
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return w
}

func (w *workerPipe) send(t testing.TB, m *wire.Message) {
	t.Helper()
	if err := writeFrame(w.toWorker, m, wire.MaxParentFrame); err != nil {
		t.Fatal(err)
	}
}

// recv is the worker's next frame about a run. Hog frames, which ask the
// parent to lower a thread's priority, come whenever a piece of work runs
// long (a slow machine, the race detector) and are skipped.
func (w *workerPipe) recv(t testing.TB) *wire.Message {
	t.Helper()
	for {
		m, err := readFrame(w.fromWorker, wire.MaxWorkerFrame)
		if err != nil {
			t.Fatal(err)
		}
		if m.Kind != wire.KindHog {
			return m
		}
	}
}

func (w *workerPipe) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case c := <-w.exit:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not exit")
		return -1
	}
}

// outsideGate lets a stand-in run's gate go while it waits, as the
// sandbox's loop does, and returns what takes it back.
func outsideGate(host sandbox.Host) func() {
	g, ok := host.(sandbox.Gate)
	if !ok {
		return func() {}
	}
	g.Leave()
	return func() { g.Enter(context.Background(), BoundClock(time.Minute)) }
}

// echoDispatch calls the host once and returns its answer as the result.
func echoDispatch(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult {
	defer outsideGate(host)()
	ans, err := host.Dispatch(ctx, "p", "t", job.Code)
	if err != nil {
		return &protocol.ExecuteResult{Error: err.Error(), HasError: true}
	}
	return &protocol.ExecuteResult{ResultJSON: ans}
}

func TestWorkerRoutesAnswersByID(t *testing.T) {
	w := startWorker(t, echoDispatch)
	w.send(t, &wire.Message{Kind: wire.KindJob, Run: 7, Job: &sandbox.Job{Code: "[1]"}})
	call := w.recv(t)
	if call.Kind != wire.KindDispatch || call.Run != 7 || call.Provider != "p" || call.Tool != "t" || call.Args != "[1]" || call.ID == 0 {
		t.Fatalf("call %+v", call)
	}
	// An answer to a call that does not exist is ignored.
	w.send(t, &wire.Message{Kind: wire.KindDispatchAnswer, ID: call.ID + 100, Answer: "stray"})
	w.send(t, &wire.Message{Kind: wire.KindDispatchAnswer, ID: call.ID, Answer: `{"result":2}`})
	if res := w.recv(t); res.Kind != wire.KindResult || res.Run != 7 || res.Result.ResultJSON != `{"result":2}` {
		t.Fatalf("result %+v", res)
	}
	// The next run numbers its call past the first one.
	w.send(t, &wire.Message{Kind: wire.KindJob, Run: 8, Job: &sandbox.Job{Code: "[2]"}})
	if next := w.recv(t); next.ID <= call.ID || next.Run != 8 {
		t.Fatalf("call ids did not grow: %d then %+v", call.ID, next)
	}
}

// A worker hosts many runs at once: each run's calls carry its id, and
// each answer reaches the run that asked, in whatever order they come.
func TestWorkerHostsRunsSideBySide(t *testing.T) {
	w := startWorker(t, echoDispatch)
	calls := map[uint64]*wire.Message{}
	for run := uint64(1); run <= 3; run++ {
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: run, Job: &sandbox.Job{Code: fmt.Sprint(run * 10)}})
	}
	for range 3 {
		c := w.recv(t)
		if c.Kind != wire.KindDispatch || c.Args != fmt.Sprint(c.Run*10) {
			t.Fatalf("call %+v", c)
		}
		calls[c.Run] = c
	}
	for _, run := range []uint64{3, 1, 2} {
		w.send(t, &wire.Message{Kind: wire.KindDispatchAnswer, ID: calls[run].ID, Answer: fmt.Sprintf(`{"result":%d}`, run)})
		if res := w.recv(t); res.Kind != wire.KindResult || res.Run != run || res.Result.ResultJSON != fmt.Sprintf(`{"result":%d}`, run) {
			t.Fatalf("run %d: %+v", run, res)
		}
	}
}

// The real sandbox (run nil): every job runs in a runtime the worker
// prepared before the job came, and none of them sees what an earlier job
// left on its globals.
func TestWorkerRunsEachJobInAFreshPreparedRuntime(t *testing.T) {
	w := startWorker(t, nil)
	for i := range 3 {
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: uint64(i + 1), Job: &sandbox.Job{
			Code:      "async () => { const seen = typeof mark; globalThis.mark = 1; return seen }",
			TimeoutMs: 5000, MemoryLimitMB: 64, OutboundMode: protocol.OutboundDisabled,
		}})
		if res := w.recv(t); res.Kind != wire.KindResult || res.Result.HasError || res.Result.ResultJSON != `"undefined"` {
			t.Fatalf("job %d: %+v", i, res.Result)
		}
	}
}

// A worker sets its GC percent from its live heap (see gcPercentFor) unless GOGC is set
// in its environment, which it then leaves to the Go runtime, and caps a
// goroutine's stack at the smaller of its memory limit and
// workerMaxStackMB.
func TestWorkerGCPercent(t *testing.T) {
	t.Setenv("GOGC", "")
	startWorker(t, echoDispatch)
	if got := currentGCPercent(); got < minWorkerPercent || got > maxWorkerPercent {
		t.Fatalf("GC percent %d, want it within [%d, %d]", got, minWorkerPercent, maxWorkerPercent)
	}
	if got := debug.SetMaxStack(1 << 30); got != workerMaxStackMB<<20 {
		t.Fatalf("max stack %d, want %d", got, workerMaxStackMB<<20)
	}

	debug.SetGCPercent(170)
	t.Setenv("GOGC", "170")
	startWorker(t, echoDispatch)
	if got := currentGCPercent(); got != 170 {
		t.Fatalf("GC percent %d with GOGC set, want it left at 170", got)
	}
}

func currentGCPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

func TestWorkerHostErrorCrossesAsError(t *testing.T) {
	w := startWorker(t, echoDispatch)
	w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1, Job: &sandbox.Job{}})
	call := w.recv(t)
	w.send(t, &wire.Message{Kind: wire.KindDispatchAnswer, ID: call.ID, HasErr: true, Err: "down"})
	if res := w.recv(t); !res.Result.HasError || res.Result.Error != "down" {
		t.Fatalf("result %+v", res.Result)
	}
}

func TestWorkerCancelReachesTheRun(t *testing.T) {
	w := startWorker(t, func(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult {
		defer outsideGate(host)()
		// The host call tells the test this run is under way; it is never
		// answered, so only the cancel ends it.
		_, _ = host.Dispatch(ctx, "p", "t", job.Code)
		<-ctx.Done()
		return &protocol.ExecuteResult{Error: "stopped: " + context.Cause(ctx).Error(), HasError: true}
	})
	w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1, Job: &sandbox.Job{}})
	w.send(t, &wire.Message{Kind: wire.KindJob, Run: 2, Job: &sandbox.Job{}})
	// Cancel only once both runs are inside the run function: a cancel
	// that found run 2 still waiting for the gate would end it there.
	started := map[uint64]bool{}
	for len(started) < 2 {
		if m := w.recv(t); m.Kind != wire.KindDispatch {
			t.Fatalf("frame %+v before both runs called the host", m)
		} else {
			started[m.Run] = true
		}
	}
	w.send(t, &wire.Message{Kind: wire.KindCancel, Run: 2})
	if res := w.recv(t); res.Run != 2 || res.Result.Error != "stopped: context canceled" {
		t.Fatalf("result %+v", res.Result)
	}
	// A cancel for a run that is gone crossed its result: it is ignored.
	w.send(t, &wire.Message{Kind: wire.KindCancel, Run: 2})
	w.send(t, &wire.Message{Kind: wire.KindCancel, Run: 1})
	if res := w.recv(t); res.Run != 1 || res.Result.Error != "stopped: context canceled" {
		t.Fatalf("result %+v", res.Result)
	}
}

func TestWorkerProtocolViolations(t *testing.T) {
	block := func(ctx context.Context, job sandbox.Job, host sandbox.Host) *protocol.ExecuteResult {
		defer outsideGate(host)()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		return &protocol.ExecuteResult{}
	}
	t.Run("a run id that is in use", func(t *testing.T) {
		w := startWorker(t, block)
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1, Job: &sandbox.Job{}})
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1, Job: &sandbox.Job{}})
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("a job without a run id", func(t *testing.T) {
		w := startWorker(t, block)
		w.send(t, &wire.Message{Kind: wire.KindJob, Job: &sandbox.Job{}})
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("a release for a run that kept nothing", func(t *testing.T) {
		w := startWorker(t, block)
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1, Job: &sandbox.Job{}})
		w.send(t, &wire.Message{Kind: wire.KindRelease, Run: 1})
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("invocations beyond the one the parent may have waiting", func(t *testing.T) {
		w := startWorker(t, nil)
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1, Job: &sandbox.Job{
			Code:      "async () => () => new Promise(() => {})",
			TimeoutMs: 5000, MemoryLimitMB: 64, OutboundMode: protocol.OutboundDisabled, RetainHandles: true,
		}})
		if res := w.recv(t); res.Kind != wire.KindResult || len(res.Result.Handles) != 1 {
			t.Fatalf("grant %+v", res.Result)
		}
		// At most one invocation at the handler and one waiting: the third
		// breaks the protocol (the parent sends one at a time), and the
		// worker may already be gone at the second.
		for id := range uint64(3) {
			m := &wire.Message{Kind: wire.KindInvoke, Run: 1, ID: id + 1, OutboundRequest: &protocol.OutboundRequest{Method: "GET", URL: "https://h.test/"}}
			if writeFrame(w.toWorker, m, wire.MaxParentFrame) != nil {
				break
			}
		}
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("unknown kind", func(t *testing.T) {
		w := startWorker(t, block)
		w.send(t, &wire.Message{Kind: "gossip"})
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("job without a job", func(t *testing.T) {
		w := startWorker(t, block)
		w.send(t, &wire.Message{Kind: wire.KindJob, Run: 1})
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		w := startWorker(t, block)
		w.toWorker.Write([]byte{0, 0, 0, 3, 'a', 'b', 'c'})
		if c := w.exitCode(t); c != exitBadFrame {
			t.Fatalf("exit %d", c)
		}
	})
	t.Run("parent gone", func(t *testing.T) {
		w := startWorker(t, block)
		w.toWorker.Close()
		if c := w.exitCode(t); c != exitParentGone {
			t.Fatalf("exit %d", c)
		}
	})
}

// writeFrame encodes m as one frame; see wire.Writer.Write.
func writeFrame(w io.Writer, m *wire.Message, max int) error {
	return wire.NewWriter(w).Write(m, max)
}

// readFrame decodes one frame; see wire.Reader.Read.
func readFrame(r io.Reader, max int) (*wire.Message, error) {
	return wire.NewReader(r).Read(max)
}

// A worker keeps nothing of the runs that ended: after many trivial runs
// with a long bound, its live heap is what it was.
func TestWorkerHoldsNothingOfRunsThatEnded(t *testing.T) {
	w := startWorker(t, nil)
	run := func(from, n int) {
		for i := range n {
			w.send(t, &wire.Message{Kind: wire.KindJob, Run: uint64(from + i), Job: &sandbox.Job{
				Code: "async () => 1", TimeoutMs: 60000, MemoryLimitMB: 64, OutboundMode: protocol.OutboundDisabled,
			}})
			if res := w.recv(t); res.Kind != wire.KindResult || res.Result.HasError {
				t.Fatalf("run %d: %+v", from+i, res.Result)
			}
		}
	}
	live := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	run(1, 50)
	before := live()
	run(100, 400)
	if after := live(); after > before+8<<20 {
		t.Fatalf("400 runs that ended left %d KB live (a runtime is about 150 KB)", (after-before)>>10)
	}
}
