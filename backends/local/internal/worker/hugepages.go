package worker

import "time"

// A run that allocates a large object writes it into memory the process
// never touched, or that the runtime gave back to the kernel, and each
// 4 KiB page of it costs a page fault. On a virtual machine whose faults
// are dear (about 6 µs each where this was measured) a string doubling
// itself to 256 MB spent 0.4 s faulting in one copy, and a collection
// that began meanwhile stopped every run of the worker until the copy
// ended. Backed by 2 MiB pages the same copy takes 128 faults.
//
// The worker asks for transparent huge pages over the Go heap's mappings
// (madvise MADV_HUGEPAGE) while its runs allocate large objects fast, and
// takes the advice back hugeHold after they stop: with the advice on,
// khugepaged may rebuild a whole huge page around one resident small page
// (max_ptes_none), refilling what the runtime gave back, and the parent
// watches the worker's RSS. Where the kernel backs all anonymous memory
// with huge pages already, or never does, the worker leaves it alone.

const (
	// hugeTrigger is the large-object bytes one accounting step must see
	// allocated to turn the advice on: about 4 GB/s at meterTick, which
	// only a copy of tens of megabytes reaches.
	hugeTrigger = 4 << 20
	// hugeHold is how long the advice stays on after the last such step.
	hugeHold = 2 * time.Second
	// hugeRescan is how much the runtime's mappings must grow while the
	// advice is on before they are listed again, to advise the new ones.
	hugeRescan = 2 << 20
)

// hugePages turns the advice on and off from the meter's steps; the meter's
// lock guards it.
type hugePages struct {
	// enabled: the kernel backs anonymous memory with huge pages where
	// asked to (its policy is madvise), and the advice is in use.
	enabled bool
	on      bool
	ranges  []memRange // what was advised
	mapped  uint64     // the runtime's mappings when ranges were listed
	large   uint64     // large-object bytes ever allocated, at the last step
	seen    int64      // when a step last saw hugeTrigger (MonoNow)
}

// memRange is one mapping, [start, end).
type memRange struct{ start, end uintptr }

// step acts on one accounting step's heap reading h, taken at now, and
// reports whether the advice is on.
func (hp *hugePages) step(now int64, h heapReading) bool {
	grew := h.large - min(hp.large, h.large)
	hp.large = h.large
	if hp.enabled && grew >= hugeTrigger {
		hp.seen = now
		if mapped := totalRuntimeMemory(); !hp.on || mapped >= hp.mapped+hugeRescan {
			hp.advise(mapped)
		}
	}
	return hp.on
}

// hold is how long the advice stays on from now: hugeHold after the last
// step that saw a large copy.
func (hp *hugePages) hold(now int64) time.Duration {
	return time.Duration(hp.seen + int64(hugeHold) - now)
}

// advise lists the heap's mappings and advises huge pages over them.
func (hp *hugePages) advise(mapped uint64) {
	ranges, err := heapMappings()
	if err != nil {
		// /proc unreadable: the worker goes on with small pages.
		hp.enabled = false
		return
	}
	hp.on, hp.mapped = true, mapped
	hp.ranges = ranges
	adviseHuge(ranges, true)
}

// off takes the advice back.
func (hp *hugePages) off() {
	if !hp.on {
		return
	}
	adviseHuge(hp.ranges, false)
	hp.on, hp.ranges = false, nil
}
