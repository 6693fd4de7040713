package worker

import "testing"

const mb = 1 << 20

func TestLedgerOneRunIsExact(t *testing.T) {
	l := newMemLedger(10 * mb)
	l.add(1, 128*mb)
	l.charge(1, 300*mb) // churned 300 MB, of which 40 MB stay
	if got := l.estimate(1); got != 300*mb {
		t.Fatalf("estimate before a collection = %d MB", got/mb)
	}
	l.correct(50 * mb)
	if got := l.estimate(1); got != 40*mb {
		t.Fatalf("estimate after = %d MB, want 40", got/mb)
	}
}

func TestLedgerBombIsChargedToItsRun(t *testing.T) {
	l := newMemLedger(10 * mb)
	l.add(1, 128*mb) // holds 100 MB of its own, legitimately
	l.charge(1, 100*mb)
	l.correct(110 * mb)
	l.add(2, 128*mb) // a bomb: 200 MB, all of it live
	l.charge(2, 200*mb)
	l.correct(310 * mb)
	if a, b := l.estimate(1), l.estimate(2); a != 100*mb || b != 200*mb {
		t.Fatalf("estimates %d and %d MB, want 100 and 200", a/mb, b/mb)
	}
}

func TestLedgerGarbageDoesNotBlameAHolder(t *testing.T) {
	l := newMemLedger(10 * mb)
	l.add(1, 128*mb)
	l.charge(1, 100*mb)
	l.correct(110 * mb) // run 1 holds 100 MB
	l.add(2, 128*mb)
	l.charge(2, 500*mb) // run 2 churns 500 MB of garbage
	l.correct(112 * mb) // 2 MB of it live
	if a, b := l.estimate(1), l.estimate(2); a != 100*mb || b != 2*mb {
		t.Fatalf("estimates %d and %d MB, want 100 and 2", a/mb, b/mb)
	}
}

func TestLedgerEndedRunsAreFreedFirst(t *testing.T) {
	l := newMemLedger(10 * mb)
	l.add(1, 128*mb)
	l.charge(1, 60*mb)
	l.correct(70 * mb)
	l.add(2, 128*mb)
	l.charge(2, 30*mb)
	l.end(1)
	// Run 1's 60 MB are gone, and 5 MB of what it compiled stayed in a
	// cache; run 2's 30 MB are all live.
	l.correct(10*mb + 5*mb + 30*mb)
	if got := l.estimate(2); got != 30*mb {
		t.Fatalf("run 2 = %d MB, want 30", got/mb)
	}
	if l.base != 15*mb {
		t.Fatalf("base = %d MB, want 15 (the cache entry joins it)", l.base/mb)
	}
}

func TestLedgerUnknownGrowthIsTheWorkers(t *testing.T) {
	l := newMemLedger(10 * mb)
	l.add(1, 128*mb)
	l.charge(1, 4*mb)
	l.correct(20 * mb) // 6 MB more than anyone allocated in a slice
	if got := l.estimate(1); got != 4*mb {
		t.Fatalf("run 1 = %d MB, want 4", got/mb)
	}
	if l.base != 16*mb {
		t.Fatalf("base = %d MB, want 16", l.base/mb)
	}
}

func TestLedgerAdoptMovesAPreparedRuntime(t *testing.T) {
	l := newMemLedger(10 * mb)
	l.charge(0, 1*mb) // preparing a runtime, outside any run
	l.correct(11 * mb)
	l.add(7, 128*mb)
	l.adopt(7, 1*mb)
	if l.estimate(7) != 1*mb || l.base != 10*mb {
		t.Fatalf("run %d, base %d", l.estimate(7), l.base)
	}
	l.end(7)
	l.correct(10 * mb)
	if l.base != 10*mb || l.estimate(7) != 0 {
		t.Fatalf("after the run: base %d", l.base)
	}
}

func TestLedgerOldMemoryFreedInProportion(t *testing.T) {
	l := newMemLedger(0)
	l.add(1, 1000*mb)
	l.add(2, 1000*mb)
	l.charge(1, 300*mb)
	l.charge(2, 100*mb)
	l.correct(400 * mb)
	l.correct(200 * mb) // half of everything freed, nothing allocated since
	if a, b := l.estimate(1), l.estimate(2); a != 150*mb || b != 50*mb {
		t.Fatalf("estimates %d and %d MB, want 150 and 50", a/mb, b/mb)
	}
}

func TestGCPercentFollowsTheLiveHeap(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, 800}, {4 * mb, 800}, {16 * mb, 400}, {32 * mb, 200}, {64 * mb, 100}, {600 * mb, 100}} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MB) = %d, want %d", c.live/mb, got, c.want)
		}
	}
}
