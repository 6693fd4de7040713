package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// How a worker process is shared: many runs of one tenant in one process,
// one of them executing at a time, every bound still per run, and no
// process ever running two tenants' programs.

// gatedTool is a tool whose calls wait until release is closed; arrived
// counts the calls that reached it.
type gatedTool struct {
	release chan struct{}
	mu      sync.Mutex
	arrived int
}

func newGatedTool() *gatedTool { return &gatedTool{release: make(chan struct{})} }

func (g *gatedTool) dispatch(ctx context.Context, provider, tool, args string) (string, error) {
	g.mu.Lock()
	g.arrived++
	g.mu.Unlock()
	select {
	case <-g.release:
		return `{"result":` + args + `}`, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (g *gatedTool) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.arrived
}

// parkedRequest awaits one call of the gated tool and returns n + 1.
func parkedRequest(g *gatedTool, n int) *protocol.ExecuteRequest {
	return &protocol.ExecuteRequest{
		Code:      fmt.Sprintf("async () => (await t.wait(%d)) + 1", n),
		Providers: []protocol.ProviderDescriptor{{Name: "t", Tools: []string{"wait"}}},
		Dispatch:  g.dispatch,
		Timeout:   protocol.TimeoutOf(500), // the wait spends none of it
	}
}

// startParked starts each of reqs as tenant t's run on e, waits until every
// one has called the gated tool g, and returns a channel per request that
// carries its result.
func startParked(t *testing.T, e *Executor, g *gatedTool, reqs []*protocol.ExecuteRequest) []chan *protocol.ExecuteResult {
	t.Helper()
	results := make([]chan *protocol.ExecuteResult, len(reqs))
	for i, req := range reqs {
		results[i] = make(chan *protocol.ExecuteResult, 1)
		go func() {
			res, err := e.ExecuteWith(testCtx(t), req, tenantT)
			if err != nil {
				t.Error(err)
			}
			results[i] <- res
		}()
	}
	testutil.WaitFor(t, 30*time.Second, func() bool { return g.count() == len(reqs) }, "the siblings to park")
	return results
}

// tenantT is the policy of the one tenant the sharing tests run.
var tenantT = protocol.Policy{Tenant: "t"}

// A run waiting on its host holds a place in a worker, not a process: 100
// parked runs of one tenant live in the tenant's one worker process, and
// each completes with its own answer once released.
func TestParkedRunsShareOneWorker(t *testing.T) {
	const n = 100
	e := newPool(t, Options{MaxWorkers: 4, MinWorkers: 1, Shares: oneSlotEach})
	waitWarm(t, e, 1) // a burst before the first process is up would meet the queue's bound
	g := newGatedTool()
	results := make(chan error, n)
	for i := range n {
		go func() {
			res, err := e.ExecuteWith(testCtx(t), parkedRequest(g, i), tenantT)
			switch {
			case err != nil:
				results <- err
			case res.HasError || res.ResultJSON != fmt.Sprint(i+1):
				results <- fmt.Errorf("run %d: %+v", i, res)
			default:
				results <- nil
			}
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return g.count() == n }, "%d tool calls to arrive", n)
	s := e.Stats()
	if s.Runs != n || s.Parked != n || s.Busy != 1 {
		t.Fatalf("%d runs parked, stats %+v: want all of them on one busy worker", n, s)
	}
	if s.WorkersAlive > 2 {
		t.Fatalf("%d worker processes for one tenant's parked runs (one, and a warm spare)", s.WorkersAlive)
	}
	close(g.release)
	for range n {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
}

// No worker process ever runs two tenants' programs, and so no cache in a
// worker is shared between tenants either.
func TestTenantsNeverShareAWorker(t *testing.T) {
	e := newScripted(t, Options{MaxWorkers: 6, MinWorkers: 1})
	seen := map[string][]int{}
	for round := range 3 {
		for _, tenant := range []string{"a", "b", "c"} {
			pid := pidFor(t, e, tenant)
			if !slices.Contains(seen[tenant], pid) {
				seen[tenant] = append(seen[tenant], pid)
			}
			_ = round
		}
	}
	for a, pa := range seen {
		for b, pb := range seen {
			if a == b {
				continue
			}
			for _, p := range pa {
				if slices.Contains(pb, p) {
					t.Fatalf("worker %d ran both %q and %q: %v", p, a, b, seen)
				}
			}
		}
	}
}

// A run that allocates past its memory limit ends with the memory text
// while its sibling in the same worker, parked on a tool call meanwhile,
// completes untouched.
func TestSiblingMemoryBombEndsAlone(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, MemoryLimitMB: 64, Shares: oneSlotEach})
	g := newGatedTool()
	parked := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := e.ExecuteWith(testCtx(t), parkedRequest(g, 41), tenantT)
		if err != nil {
			t.Error(err)
		}
		parked <- res
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return g.count() == 1 }, "the tool call to arrive")
	res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{
		Code:    "async () => { const a = []; while (true) a.push('x'.repeat(1000) + a.length) }",
		Timeout: protocol.TimeoutOf(30000),
	}, tenantT)
	if err != nil || res.Error != protocol.NewMemoryLimitError(64).Error() {
		t.Fatalf("the bomb: %+v, %v", res, err)
	}
	close(g.release)
	if res := <-parked; res == nil || res.HasError || res.ResultJSON != "42" {
		t.Fatalf("the parked sibling: %+v", res)
	}
	if s := e.Stats(); s.WorkersCrashed != 0 || s.HeapLimits != 1 || s.WorkersStarted > 2 {
		t.Fatalf("stats %+v: the watchdog should have ended the bomb alone", s)
	}
}

