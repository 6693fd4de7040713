package worker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supolka/codemode-gateway/protocol"
)

// pinToOneCPU confines every thread of the test process to one CPU, as the
// parent confines a worker, until the test ends.
func pinToOneCPU(t *testing.T) int {
	t.Helper()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Skip("no CPU affinity here:", err)
	}
	cpu := -1
	for i := range 1024 {
		if was.IsSet(i) {
			cpu = i
			break
		}
	}
	setAll := func(set *unix.CPUSet) {
		for range 2 {
			tasks, _ := os.ReadDir("/proc/self/task")
			for _, task := range tasks {
				tid, _ := strconv.Atoi(task.Name())
				_ = unix.SchedSetaffinity(tid, set)
			}
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	setAll(&one)
	t.Cleanup(func() { setAll(&was) })
	return cpu
}

// testClock is a sandbox.Clock with a fixed bound that records what the
// meter gives back.
type testClock struct {
	left     time.Duration
	credited atomic.Int64
}

func (c *testClock) Left() time.Duration    { return c.left }
func (c *testClock) Credit(d time.Duration) { c.credited.Add(int64(d)) }

// spinFor keeps the calling thread busy for d of its own CPU time.
func spinFor(d time.Duration) {
	clk := clockOfThread(currentThread())
	start := clk.read()
	x := 0
	for clk.read()-start < d {
		for i := range 1000 {
			x += i
		}
	}
	_ = x
}

// piece runs fn as one piece of work of run on a goroutine of its own,
// the way a run's loop does, and returns when it has left.
func runPiece(m *meter, run uint64, clock *testClock, fn func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var c interface {
			Left() time.Duration
			Credit(time.Duration)
		}
		if clock != nil {
			c = clock
		}
		p := m.enter(context.Background(), run, c)
		fn()
		m.leave(p)
	}()
	wg.Wait()
}

func newTestMeter(t *testing.T) *meter {
	t.Helper()
	runtime.GC()
	m := newMeter(nil, int64(heapLive()), runtime.GOMAXPROCS(0))
	t.Cleanup(func() { runtime.GOMAXPROCS(m.baseProcs) })
	return m
}

// Each run is charged the CPU its own pieces ran on their threads, while
// the pieces run side by side.
func TestMeterChargesEachRunItsOwnCPU(t *testing.T) {
	m := newTestMeter(t)
	cancel := func(error) {}
	m.add(1, 128, time.Minute, cancel)
	m.add(2, 128, time.Minute, cancel)
	var wg sync.WaitGroup
	for run, d := range map[uint64]time.Duration{1: 300 * time.Millisecond, 2: 100 * time.Millisecond} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runPiece(m, run, nil, func() { spinFor(d) })
		}()
	}
	wg.Wait()
	cpu1, _, _ := m.usage(1)
	cpu2, _, _ := m.usage(2)
	// Each gets its thread's time and a share of what the process spent
	// off their threads (the test's other goroutines, the collector).
	if cpu1 < 300*time.Millisecond || cpu1 > 450*time.Millisecond {
		t.Errorf("run 1 spun 300 ms and was charged %v", cpu1)
	}
	if cpu2 < 100*time.Millisecond || cpu2 > 150*time.Millisecond {
		t.Errorf("run 2 spun 100 ms and was charged %v", cpu2)
	}
}

var keptByRun [][]byte

// The heap a run allocates is charged to it, not to a sibling computing
// beside it on the worker's CPU, and what stays live stays its.
func TestMeterChargesHeapToTheRunThatAllocates(t *testing.T) {
	pinToOneCPU(t)
	m := newTestMeter(t)
	cancel := func(error) {}
	m.add(1, 1024, time.Minute, cancel)
	m.add(2, 1024, time.Minute, cancel)
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		runPiece(m, 1, nil, func() {
			defer close(done)
			for range 64 * 16 {
				keptByRun = append(keptByRun, make([]byte, 64<<10))
				spinFor(100 * time.Microsecond)
			}
		})
	}()
	go func() {
		defer wg.Done()
		runPiece(m, 2, nil, func() {
			clk := clockOfThread(currentThread())
			for start := clk.read(); ; {
				select {
				case <-done:
					return
				default:
				}
				if clk.read()-start > 10*time.Second {
					return
				}
			}
		})
	}()
	wg.Wait()
	defer func() { keptByRun = nil }()
	one, two := m.ledger.estimate(1), m.ledger.estimate(2)
	t.Logf("allocated 64 MiB: run 1 charged %d MiB, run 2 %d MiB", one>>20, two>>20)
	if one < 56<<20 || two > 8<<20 {
		t.Fatalf("run 1 allocated 64 MiB and was charged %d MiB; run 2 allocated nothing and was charged %d MiB", one>>20, two>>20)
	}
	// A collection finds the 64 MiB live: they stay run 1's.
	runtime.GC()
	runPiece(m, 0, nil, func() {})
	if one := m.ledger.estimate(1); one < 56<<20 {
		t.Fatalf("after a collection run 1 holds %d MiB, want its 64", one>>20)
	}
}

