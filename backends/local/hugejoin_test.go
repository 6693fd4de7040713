package local

import "testing"

// A join whose result would pass the run's limit ends before it writes:
// the memory text for its run, every sibling's value, the same worker.
func TestAHugeJoinEndsOnlyItsRun(t *testing.T) {
	bombBesideSiblings(t, "async () => { const s = 'x'.repeat(64 << 20); return [s, s].join('').length }")
}