// Single statements that allocate or loop past their bounds inside one
// built-in call end with their run's text, and only their run: siblings
// parked on tool calls beside them, one holding 100 MB honestly under its
// 128 MB limit, complete with their values, and the worker serves on.
func TestSingleStatementBombsEndOnlyTheirRun(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, KillGrace: 200 * time.Millisecond, WorkerCommand: jsWorkerCommand(t)})
	g := newGatedTool()
	type sibling struct {
		req  *protocol.ExecuteRequest
		want string
	}
	siblings := []sibling{{parkedRequest(g, 1), "2"}, {parkedRequest(g, 2), "3"}, {parkedRequest(g, 3), "4"}}
	holder := parkedRequest(g, 0)
	holder.Code = "async () => { const b = new Uint8Array(100 << 20).fill(7); const n = await t.wait(0); return n + b[12345] }"
	holder.Timeout = protocol.TimeoutOf(30000)
	siblings = append(siblings, sibling{holder, "7"})
	reqs := make([]*protocol.ExecuteRequest, len(siblings))
	for i, s := range siblings {
		reqs[i] = s.req
	}
	results := startParked(t, e, g, reqs)
	memory := protocol.NewMemoryLimitError(128).Error()
	for _, bomb := range []string{
		"async () => 'x'.repeat(2 ** 29).length",
		"async () => 'x'.padStart(2 ** 29).length",
		"async () => new Array(5e7).fill(1.5).length",
		"async () => new Array(2 ** 32 - 1).join().length",
		"async () => new Array(1e7).fill('a').join('').length",
		"async () => new ArrayBuffer(2 ** 32).byteLength",
		"async () => new Float64Array(2 ** 28).length",
	} {
		res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: bomb, Timeout: protocol.TimeoutOf(10000)}, tenantT)
		if err != nil || res.Error != memory {
			t.Fatalf("%s: %+v, %v; want the memory text", bomb, res, err)
		}
	}
	close(g.release)
	for i, s := range siblings {
		if res := <-results[i]; res == nil || res.HasError || res.ResultJSON != s.want {
			t.Fatalf("sibling %d: %+v, want %s", i, res, s.want)
		}
	}
	if s := e.Stats(); s.WorkersCrashed+s.RSSKills+s.OutOfMemory+s.TimeoutKills != 0 {
		t.Fatalf("a bomb took the process: %+v", s)
	}
}

