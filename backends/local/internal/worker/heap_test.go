package worker

import (
	"runtime"
	"testing"
)

var keptForHeapTest [][]byte

// readHeap tells the bytes in large objects from the rest: many small
// allocations move the total and not the large bytes, and one large
// allocation is seen as at least its size.
func TestReadHeapSeesLargeAllocations(t *testing.T) {
	keptForHeapTest = make([][]byte, 0, 20001)
	h0 := readHeap()
	for range 20000 {
		keptForHeapTest = append(keptForHeapTest, make([]byte, 64))
	}
	h1 := readHeap()
	// The runtime counts small objects as their span leaves the P's
	// cache, so the last span's are not in yet.
	if got := h1.allocs - h0.allocs; got < 20000*64-32<<10 {
		t.Fatalf("20000 small allocations moved the total by %d bytes", got)
	}
	if got := h1.large - h0.large; got > 1<<20 {
		t.Fatalf("small allocations were counted as %d bytes of large objects", got)
	}
	keptForHeapTest = append(keptForHeapTest, make([]byte, 10<<20))
	h2 := readHeap()
	if got := h1.largestSince(h2); got < 10<<20 {
		t.Fatalf("one allocation of 10 MiB: the largest since is at least %d bytes", got)
	}
	if got := h2.largestSince(h2); got != 0 {
		t.Fatalf("nothing allocated: the largest since is %d bytes", got)
	}
	keptForHeapTest = nil
	runtime.GC()
}
