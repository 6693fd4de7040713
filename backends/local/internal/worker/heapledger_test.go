package worker

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The ledger's total and its list of runs past their limit are kept as the
// estimates change, not computed by visiting every run: after any mix of
// charges, adoptions, ends and corrections they are what visiting every
// run finds.
func TestHeapLedgerKeepsItsTotalAndOversAsTheyChange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := newHeapLedger(10 * mb)
	live := map[uint64]bool{}
	next := uint64(1)
	for step := range 5000 {
		switch op := rng.IntN(10); {
		case op == 0 || len(live) == 0:
			l.add(next, int64(1+rng.IntN(64))*mb)
			live[next] = true
			next++
		case op <= 5:
			l.charge(pick(rng, live), rng.Int64N(8*mb), rng.Int64N(16*mb))
		case op == 6:
			l.adopt(pick(rng, live), rng.Int64N(2*mb))
		case op == 7:
			run := pick(rng, live)
			l.end(run)
			delete(live, run)
		default:
			total := l.total()
			l.correct(rng.Int64N(total/2+1), rng.Int64N(total/2+1))
		}
		var small, large int64 = l.small.base + l.small.baseYoung + l.small.dying, l.large.base + l.large.baseYoung + l.large.dying
		var over []uint64
		for run, limit := range l.limits {
			small += l.small.estimate(run)
			large += l.large.estimate(run)
			if l.estimate(run) > limit {
				over = append(over, run)
			}
		}
		if l.small.total() != small || l.large.total() != large {
			t.Fatalf("step %d: totals %d and %d, visiting every run finds %d and %d", step, l.small.total(), l.large.total(), small, large)
		}
		got := l.over()
		slices.Sort(got)
		slices.Sort(over)
		if !slices.Equal(got, over) {
			t.Fatalf("step %d: over %v, visiting every run finds %v", step, got, over)
		}
	}
}

// pick is one of the runs in live, chosen by rng.
func pick(rng *rand.Rand, live map[uint64]bool) uint64 {
	runs := make([]uint64, 0, len(live))
	for run := range live {
		runs = append(runs, run)
	}
	slices.Sort(runs)
	return runs[rng.IntN(len(runs))]
}