// Programs that grow one value by doubling it — each step a single
// allocation twice the last, copied into fresh memory — end with the
// memory text, and their siblings parked beside them, one holding 100 MB
// honestly, complete with their values. Each copy runs in Go code no
// interrupt reaches, and a collection waits for it: the meter must end
// the run by the allocation itself, at once, before the next doubling.
// The worker may be replaced after a bomb's last copy (the parent's kill
// of a run that stays in Go code past its memory deadline), but only once
// the siblings were given their drain.
func TestDoublingBombsEndOnlyTheirRun(t *testing.T) {
	for _, bomb := range []string{
		"async () => { let s = 'x'; while (true) s += s }",
		"async () => { let s = 'xy'; for (;;) s = s + s + 'z' }",
		"async () => { let a = [1]; while (true) a = a.concat(a) }",
	} {
		t.Run(bomb, func(t *testing.T) {
			e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
			g := newGatedTool()
			holder := parkedRequest(g, 0)
			holder.Code = "async () => { const b = new Uint8Array(100 << 20).fill(7); const n = await t.wait(0); return n + b[12345] }"
			holder.Timeout = protocol.TimeoutOf(60000)
			siblings := []*protocol.ExecuteRequest{holder, parkedRequest(g, 1), parkedRequest(g, 2)}
			want := []string{"7", "2", "3"}
			results := startParked(t, e, g, siblings)
			res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: bomb, Timeout: protocol.TimeoutOf(30000)}, tenantT)
			if memory := protocol.NewMemoryLimitError(128).Error(); err != nil || res.Error != memory {
				t.Fatalf("%+v, %v; want the memory text", res, err)
			}
			close(g.release)
			for i := range siblings {
				if res := <-results[i]; res == nil || res.HasError || res.ResultJSON != want[i] {
					t.Fatalf("sibling %d: %+v, want %s", i, res, want[i])
				}
			}
			if s := e.Stats(); s.WorkersCrashed+s.OutOfMemory != 0 {
				t.Fatalf("the bomb took its siblings' process down: %+v", s)
			}
		})
	}
}

// A sibling spinning in JavaScript does not hold back another run's tool
// answer: the answered run completes while the spinner still spins (it
// meets its own timeout later), on the same worker.
func TestSiblingSpinsWhileAToolAnswerArrives(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach})
	g := newGatedTool()
	parked := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := e.ExecuteWith(testCtx(t), parkedRequest(g, 1), tenantT) // a 500 ms bound
		if err != nil {
			t.Error(err)
		}
		parked <- res
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return g.count() == 1 }, "the tool call to arrive")
	spun := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{
			Code: "async () => { while (true) {} }", Timeout: protocol.TimeoutOf(1500),
		}, tenantT)
		if err != nil {
			t.Error(err)
		}
		spun <- res
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Runs == 2 }, "both runs to start")
	time.Sleep(100 * time.Millisecond) // let the spinner take the CPU
	close(g.release)
	if res := <-parked; res == nil || res.HasError || res.ResultJSON != "2" {
		t.Fatalf("the answered run: %+v", res)
	}
	select {
	case res := <-spun:
		t.Fatalf("the answered run completed only after the spinner ended (%+v)", res)
	default:
	}
	if res := <-spun; res == nil || res.Error != protocol.NewExecutionTimeoutError(1500).Error() {
		t.Fatalf("the spinner: %+v", res)
	}
	if s := e.Stats(); s.WorkersCrashed != 0 || s.TimeoutKills != 0 {
		t.Fatalf("stats %+v: the interrupt, not a kill, should have ended the spinner", s)
	}
}

