package local

import (
	"slices"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// Code that escaped the sandbox owns its worker's run table and can write
// anything there. What it writes reaches no run on another worker: a table
// naming the ids of every run so far, each executing past its deadline and
// holding a terabyte, gets only its own worker killed, and runs on other
// workers, of its tenant (runsPerWorker 1: a process per run) and of
// another, finish with their own results and usage, on the same processes.
func TestForgedRunTableReachesNoOtherWorker(t *testing.T) {
	e := newScripted(t, Options{MaxWorkers: 4, MinWorkers: 1, RunsPerWorker: 1,
		KillGrace: 100 * time.Millisecond, StuckDrain: 300 * time.Millisecond,
		Shares: func(string) Share { return Share{CPUSlots: 2} }})
	g := newGatedTool()
	type outcome struct {
		res *protocol.ExecuteResult
		err error
	}
	park := func(tenant string) chan outcome {
		done := make(chan outcome, 1)
		go func() {
			res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "dispatch 1", Dispatch: g.dispatch,
				Timeout: protocol.TimeoutOf(60000)}, protocol.Policy{Tenant: tenant})
			done <- outcome{res, err}
		}()
		return done
	}
	sibling, other := park("b"), park("a")
	testutil.WaitFor(t, 30*time.Second, func() bool { return g.count() == 2 }, "the innocent runs to park")
	before := workerPids(e)

	_, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "forge", Timeout: protocol.TimeoutOf(60000)},
		protocol.Policy{Tenant: "b"})
	if err == nil {
		t.Fatal("the forger's run completed, yet its worker wrote a run past its deadline")
	}
	if s := e.Stats(); s.TimeoutKills+s.RSSKills != 1 {
		t.Fatalf("the parent killed %d workers for their bounds, want the forger's alone: %+v", s.TimeoutKills+s.RSSKills, s)
	}
	close(g.release)
	for name, c := range map[string]chan outcome{"tenant b's sibling": sibling, "tenant a's run": other} {
		o := <-c
		if o.err != nil || o.res.HasError || o.res.ResultJSON != `["{\"result\":[0]}"]` {
			t.Fatalf("%s beside the forger: %+v, %v", name, o.res, o.err)
		}
		if u := o.res.Usage; u == nil || u.CPU >= time.Minute || u.RunClock >= time.Minute || u.PeakHeapBytes >= 1<<40 {
			t.Fatalf("%s reports usage %+v, what the forger wrote", name, o.res.Usage)
		}
	}
	if after := workerPids(e); !slices.Equal(before, after) {
		t.Fatalf("the innocent runs' workers were %v before the forgery and %v after it", before, after)
	}
}

// workerPids lists the processes of the workers tenants hold, sorted.
func workerPids(e *Executor) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var pids []int
	for _, tp := range e.pool.tenants {
		for _, w := range tp.workers {
			pids = append(pids, w.p.pid)
		}
	}
	slices.Sort(pids)
	return pids
}
