package local

import (
	"context"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Each memory layer, driven by a scripted worker so that exactly one layer
// can act. Limits are small so the tests stay light.

func memoryText(mb int) string { return protocol.NewMemoryLimitError(mb).Error() }

func runFor(t *testing.T, e *Executor, code string) *protocol.ExecuteResult {
	t.Helper()
	start := time.Now()
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: code, Timeout: protocol.TimeoutOf(60000)})
	if err != nil {
		t.Fatalf("%s: %v", code, err)
	}
	t.Logf("%s: %v", code, time.Since(start))
	return res
}

// The in-worker watchdog ends gradual growth with the memory text, and only
// the run that grew: the worker goes on serving.
func TestHeapWatchdogStopsGrowth(t *testing.T) {
	// Wide RSS and address-space allowances, so that only the watchdog can
	// act (a race build's shadow memory inflates both).
	e := newScripted(t, Options{PoolSize: 1, MemoryLimitMB: 64, RSSHeadroomMB: 2048, AddressSpaceHeadroomMB: 8192})
	before := pidOf(t, e)
	res := runFor(t, e, "grow 2000")
	if res.Error != memoryText(64) || res.Failure != protocol.FailureMemory {
		t.Fatalf("got %q (%q), want the memory text", res.Error, res.Failure)
	}
	if after := pidOf(t, e); after != before {
		t.Fatalf("the worker was replaced (%d, then %d): the watchdog ends a run, not its process", before, after)
	}
	if s := e.Stats(); s.HeapLimits != 1 || s.RSSKills != 0 || s.OutOfMemory != 0 {
		t.Fatalf("the wrong layer acted: %+v", s)
	}
}

// A program that returns right after it went past its limit fails with the
// memory text even when the watchdog first sees it at its last look, as the
// run's slice ends: "huge" never looks at its ctx, so whichever look finds
// the allocation, the verdict comes after the program returned.
func TestAVerdictAtTheLastLookFailsTheRun(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, MemoryLimitMB: 32, RSSHeadroomMB: 2048, AddressSpaceHeadroomMB: 8192})
	before := pidOf(t, e)
	res := runFor(t, e, "huge 64")
	if res.Error != memoryText(32) || res.Failure != protocol.FailureMemory || res.ResultJSON != "" {
		t.Fatalf("got %+v, want the memory text", res)
	}
	if s := e.Stats(); s.HeapLimits != 1 || s.RSSKills != 0 || s.OutOfMemory != 0 {
		t.Fatalf("the wrong layer acted: %+v", s)
	}
	if after := pidOf(t, e); after != before {
		t.Fatalf("the worker was replaced (%d, then %d)", before, after)
	}
	// The next run on the same worker is not charged for it.
	if res := runFor(t, e, "huge 16"); res.HasError || res.ResultJSON != "[16777216]" {
		t.Fatalf("the next run: %+v", res)
	}
}

// RLIMIT_AS refuses one huge untouched allocation; the runtime dies with
// "out of memory" and the parent reports the memory text.
func TestAddressLimitRefusesHugeAllocation(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, MemoryLimitMB: 64})
	res := runFor(t, e, "huge 4096")
	if res.Error != memoryText(64) || res.Failure != protocol.FailureMemory {
		t.Fatalf("got %q (%q), want the memory text", res.Error, res.Failure)
	}
	if s := e.Stats(); s.OutOfMemory != 1 {
		t.Fatalf("the wrong layer acted: %+v", s)
	}
	pidOf(t, e)
}

// The parent's RSS poll kills a worker that fills memory while deaf to its
// ctx (as goja is inside one native call). The allocation is below
// RLIMIT_AS and past the worker's memory, and the kill grace outlasts the
// test, so only the poll can act (a run deaf to its memory cancel within
// the worker's memory is TestWorkerDeathIsOneWarnLine's).
func TestRSSPollKillsDeafWorker(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, MemoryLimitMB: 64, WorkerMemoryMB: 64, RSSHeadroomMB: 32, AddressSpaceHeadroomMB: 8192, KillGrace: time.Hour})
	start := time.Now()
	res := runFor(t, e, "touch 200")
	if res.Error != memoryText(64) || res.Failure != protocol.FailureMemory {
		t.Fatalf("got %q (%q), want the memory text", res.Error, res.Failure)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %v", d)
	}
	// The run has its answer before its worker goes: the parent stops the
	// process once nothing else runs there.
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().RSSKills == 1 }, "the worker to be stopped for memory")
	if s := e.Stats(); s.HeapLimits+s.TimeoutKills+s.OutOfMemory+s.WorkersCrashed != 0 {
		t.Fatalf("the wrong layer acted: %+v", s)
	}
	pidOf(t, e)
}