// Go code that no interrupt reaches, past its run's deadline, is stopped
// only with its process: that run reports its timeout at once, with its
// usage; the worker takes nothing new (the tenant's next run goes to
// another process at once), and a sibling parked beside it completes with
// its answer before the process goes. The grace gives the stuck run the
// wall time to show its CPU on a loaded machine: with 200 ms, under make
// test beside other work, the parent answered before the worker's thread
// had run (263 µs of CPU).
func TestGoCodePastDeadlineSparesItsSiblings(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 3, MinWorkers: 1, KillGrace: time.Second, Shares: oneSlotEach})
	g := newGatedTool()
	parked := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := e.ExecuteWith(testCtx(t), parkedRequest(g, 1), tenantT)
		if err != nil {
			t.Error(err)
		}
		parked <- res
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return g.count() == 1 }, "the tool call to arrive")
	start := time.Now()
	res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{
		Code: "async () => /^(a+)+(?=c)/.test('a'.repeat(40) + 'b')", Timeout: protocol.TimeoutOf(300),
	}, tenantT)
	if err != nil || res.Error != protocol.NewExecutionTimeoutError(300).Error() || res.Usage == nil || res.Usage.CPU < 100*time.Millisecond {
		t.Fatalf("the backtracking run: %+v (usage %+v), %v", res, res.Usage, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the backtracking run answered after %v", d)
	}
	// The tenant's next run does not wait for the drain.
	res, err = e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"}, tenantT)
	if err != nil || res.ResultJSON != "1" {
		t.Fatalf("the next run: %+v, %v", res, err)
	}
	close(g.release)
	if res := <-parked; res == nil || res.HasError || res.ResultJSON != "2" {
		t.Fatalf("the sibling: %+v", res)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().TimeoutKills == 1 }, "the stuck worker to be stopped")
	if s := e.Stats(); s.WorkersCrashed != 0 {
		t.Fatalf("a sibling crashed: %+v", s)
	}
}

// A sibling that is still in flight when the drain ends goes with the
// process: WORKER_CRASHED (retryable), with a text that does not blame it.
func TestGoCodePastDeadlineBlamesNoSiblingItTakes(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 3, MinWorkers: 1, KillGrace: 200 * time.Millisecond, StuckDrain: 500 * time.Millisecond, Shares: oneSlotEach})
	g := newGatedTool()
	defer close(g.release)
	parked := make(chan error, 1)
	go func() {
		_, err := e.ExecuteWith(testCtx(t), parkedRequest(g, 1), tenantT)
		parked <- err
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return g.count() == 1 }, "the tool call to arrive")
	res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{
		Code: "async () => /^(a+)+(?=c)/.test('a'.repeat(40) + 'b')", Timeout: protocol.TimeoutOf(300),
	}, tenantT)
	if err != nil || res.Error != protocol.NewExecutionTimeoutError(300).Error() {
		t.Fatalf("the backtracking run: %+v, %v", res, err)
	}
	err = <-parked
	want := "The worker process under this execution was stopped because another execution on it broke a bound that only stopping the process could hold; nothing this execution did is at fault. Run it again."
	if protocol.CodeOf(err) != protocol.CodeWorkerCrashed || !protocol.CodeOf(err).Retryable() || err.Error() != want {
		t.Fatalf("the sibling: %v, want WORKER_CRASHED with %q", err, want)
	}
	res, err = e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"}, tenantT)
	if err != nil || res.ResultJSON != "1" {
		t.Fatalf("the next run: %+v, %v", res, err)
	}
}

// A tenant holding its one worker with CPU-bound runs does not hold back
// another tenant: that one's run goes to a process of its own and returns
// while the flood is still running.
func TestBusyTenantDoesNotStallAnother(t *testing.T) {
	e := newScripted(t, Options{MaxWorkers: 3, MinWorkers: 1, Shares: oneSlotEach})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "spin 1500\npid", Timeout: protocol.TimeoutOf(60000)}, protocol.Policy{Tenant: "b"})
		}()
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Runs == 4 }, "four runs to start")
	pidA := pidFor(t, e, "a")
	if s := e.Stats(); s.Runs == 0 {
		t.Fatalf("the flood was over before tenant a's run returned: %+v", s)
	}
	wg.Wait()
	if pidB := pidFor(t, e, "b"); pidB == pidA {
		t.Fatalf("tenants a and b shared worker %d", pidA)
	}
}

// A run that waits for room waits at most QueueTimeout, then fails with
// the queue fault and its text.
func TestQueueWaitIsBounded(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1, RunsPerWorker: 1, QueueTimeout: 300 * time.Millisecond})
	// The first run must not wait on the worker's start: on a loaded
	// machine that alone can pass the 300 ms bound.
	testutil.WaitFor(t, 10*time.Second, func() bool { s := e.Stats(); return s.WorkersAlive == 1 && s.Spares == 1 }, "one worker and its spare")
	done := make(chan struct{})
	go func() {
		defer close(done)
		runScript(t, e, "sleep 3000")
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Runs == 1 }, "the run to start")
	_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"})
	var qt *protocol.QueueTimeoutError
	if !errors.As(err, &qt) || protocol.CodeOf(err) != protocol.CodeQueueOverflow || qt.Waited != 300*time.Millisecond {
		t.Fatalf("got %v, want the queue timeout at 300 ms", err)
	}
	if err.Error() != protocol.NewQueueTimeoutError(300*time.Millisecond, qt.RetryAfter).Error() {
		t.Fatalf("text %q", err)
	}
	if s := e.Stats(); s.QueueTimeouts != 1 || s.Queued != 0 {
		t.Fatalf("stats %+v", s)
	}
	<-done
}

