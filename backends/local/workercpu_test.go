package local

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// spin is JavaScript that computes for a few hundred milliseconds of CPU.
const spin = `async () => { let x = 0; for (let i = 0; i < 2e6; i++) { x += i % 7 } return 1 }`

// workerCPUOf is the CPU Stats says tenant's worker processes burned.
func workerCPUOf(e *Executor, tenant string) time.Duration {
	for _, c := range e.Stats().WorkerCPU {
		if c.Tenant == tenant {
			return c.CPU
		}
	}
	return 0
}

// tenantProcessCPU is the CPU the worker processes tenant holds burned, as
// the test reads it from /proc itself.
func tenantProcessCPU(t *testing.T, e *Executor, tenant string) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, pid := range e.Stats().TenantWorkers[tenant] {
		sum += processCPUOf(t, pid)
	}
	return sum
}

// spinFor runs n CPU-heavy executions for tenant one after another and
// returns the CPU their usage reports.
func spinFor(t *testing.T, e *Executor, tenant string, n int) time.Duration {
	t.Helper()
	var billed time.Duration
	for range n {
		res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: spin, Timeout: protocol.TimeoutOf(20000)}, protocol.Policy{Tenant: tenant})
		if err != nil || res.ResultJSON != "1" || res.Usage == nil {
			t.Fatalf("%+v, %v", res, err)
		}
		billed += res.Usage.CPU
	}
	return billed
}

// near reports whether got is within a thirtieth of want, plus the slack
// of the two readings: /proc counts whole ticks of 10 ms, and a figure
// read between polls lags by at most a poll's CPU.
func near(got, want time.Duration) bool {
	d := got - want
	return d.Abs() <= want/30+20*time.Millisecond+monitorPoll
}

// The CPU the pool says a tenant's worker processes burned is what the
// kernel says they burned, and what the tenant's runs report they used is
// within 5 % of it.
func TestWorkerCPUIsWhatTheTenantsWorkersBurned(t *testing.T) {
	// A plain worker, as the gateway ships: the race detector's time is
	// not what runs bill.
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
	workerOf(t, e, "t")
	figure0, proc0 := workerCPUOf(e, "t"), tenantProcessCPU(t, e, "t")
	billed := spinFor(t, e, "t", 3)
	proc := tenantProcessCPU(t, e, "t") - proc0
	figure := workerCPUOf(e, "t") - figure0
	t.Logf("3 runs billed %v; the pool counted %v for the tenant's workers; /proc says they burned %v", billed, figure, proc)
	if proc < 300*time.Millisecond {
		t.Fatalf("3 computing runs burned only %v of CPU", proc)
	}
	if !near(figure, proc) {
		t.Fatalf("the pool counted %v of CPU for the tenant's workers; /proc says they burned %v", figure, proc)
	}
	if d := billed - figure; d.Abs() > figure/20 {
		t.Fatalf("3 runs billed %v of CPU; the tenant's workers burned %v (gap %v)", billed, figure, d)
	}
}

// Each tenant's figure moves with its own runs alone.
func TestWorkerCPUIsEachTenantsOwn(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 3, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
	workerOf(t, e, "a")
	workerOf(t, e, "b")
	for _, busy := range []string{"a", "b"} {
		idle := "b"
		if busy == "b" {
			idle = "a"
		}
		busy0, idle0 := workerCPUOf(e, busy), workerCPUOf(e, idle)
		busyProc0, idleProc0 := tenantProcessCPU(t, e, busy), tenantProcessCPU(t, e, idle)
		spinFor(t, e, busy, 1)
		busyMoved, idleMoved := workerCPUOf(e, busy)-busy0, workerCPUOf(e, idle)-idle0
		busyProc, idleProc := tenantProcessCPU(t, e, busy)-busyProc0, tenantProcessCPU(t, e, idle)-idleProc0
		t.Logf("%s ran: its figure moved %v (/proc: %v); %s's moved %v (/proc: %v)", busy, busyMoved, busyProc, idle, idleMoved, idleProc)
		if busyProc < 100*time.Millisecond || !near(busyMoved, busyProc) {
			t.Fatalf("%s ran: its figure moved %v; /proc says its worker burned %v", busy, busyMoved, busyProc)
		}
		if !near(idleMoved, idleProc) || idleMoved > busyMoved/10 {
			t.Fatalf("%s ran: %s's figure moved %v (its worker burned %v; %s's %v)", busy, idle, idleMoved, idleProc, busy, busyMoved)
		}
	}
}

