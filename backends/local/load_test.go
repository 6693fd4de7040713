package local

import (
	"math"
	"testing"
	"time"
)

// The load follows the share of a CPU a worker computes: it climbs past
// busyLoad within 150 ms of full use, settles at the share
// of a steady half, and decays once the monitor stops polling an idle
// worker.
func TestCPULoadFollowsTheShareComputed(t *testing.T) {
	var l cpuLoad
	t0 := time.Unix(1000, 0)
	if v := l.value(t0); v != 0 {
		t.Fatalf("a worker never polled has load %v", v)
	}
	poll := 10 * time.Millisecond
	now, total := t0, time.Duration(0)
	l.observe(now, total)
	// Full use: fifteen polls (150 ms) take it past busyLoad.
	for range 15 {
		now, total = now.Add(poll), total+poll
		l.observe(now, total)
	}
	if v := l.value(now); v < busyLoad || v > 1 {
		t.Fatalf("after 150 ms of full use the load is %.3f, want between %v and 1", v, busyLoad)
	}
	// Half use for a second: it settles at a half.
	for range 100 {
		now, total = now.Add(poll), total+poll/2
		l.observe(now, total)
	}
	if v := l.value(now); math.Abs(v-0.5) > 0.01 {
		t.Fatalf("after a second at half use the load is %.3f, want 0.5", v)
	}
	// Unpolled for 300 ms: three time constants.
	if v, want := l.value(now.Add(300*time.Millisecond)), 0.5*math.Exp(-3); math.Abs(v-want) > 0.001 {
		t.Fatalf("300 ms after the last poll the load is %.4f, want %.4f", v, want)
	}
}

// A tenant's next run goes to the first of its workers that is not busy,
// though another has fewer runs computing, so that runs pack onto few
// processes; a worker busy by its load, by a hog, or by busyRuns runs
// computing at once, is passed over.
func TestPlacementPacksOntoWorkersNotBusy(t *testing.T) {
	e := &Executor{opts: Options{RunsPerWorker: 64, WorkerMemoryMB: 1024}}
	newW := func(runs, parked int) *worker {
		w := &worker{p: &process{}, runs: runs}
		w.parked.Store(int32(parked))
		return w
	}
	a, b := newW(3, 2), newW(0, 0) // a: one run computing, b: none
	tp := &tenantPool{name: "t", workers: []*worker{a, b}}
	e.pool.tenants = map[string]*tenantPool{"t": tp}
	now := time.Now()
	setLoad := func(w *worker, v float64) {
		w.load.bits.Store(math.Float64bits(v))
		w.load.at.Store(now.UnixNano())
	}

	setLoad(a, 0.3)
	if got := e.placeLocked(tp, false); got != a {
		t.Fatal("a run went past the first worker, computing at 0.3 of its CPU, to an idle one")
	}
	setLoad(a, 0.9)
	if got := e.placeLocked(tp, false); got != b {
		t.Fatal("a run went to a worker computing at 0.9 of its CPU beside an idle one")
	}
	setLoad(a, 0.1)
	a.runs = 2 + busyRuns
	if got := e.placeLocked(tp, false); got != b {
		t.Fatalf("a run went to a worker with %d runs computing beside an idle one", busyRuns)
	}
	a.runs = 3
	a.hogs.Store(1)
	if got := e.placeLocked(tp, false); got != b {
		t.Fatal("a run went to a worker hosting a hog beside an idle one")
	}
	a.hogs.Store(0)
	// Both busy: the one with the fewest runs computing, as before.
	a.runs = 2 + busyRuns
	b.runs = 1
	setLoad(b, 0.95)
	if got := e.placeLocked(tp, false); got != b {
		t.Fatal("with both workers busy a run did not go to the one with fewer runs computing")
	}
}