// Each tenant has its own queue: one that filled its queue is refused,
// while another tenant's execution still runs.
func TestQueueIsPerTenant(t *testing.T) {
	e := newScripted(t, Options{MaxWorkers: 3, MinWorkers: 1, RunsPerWorker: 1, QueueBound: 1, Shares: oneSlotEach})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runScript(t, e, "sleep 1500")
		}()
		testutil.WaitFor(t, 10*time.Second, func() bool { s := e.Stats(); return s.Runs == 1 && s.Queued == i }, "one run and %d queued", i)
	}
	_, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid"})
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("the flooding tenant's third run: %v, want QUEUE_OVERFLOW", err)
	}
	pidFor(t, e, "other")
	wg.Wait()
}

// A tenant's worker that ran nothing for WorkerIdleTimeout is stopped, and
// the pool shrinks back to its warm minimum.
func TestIdleWorkersShrinkToTheWarmMinimum(t *testing.T) {
	// The idle bound leaves a busy machine room to start all three first.
	e := newScripted(t, Options{MaxWorkers: 4, MinWorkers: 1, WorkerIdleTimeout: 3 * time.Second})
	for _, tenant := range []string{"a", "b", "c"} {
		pidFor(t, e, tenant)
	}
	if s := e.Stats(); s.WorkersAlive < 3 {
		t.Fatalf("three tenants ran on %d workers", s.WorkersAlive)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { s := e.Stats(); return s.WorkersAlive == 1 && s.Spares == 1 }, "one worker and its spare")
}

// At the ceiling, a tenant that holds no worker gets one: the worker of
// another tenant that has been idle longest is stopped to make room.
func TestCeilingMakesRoomForANewTenant(t *testing.T) {
	e := newScripted(t, Options{MaxWorkers: 2, MinWorkers: 1})
	a := pidFor(t, e, "a")
	b := pidFor(t, e, "b")
	c := pidFor(t, e, "c")
	if c == a || c == b {
		t.Fatalf("tenant c ran on a worker of a or b: %d, %d, %d", a, b, c)
	}
	if s := e.Stats(); s.WorkersAlive > 2 {
		t.Fatalf("%d workers under a ceiling of 2", s.WorkersAlive)
	}
	if pidFor(t, e, "b") == a {
		t.Fatal("tenant b was given tenant a's worker")
	}
}

// The free worker process goes first to a waiting tenant that holds none,
// then to the one that used the least run-clock time per weight lately.
func TestFreeWorkerGoesToTheLeastServedTenant(t *testing.T) {
	e := &Executor{opts: Options{MaxWorkers: 8, Shares: func(tenant string) Share {
		if tenant == "heavy" {
			return Share{Weight: 4, CPUSlots: 4}
		}
		return Share{CPUSlots: 4}
	}}}
	e.pool.init(1)
	now := time.Now()
	wait := func(name string, usage float64, workers int) {
		t := e.pool.tenant(name)
		t.waiting.Push(&waiter{t: t})
		t.usage, t.usageAt = usage, now
		for range workers {
			t.workers = append(t.workers, &worker{})
		}
	}
	wait("busy", 10, 1)   // 10 s lately, weight 1
	wait("heavy", 30, 1)  // 30 s lately, weight 4: 7.5 per weight
	wait("hungry", 50, 0) // holds no worker
	wait("full", 0, 4)    // at its share already
	order := []string{}
	for range 3 {
		t := e.nextClaimLocked()
		if t == nil {
			break
		}
		order = append(order, t.name)
		t.waiting.Pop()
	}
	if want := []string{"hungry", "heavy", "busy"}; !slices.Equal(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}