// A worker killed right after a busy run keeps what it burned counted, up
// to its end: the figure takes the reaped process's exact account, the CPU
// it burned since the pool last polled it included.
func TestWorkerCPUOfAKilledWorkerStaysCounted(t *testing.T) {
	// One worker ever, so that what tenant "" holds is what it burned as a
	// spare, and the two figures together are all it burned.
	e := newPool(t, Options{MaxWorkers: 1, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
	pid := workerOf(t, e, "k")
	e.mu.Lock()
	w := e.pool.tenants["k"].workers[0]
	e.mu.Unlock()
	asSpare := workerCPUOf(e, "")
	spinFor(t, e, "k", 1)
	before := workerCPUOf(e, "k")
	atKill := processCPUOf(t, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return slices.Contains(e.Stats().WorkerDeaths, WorkerDeaths{Tenant: "k", Cause: "crashed", Count: 1})
	}, "the killed worker's death counted")
	after := workerCPUOf(e, "k")
	// What the kernel accounted for the process when it was reaped
	// (wait4), to the nanosecond: the two figures together are all of it,
	// none lost and none counted twice.
	ps := w.p.cmd.ProcessState
	exact := ps.UserTime() + ps.SystemTime()
	t.Logf("the worker burned %v in all (%v by /proc before its kill), %v of it as a spare; the tenant's figure went from %v to %v", exact, atKill, asSpare, before, after)
	if atKill-asSpare < 100*time.Millisecond {
		t.Fatalf("a computing run burned only %v of CPU", atKill-asSpare)
	}
	if after < before || asSpare+after != exact {
		t.Fatalf("the killed worker burned %v in all, %v as a spare; its tenant's figure went from %v to %v", exact, asSpare, before, after)
	}
}

// A worker that burns CPU and then fails its start burned it all the same:
// the spares' figure (tenant "") counts it, from the reaped process.
func TestWorkerCPUOfAFailedStartIsCounted(t *testing.T) {
	// The worker may run as another user (workerUser, when the tests run
	// as root): it may write the report and reach it.
	dir, err := os.MkdirTemp("", "failedstart")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	report := filepath.Join(dir, "times")
	if err := os.WriteFile(report, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if os.Chmod(dir, 0o755) != nil || os.Chmod(report, 0o666) != nil {
		t.Fatal("cannot open the report to the worker's user")
	}
	// The shell computes, appends the CPU it used (the times builtin: its
	// own user and system time on the first line) and exits unready.
	script := `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; times >> "$0"`
	e := newScripted(t, Options{MaxWorkers: 1, MinWorkers: 1, WorkerCommand: []string{"/bin/sh", "-c", script, report}, StartTimeout: 30 * time.Second})
	_, err = e.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "pid"})
	if protocol.CodeOf(err) != protocol.CodeWorkerCrashed {
		t.Fatalf("got %v, want WORKER_CRASHED", err)
	}
	e.Close() // no start after those it made
	var burned time.Duration
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := 0; i < len(lines); i += 2 { // the shell's line, then its children's
		burned += shellTimes(t, lines[i])
	}
	got := workerCPUOf(e, "")
	t.Logf("%d failed starts burned %v; the spares' figure is %v", len(lines)/2, burned, got)
	if burned == 0 || !near(got, burned) {
		t.Fatalf("failed starts burned %v, the spares' figure is %v", burned, got)
	}
}

// shellTimes adds up the durations a line of the shell's times builtin
// gives ("0m0.25s 0m0.01s").
func shellTimes(t *testing.T, line string) time.Duration {
	t.Helper()
	var sum time.Duration
	for _, f := range strings.Fields(line) {
		m, s, ok := strings.Cut(strings.TrimSuffix(f, "s"), "m")
		mins, err1 := strconv.Atoi(m)
		secs, err2 := strconv.ParseFloat(s, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("times printed %q", line)
		}
		sum += time.Duration(mins)*time.Minute + time.Duration(secs*float64(time.Second))
	}
	return sum
}