// Work inside the limit is untouched by every layer, run after run.
func TestWithinLimitRunsSucceed(t *testing.T) {
	o := Options{PoolSize: 1, MemoryLimitMB: 64}
	if raceBuild {
		// The race detector's shadow memory counts against RLIMIT_AS and
		// RSS; the shipped worker has none.
		o.AddressSpaceHeadroomMB, o.RSSHeadroomMB = 8192, 2048
	}
	e := newScripted(t, o)
	for _, code := range []string{"grow 40", "huge 40", "grow 40\nhuge 10", "grow 40"} {
		res := runFor(t, e, code)
		if res.HasError {
			t.Fatalf("%s: %s", code, res.Error)
		}
	}
	if s := e.Stats(); s.WorkersStarted != 1 {
		t.Fatalf("runs inside the limit replaced the worker: %+v", s)
	}
}

// Garbage is not growth, however fast it comes: real JavaScript that
// discards buffers of a quarter and of half its limit, more than the whole
// limit between two of the watchdog's looks, finishes; keeping them, or
// making one buffer past the limit, fails with the memory text, and only
// the watchdog acts.
func TestGarbageChurnIsNotGrowth(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, MemoryLimitMB: 32, RSSHeadroomMB: 2048, AddressSpaceHeadroomMB: 8192})
	for i, c := range []struct{ code, want string }{
		{"async () => { let n = 0; for (let i = 0; i < 200; i++) n += new Uint8Array(8 << 20).length; return n }", "1677721600"},
		{"async () => { let n = 0; for (let i = 0; i < 100; i++) n += new Uint8Array(16 << 20).length; return n }", "1677721600"},
		{"async () => { const keep = []; for (let i = 0; i < 200; i++) keep.push(new Uint8Array(8 << 20)); return keep.length }", ""},
		{"async () => new Uint8Array(48 << 20).length", ""},
	} {
		res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: c.code, Timeout: protocol.TimeoutOf(60000)})
		if err != nil {
			t.Fatal(err)
		}
		if c.want != "" && (res.HasError || res.ResultJSON != c.want) {
			t.Errorf("%s: got %q (%q), want %s", c.code, res.ResultJSON, res.Error, c.want)
		}
		if c.want == "" && (res.Error != memoryText(32) || res.Failure != protocol.FailureMemory) {
			t.Errorf("%s: got %q (%q), want the memory text", c.code, res.ResultJSON, res.Error)
		}
		if s := e.Stats(); s.HeapLimits != int64(max(0, i-1)) || s.RSSKills != 0 || s.OutOfMemory != 0 {
			t.Errorf("%s: the wrong layer acted: %+v", c.code, s)
		}
	}
}

// Honest runs that together outgrow their worker do not take one another
// down: past seven eighths of the worker's memory the run that grew the
// most gets the memory text, and the others complete with their values.
func TestRunsThatOutgrowTheirWorkerLoseOne(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, WorkerMemoryMB: 256, AddressSpaceHeadroomMB: 4096, WorkerCommand: jsWorkerCommand(t)})
	workerOf(t, e, "t")
	// Each keeps 96 MiB, a mebibyte every few milliseconds, and then holds
	// it until the test lets go (its timer keeps it busy meanwhile): three
	// of them pass 224 MiB together by far, two of them do not. Holding
	// makes the three overlap however the machine schedules them; without
	// it the first could finish before the third had grown, and none
	// would cross the line.
	code := `async () => {
  const kept = []
  while (kept.length < 96) {
    kept.push(new Uint8Array(1 << 20).fill(1))
    await new Promise((r) => setTimeout(r, 5))
  }
  let released = false
  t.wait(0).then(() => { released = true })
  while (!released) await new Promise((r) => setTimeout(r, 5))
  return kept.length
}`
	g := newGatedTool()
	results := make([]*protocol.ExecuteResult, 3)
	ended := make(chan *protocol.ExecuteResult, len(results))
	for i := range results {
		go func() {
			res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: code, Timeout: protocol.TimeoutOf(60000),
				Providers: []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"wait"}}}, Dispatch: g.dispatch}, tenantT)
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
			results[i] = res
			ended <- res
		}()
	}
	// The first to end is the one the line took; then the others may go.
	got := 0
	select {
	case <-ended:
		got++
	case <-time.After(30 * time.Second):
	}
	close(g.release)
	for ; got < len(results); got++ {
		<-ended
	}
	failed := 0
	for i, res := range results {
		switch {
		case res == nil:
			t.FailNow()
		case res.Error == memoryText(128):
			failed++
		case res.ResultJSON != "96":
			t.Fatalf("run %d: %+v", i, res)
		}
	}
	if failed != 1 {
		t.Fatalf("%d runs got the memory text, want one: %+v", failed, results)
	}
	if s := e.Stats(); s.WorkersCrashed+s.RSSKills+s.OutOfMemory != 0 {
		t.Fatalf("the process went: %+v", s)
	}
}
