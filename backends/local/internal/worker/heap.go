package worker

import (
	"runtime/metrics"
	"sync"
)

// heapReading is what the meter reads of the Go heap.
type heapReading struct {
	allocs       uint64 // bytes ever allocated
	cycles       uint64 // collections completed
	live         uint64 // bytes the last collection found live
	large        uint64 // bytes ever allocated in objects past the size classes
	largeObjects uint64 // how many such objects
	largeFreed   uint64 // bytes of such objects ever freed
}

// small is the bytes ever allocated in objects of the size classes.
func (h heapReading) small() uint64 { return h.allocs - h.large }

// liveSplit is the live heap the last collection found, as small objects
// and large ones: large objects not yet freed are live, unless the
// sweep has not reached them (exact after a forced collection, which
// sweeps everything before it returns).
func (h heapReading) liveSplit() (small, large uint64) {
	large = min(h.large-min(h.largeFreed, h.large), h.live)
	return h.live - large, large
}

// largestSince is a lower bound on the largest single allocation made
// between h0 and h: the mean size of the large objects allocated, which
// the largest of them reaches at least.
func (h0 heapReading) largestSince(h heapReading) uint64 {
	n := h.largeObjects - h0.largeObjects
	if n == 0 {
		return 0
	}
	return (h.large - h0.large) / n
}

var (
	heapMu      sync.Mutex
	heapSamples = []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/allocs-by-size:bytes"},
		{Name: "/gc/heap/frees:bytes"},
		{Name: "/gc/heap/frees-by-size:bytes"},
	}
)

// readHeap reads the heap. The runtime counts large objects in the last
// bucket of the allocations-by-size histogram and the others in one
// bucket per size class, whose exact size is the bucket's upper bound
// less one; the bytes in large objects are what the others leave of the
// total.
func readHeap() heapReading {
	heapMu.Lock()
	defer heapMu.Unlock()
	metrics.Read(heapSamples)
	h := heapReading{allocs: heapSamples[0].Value.Uint64(), cycles: heapSamples[1].Value.Uint64(), live: heapSamples[2].Value.Uint64()}
	var small uint64
	small, h.largeObjects = sizeClassBytes(heapSamples[3].Value.Float64Histogram())
	h.large = h.allocs - min(small, h.allocs)
	freed := heapSamples[4].Value.Uint64()
	freedSmall, _ := sizeClassBytes(heapSamples[5].Value.Float64Histogram())
	h.largeFreed = freed - min(freedSmall, freed)
	return h
}

// sizeClassBytes reads a by-size histogram: the bytes in objects of the
// size classes, and how many objects are past them (its last bucket).
func sizeClassBytes(bySize *metrics.Float64Histogram) (bytes, largeObjects uint64) {
	last := len(bySize.Counts) - 1
	for i, n := range bySize.Counts[:last] {
		bytes += n * (uint64(bySize.Buckets[i+1]) - 1)
	}
	return bytes, bySize.Counts[last]
}

// heapLive is the heap the last collection found live.
func heapLive() uint64 { return readHeap().live }

// totalRuntimeMemory is every byte the Go runtime has mapped for itself.
func totalRuntimeMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
