package sandbox

import (
	"runtime"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// A join of a megabyte or more of primitives is built by the guard at its
// size; it gives goja's own string.
func TestLargeJoinsOfPrimitivesKeepGojasResults(t *testing.T) {
	const mb = "'x'.repeat(1 << 20)"
	sameAsGojaShifted(t, 0, []string{
		"[" + mb + ", " + mb + "].join('')",
		"[" + mb + ", 1.5, -0, null, undefined, true, false, 1e21, NaN, -Infinity, 'é'].join('|')",
		"[" + mb + ", 2].join('—')",
		"['é'.repeat(1 << 19), 'ü'.repeat(1 << 19), 3].join()",
		// A megabyte of many strings: 2^18 of four units (2^19 of two
		// took twice the time to build, on the same path).
		"Array(1 << 18).fill('abcd').join('')",
		"Array(1 << 16).fill(12345).join(',')",
	})
}

// An honest join, whose result and the string it repeats fit the run's
// limit together (80 and 40 of 128 MiB), completes: its reservation was
// twice its size, and the run got the memory text.
func TestAnHonestLargeJoinCompletes(t *testing.T) {
	j := job("async () => { const s = 'x'.repeat(40 << 20); return [s, s].join('').length }")
	j.TimeoutMs = 60000 // the race detector's build copies slowly
	res := runJob(t, j, &fakeHost{})
	if res.HasError || res.ResultJSON != "83886080" {
		t.Fatalf("%+v", res)
	}
}

// countingBudget grants what fits its limit, summing what it granted.
type countingBudget struct {
	fakeHost
	granted, limit int64
	refused        int
}

func (h *countingBudget) Reserve(n int64) bool {
	if h.granted+n > h.limit {
		h.refused++
		return false
	}
	h.granted += n
	return true
}

// A join whose result would pass the run's limit ends with the memory
// text before it writes anything: the run allocates the string it joins
// and little more, and the budget was asked for the join once.
func TestAJoinPastTheLimitEndsBeforeWriting(t *testing.T) {
	host := &countingBudget{limit: 128 << 20}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	j := job("async () => { const s = 'x'.repeat(64 << 20); return [s, s].join('').length }")
	j.TimeoutMs = 60000 // the race detector's build copies slowly
	res := runJob(t, j, host)
	runtime.ReadMemStats(&after)
	if want := protocol.NewMemoryLimitError(128).Error(); res.Error != want {
		t.Fatalf("%+v; want the memory text", res)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 64<<20+16<<20 {
		t.Fatalf("the run allocated %d MiB: more than the 64 MiB it joins", allocated>>20)
	}
	if host.granted != 64<<20 || host.refused != 1 {
		t.Fatalf("granted %d, refused %d times; want the 64 MiB string, then one refusal", host.granted, host.refused)
	}
}