// A piece that runs past the slice is a hog: its thread is named to the
// parent, the worker gets a processor more for as long as the run lives,
// and its later pieces run on that same thread.
func TestMeterMakesALongPieceAHog(t *testing.T) {
	m := newTestMeter(t)
	base := m.baseProcs
	var mu sync.Mutex
	var hogs []int
	m.onHog = func(run uint64, tid int) {
		mu.Lock()
		defer mu.Unlock()
		if run == 1 {
			hogs = append(hogs, tid)
		}
	}
	m.add(1, 128, time.Minute, func(error) {})
	ran := make(chan int, 2)
	go func() {
		p := m.enter(context.Background(), 1, nil)
		spinFor(3 * hogSlice)
		m.leave(p)
		ran <- currentThread()
		p = m.enter(context.Background(), 1, nil)
		if !p.hog {
			t.Error("the run's next piece was not a hog's")
		}
		m.leave(p)
		ran <- currentThread()
	}()
	first, second := <-ran, <-ran
	mu.Lock()
	named := append([]int(nil), hogs...)
	mu.Unlock()
	if len(named) != 1 || named[0] != first || second != first {
		t.Fatalf("hog threads named %v; the pieces ran on %d and %d", named, first, second)
	}
	waitProcs(t, base+1)
	m.remove(1)
	waitProcs(t, base)
}

