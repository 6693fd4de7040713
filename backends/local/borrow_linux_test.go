package local

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// niceOf is the lowest nice value among a process's threads, from
// /proc/PID/task/TID/stat (field 19): the value its threads start at. A
// thread that ran a hog piece is lower in priority than the rest.
func niceOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	lowest := 100
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		n, err := strconv.Atoi(string(f[16]))
		if err != nil {
			t.Fatal(err)
		}
		lowest = min(lowest, n)
	}
	return lowest
}

// autogroupNice is the nice value of the session group of process pid,
// from /proc/PID/autogroup ("/autogroup-N nice V"); false where the kernel
// has no such groups.
func autogroupNice(t *testing.T, pid int) (int, bool) {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/autogroup")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) != 3 || string(f[1]) != "nice" {
		t.Fatalf("/proc/%d/autogroup reads %q", pid, b)
	}
	n, err := strconv.Atoi(string(f[2]))
	if err != nil {
		t.Fatal(err)
	}
	return n, true
}

// A worker leads a session of its own, so that where the kernel shares
// the CPU between sessions its runs weigh as one process, not as part of
// the gateway's session (processGroupAttr).
func TestWorkersLeadSessionsOfTheirOwn(t *testing.T) {
	e := newScripted(t, Options{MaxWorkers: 2, MinWorkers: 2})
	waitWarm(t, e, 2)
	own, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	pid := pidFor(t, e, "t")
	sid, err := unix.Getsid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if sid != pid || sid == own {
		t.Fatalf("worker %d is in session %d (the test's is %d), want a session it leads", pid, sid, own)
	}
}

// spinPids runs n CPU-bound scripted runs of tenant t at once and returns
// the worker pid each ran on.
func spinPids(t *testing.T, e *Executor, n int) []int {
	t.Helper()
	pids := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "spin 2000\npid", Timeout: protocol.TimeoutOf(30000)}, protocol.Policy{Tenant: "t"})
			if err != nil || res.HasError {
				t.Errorf("%+v, %v", res, err)
				return
			}
			var v []int
			json.Unmarshal([]byte(res.ResultJSON), &v)
			pids[i] = v[0]
		}()
		testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().Runs == i+1 }, "run %d to start", i+1)
		if i+1 < n {
			// The pool packs runs onto a worker until it is busy: the next
			// run starts once the spinners have made theirs so.
			testutil.WaitFor(t, 10*time.Second, func() bool { return tenantBusy(e, "t") }, "the workers of run %d to be busy", i+1)
		}
	}
	wg.Wait()
	return pids
}

// tenantBusy reports whether every worker of tenant that hosts a run is
// busy computing.
func tenantBusy(e *Executor, tenant string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	tp := e.pool.tenants[tenant]
	if tp == nil {
		return false
	}
	now := time.Now()
	for _, w := range tp.workers {
		if w.runs > 0 && !w.busy(now) {
			return false
		}
	}
	return true
}

// A tenant at the default share borrows a second worker process for its
// CPU-bound runs while it has the group to itself, at nice 10; not once
// another tenant holds a worker; and a tenant whose share names one slot
// keeps to one process.
func TestBorrowingIsForTheDefaultShareOnly(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: the default share borrows nothing")
	}
	e := newScripted(t, Options{MaxWorkers: 4, MinWorkers: 2})
	waitWarm(t, e, 2)
	pids := spinPids(t, e, 2)
	if pids[0] == pids[1] {
		t.Fatalf("two CPU-bound runs shared worker %d: nothing was borrowed", pids[0])
	}
	if a, b := niceOf(t, pids[0]), niceOf(t, pids[1]); a != 0 || b != borrowedNice {
		t.Fatalf("nice values %d and %d, want the share's at 0 and the borrowed one at %d", a, b, borrowedNice)
	}
	// Where the kernel groups CPU time by session, the borrowed worker's
	// group yields as its threads do.
	if a, ok := autogroupNice(t, pids[0]); ok {
		if b, _ := autogroupNice(t, pids[1]); a != 0 || b != borrowedNice {
			t.Fatalf("session groups' nice values %d and %d, want the share's at 0 and the borrowed one at %d", a, b, borrowedNice)
		}
	}

	shared := newScripted(t, Options{MaxWorkers: 4, MinWorkers: 2})
	waitWarm(t, shared, 2)
	pidFor(t, shared, "other")
	if pids := spinPids(t, shared, 2); pids[0] != pids[1] {
		t.Fatalf("a tenant borrowed beside another tenant's worker: %v", pids)
	}

	capped := newScripted(t, Options{MaxWorkers: 4, MinWorkers: 2, Shares: oneSlotEach})
	waitWarm(t, capped, 2)
	if pids := spinPids(t, capped, 2); pids[0] != pids[1] {
		t.Fatalf("a share of one slot ran on workers %v", pids)
	}
}
