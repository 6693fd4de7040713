package local

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// usageLog records what Policy.Usage was told.
type usageLog struct {
	mu   sync.Mutex
	seen []protocol.Usage
}

func (l *usageLog) add(u *protocol.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, *u)
}

func (l *usageLog) sum() (n int, clock, cpu time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.seen {
		clock += u.RunClock
		cpu += u.CPU
	}
	return len(l.seen), clock, cpu
}

// processCPUOf is the CPU time process pid used, user and system, from
// /proc/PID/stat (clock ticks of 10 ms).
func processCPUOf(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	utime, _ := strconv.Atoi(string(f[11]))
	stime, _ := strconv.Atoi(string(f[12]))
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// workerOf runs a trivial program for tenant and returns the pid of the
// one worker process the tenant holds.
func workerOf(t *testing.T, e *Executor, tenant string) int {
	t.Helper()
	if res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => 1"}, protocol.Policy{Tenant: tenant}); err != nil || res.ResultJSON != "1" {
		t.Fatalf("%+v, %v", res, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ws := e.pool.tenants[tenant].workers
	if len(ws) != 1 {
		t.Fatalf("tenant %q holds %d workers, want one", tenant, len(ws))
	}
	return ws[0].p.pid
}

// work is JavaScript that computes for a while, the same CPU however busy
// the machine is.
const work = `let x = 0; for (let i = 0; i < 1e6; i++) { x += i % 7 }`

// The CPU runs report in their usage is the CPU their worker process spent
// for them, within 5 %: each run's own thread, and its share of what the
// process spent beside (the collector, the pipe), for runs side by side.
func TestUsageCPUMatchesTheWorkersCPU(t *testing.T) {
	// A plain worker: a race-instrumented one spends its time in the
	// detector, which is not what the gateway ships.
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
	pid := workerOf(t, e, "t")
	before := processCPUOf(t, pid)
	var mu sync.Mutex
	var billed time.Duration
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => { " + work + "; return 1 }"}, tenantT)
			if err != nil || res.ResultJSON != "1" || res.Usage == nil {
				t.Errorf("%+v, %v", res, err)
				return
			}
			mu.Lock()
			billed += res.Usage.CPU
			mu.Unlock()
		}()
	}
	wg.Wait()
	spent := processCPUOf(t, pid) - before
	t.Logf("4 runs billed %v; their worker spent %v", billed, spent)
	// /proc counts in ticks of 10 ms: the bound allows them too.
	if diff := billed - spent; diff > spent/20+20*time.Millisecond || -diff > spent/20+20*time.Millisecond {
		t.Fatalf("4 runs billed %v of CPU; their worker spent %v", billed, spent)
	}
}