func waitProcs(t *testing.T, want int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); runtime.GOMAXPROCS(0) != want; {
		if time.Now().After(deadline) {
			t.Fatalf("GOMAXPROCS %d, want %d", runtime.GOMAXPROCS(0), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// Time the worker's CPU serves another process while a piece is in flight
// is given back to the piece's clock: with a busy process beside it on the
// same CPU, about half of the piece's wall time; in every case what the
// wall time leaves of the process's own CPU time (other test processes
// may share the CPU too).
func TestMeterGivesBackTimeTheCPUServedOthers(t *testing.T) {
	cpu := pinToOneCPU(t)
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Skip("no shell:", err)
	}
	defer func() { _ = busy.Process.Kill(); _ = busy.Wait() }()
	var one unix.CPUSet
	one.Set(cpu)
	if err := unix.SchedSetaffinity(busy.Process.Pid, &one); err != nil {
		t.Fatal(err)
	}
	m := newTestMeter(t)
	m.add(1, 128, time.Minute, func(error) {})
	// spin runs one piece for d of wall time and returns what its clock
	// was given back and what the wall time left of the process's CPU.
	spin := func(d time.Duration) (credited, others time.Duration) {
		clock := &testClock{left: time.Minute}
		cpu0, start := processCPU(), time.Now()
		runPiece(m, 1, clock, func() {
			for time.Since(start) < d {
			}
		})
		wall, cpu := time.Since(start), processCPU()-cpu0
		return time.Duration(clock.credited.Load()), wall - cpu
	}
	credited, others := spin(400 * time.Millisecond)
	t.Logf("beside a busy process: given back %v, the CPU served others %v", credited, others)
	if credited < 100*time.Millisecond || credited-others > 60*time.Millisecond || others-credited > 60*time.Millisecond {
		t.Fatalf("a piece sharing its CPU with a busy process for 400 ms got %v back; the CPU served others %v", credited, others)
	}
	_ = busy.Process.Kill()
	_ = busy.Wait()
	credited, others = spin(200 * time.Millisecond)
	t.Logf("without it: given back %v, the CPU served others %v", credited, others)
	if credited-others > 40*time.Millisecond || others-credited > 40*time.Millisecond {
		t.Fatalf("a piece without the busy process got %v back; the CPU served others %v", credited, others)
	}
}

// A built-in's reservation is refused when it would take its run past its
// limit, and the run is then cancelled with the memory text; asked for
// what fits, it charges nothing (the allocation will be charged when it
// comes), and garbage the run left does not count against it.
func TestMeterReserve(t *testing.T) {
	m := newTestMeter(t)
	var cause error
	m.add(1, 32, time.Minute, func(err error) { cause = err })
	for range 64 {
		// 1 MiB asked for 64 times: each fits, none is charged.
		if !m.reserve(1, 1<<20) {
			t.Fatal("1 MiB of a 32 MiB limit refused")
		}
	}
	// Garbage: 48 MiB allocated and dropped, charged to the run.
	runPiece(m, 1, nil, func() {
		for range 48 {
			keptByRun = append(keptByRun[:0], make([]byte, 1<<20))
		}
		keptByRun = nil
	})
	if !m.reserve(1, 20<<20) {
		t.Fatalf("20 MiB refused to a run holding nothing (estimate %d MiB)", m.ledger.estimate(1)>>20)
	}
	if m.overLimit(1) || cause != nil {
		t.Fatal("a run holding nothing was cancelled")
	}
	if m.reserve(1, 40<<20) {
		t.Fatal("40 MiB past a 32 MiB limit allowed")
	}
	var le *protocol.MemoryLimitError
	if !errors.As(cause, &le) || cause.Error() != protocol.NewMemoryLimitError(32).Error() || !m.overLimit(1) {
		t.Fatalf("cancelled with %v, want the memory text", cause)
	}
	if m.reserve(1, 1) {
		t.Fatal("a run cancelled for its memory reserved more")
	}
}

// A reservation whose confirmation does not come within reserveWait (a
// collection slowed by a loaded machine) lets the allocation go rather than
// give an honest run the memory text for garbage it may no longer hold, up
// to twice the run's limit; the confirmation, once it settles, still
// decides.
func TestMeterReserveLetsGoWhenNoConfirmationComes(t *testing.T) {
	m := newTestMeter(t)
	var cause error
	m.add(1, 32, time.Minute, func(err error) { cause = err })
	// 30 MiB charged by name: an estimate no collection has checked.
	m.charge(1, 30<<20)
	// A confirmation under way that never settles.
	m.mu.Lock()
	m.confirming = true
	m.mu.Unlock()
	start := time.Now()
	if !m.reserve(1, 20<<20) {
		t.Fatalf("20 MiB refused with no confirmation (estimate %d MiB): %v", m.ledger.estimate(1)>>20, cause)
	}
	if waited := time.Since(start); waited < reserveWait {
		t.Fatalf("the reservation let go after %v, before reserveWait", waited)
	}
	if m.overLimit(1) || cause != nil {
		t.Fatalf("a run past its estimate but unconfirmed was cancelled: %v", cause)
	}
	// The allocation came: 50 MiB estimated, still unconfirmed. 20 MiB
	// more would be past twice the limit: refused when the wait ends.
	m.charge(1, 20<<20)
	if m.reserve(1, 20<<20) {
		t.Fatal("a run let past twice its limit without a confirmation")
	}
	if cause == nil || cause.Error() != protocol.NewMemoryLimitError(32).Error() || !m.overLimit(1) {
		t.Fatalf("cancelled with %v, want the memory text", cause)
	}
}

// Hogs found one by one change GOMAXPROCS, which stops the world, only as
// their number doubles, and give processors back only once a quarter of the
// grant is left: 32 hogs cost 6 changes, not 32.
func TestHogProcessorsAreGrantedByDoubling(t *testing.T) {
	granted, changes := 0, 0
	var grants []int
	step := func(hogs int) {
		if n := hogProcsFor(hogs, granted); n != granted {
			granted = n
			changes++
			grants = append(grants, n)
		}
	}
	for h := 1; h <= 32; h++ {
		step(h)
	}
	if want := []int{1, 2, 4, 8, 16, 32}; !slices.Equal(grants, want) || granted != 32 {
		t.Fatalf("grants %v as 32 hogs came, want %v", grants, want)
	}
	grants = nil
	for h := 31; h >= 0; h-- {
		step(h)
	}
	if want := []int{16, 8, 4, 2, 0}; !slices.Equal(grants, want) {
		t.Fatalf("grants %v as the 32 hogs ended, want %v", grants, want)
	}
	if changes != 11 {
		t.Fatalf("%d changes, want 11", changes)
	}
	// A worker past maxHogProcs hogs is granted maxHogProcs, once.
	if n := hogProcsFor(1000, 0); n != maxHogProcs {
		t.Fatalf("1000 hogs are granted %d processors, want %d", n, maxHogProcs)
	}
	if n := hogProcsFor(999, maxHogProcs); n != maxHogProcs {
		t.Fatalf("a grant of %d moved to %d with 999 hogs", maxHogProcs, n)
	}
}

// Building a run's runtime is the run's cost but not its computing on: a
// piece entered to build one stays short however long it takes, and the
// run's next piece is not a hog's.
func TestBuildingARuntimeMakesNoHog(t *testing.T) {
	m := newTestMeter(t)
	named := make(chan int, 1)
	m.onHog = func(run uint64, tid int) { named <- tid }
	m.add(1, 128, time.Minute, func(error) {})
	done := make(chan bool)
	go func() {
		p := m.enterBuild(context.Background(), 1)
		spinFor(3 * hogSlice)
		m.leave(p)
		p = m.enter(context.Background(), 1, nil)
		hog := p.hog
		m.leave(p)
		done <- hog
	}()
	if <-done {
		t.Fatal("the run's piece after its runtime was built is a hog's")
	}
	select {
	case tid := <-named:
		t.Fatalf("thread %d was named a hog's for building a runtime", tid)
	default:
	}
	if cpu, _, _ := m.usage(1); cpu < 3*hogSlice {
		t.Fatalf("the run was billed %v for building its runtime, want at least %v", cpu, 3*hogSlice)
	}
}