// A retained execution bills what it does after its result to the caller's
// Policy.Usage, each invocation with its run clock and CPU, and a timer
// that computes between invocations with the next one: what the worker
// spent is billed, within 5 %.
func TestRetainedExecutionsBillInvocationsAndTimers(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
	pid := workerOf(t, e, "t")
	log := &usageLog{}
	req := &protocol.ExecuteRequest{
		Code:    `async () => ({ fetch: (req) => { if (req.url.endsWith('/timer')) { setTimeout(() => { ` + work + ` }, 0) } else { ` + work + ` } return new Response('ok') } })`,
		Timeout: protocol.TimeoutOf(10000),
	}
	id := grantWith(t, e, req, protocol.Policy{Tenant: "t", Usage: log.add})
	before := processCPUOf(t, pid)
	for range 3 {
		if body := invokeBody(t, e, id, "/"); body != "ok" {
			t.Fatalf("invocation answered %q", body)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { n, _, _ := log.sum(); return n >= 3 }, "three invocations billed")
	_, clock, cpu := log.sum()
	if clock <= 0 || cpu <= 0 {
		t.Fatalf("3 computing invocations billed run clock %v, CPU %v", clock, cpu)
	}
	// The timer computes after its invocation answered: it is billed with
	// the next invocation.
	invokeBody(t, e, id, "/timer")
	time.Sleep(time.Second)
	invokeBody(t, e, id, "/quick")
	testutil.WaitFor(t, 10*time.Second, func() bool { n, _, _ := log.sum(); return n >= 5 }, "the timer billed")
	_, clock2, cpu2 := log.sum()
	spent := processCPUOf(t, pid) - before
	t.Logf("3 invocations: clock %v cpu %v; with the timer: clock %v cpu %v; the worker spent %v", clock, cpu, clock2, cpu2, spent)
	// The timer does one invocation's work, a third of the three's: half
	// of that is the floor (measured 0.74–1.0 of it; the bug billed 0).
	if clock2-clock < clock/6 || cpu2-cpu < cpu/6 {
		t.Fatalf("a timer doing an invocation's work between invocations added run clock %v, CPU %v (invocations: %v, %v)", clock2-clock, cpu2-cpu, clock, cpu)
	}
	if diff := cpu2 - spent; diff > spent/20+20*time.Millisecond || -diff > spent/20+20*time.Millisecond {
		t.Fatalf("billed %v of CPU after the grant; the worker spent %v", cpu2, spent)
	}
	if err := e.CloseHandles(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
}

// Native requests read their bodies on goroutines of their own, beside
// whatever else the worker runs: the bodies are charged to the runs that
// fetched them, never to a sibling computing meanwhile, which completes
// under a memory limit smaller than what the bodies take together, and
// every fetcher is charged at least its body.
func TestNativeBodiesAreChargedToTheirFetchers(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 8<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	defer srv.Close()
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach,
		Native: NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	workerOf(t, e, "t")
	computer := "async () => { " + work + "; return 'computed' }"
	fetcher := fmt.Sprintf(`async () => { let n = 0; for (let i = 0; i < 4; i++) n += (await (await fetch(%q)).arrayBuffer()).byteLength; return n }`, srv.URL)
	for round := range 3 {
		var wg sync.WaitGroup
		results := make([]*protocol.ExecuteResult, 5)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, policy := fetcher, tenantT
				if i == 0 {
					// A third of the bodies in flight at once.
					code, policy.MemoryLimitMB = computer, 24
				}
				res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: code, Timeout: protocol.TimeoutOf(60000)}, policy)
				if err != nil {
					t.Error(err)
					return
				}
				results[i] = res
			}()
		}
		wg.Wait()
		for i, res := range results {
			want := fmt.Sprint(4 * len(body))
			if i == 0 {
				want = `"computed"`
			}
			if res == nil || res.ResultJSON != want {
				t.Fatalf("round %d, run %d: %+v, want %s", round, i, res, want)
			}
		}
		for i, res := range results[1:] {
			if res.Usage.PeakHeapBytes < int64(len(body)) {
				t.Fatalf("round %d: fetcher %d was charged a peak of %d MiB for its 8 MiB bodies", round, i+1, res.Usage.PeakHeapBytes>>20)
			}
		}
	}
}

// Runs that compute side by side on their worker's one CPU take turns: each
// reports how long it waited for its turn, and that wait is on its run
// clock, beside its own CPU.
func TestCPUWaitBehindSiblingsIsReported(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach})
	workerOf(t, e, "t")
	var wg sync.WaitGroup
	results := make([]*protocol.ExecuteResult, 3)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => { " + work + "; return 1 }"}, tenantT)
			if err != nil || res.ResultJSON != "1" {
				t.Errorf("%+v, %v", res, err)
				return
			}
			results[i] = res
		}()
	}
	wg.Wait()
	for i, res := range results {
		if res == nil {
			t.FailNow()
		}
		t.Logf("run %d: run clock %v, CPU %v, waited %v", i, res.RunClock, res.Usage.CPU, res.CPUWait)
		if res.CPUWait <= res.Usage.CPU/4 {
			t.Fatalf("run %d computed %v beside two siblings on one CPU and waited %v", i, res.Usage.CPU, res.CPUWait)
		}
		if res.RunClock < (res.Usage.CPU+res.CPUWait)*3/4 {
			t.Fatalf("run %d: run clock %v, less than its CPU %v and its wait %v", i, res.RunClock, res.Usage.CPU, res.CPUWait)
		}
	}
}
