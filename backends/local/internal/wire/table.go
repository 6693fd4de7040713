package wire

import "time"

// Slot is what a worker says of one run it hosts, in its slot of the run
// table it shares with the parent.
type Slot struct {
	// Run is the run the slot belongs to; 0: the slot is free.
	Run uint64
	// Active says a piece of the run's work is executing: compiling,
	// evaluating, a host answer, due timers, an invocation.
	Active bool
	// Deadline is the CLOCK_MONOTONIC instant (MonoNow) past which the
	// executing piece overran its bound; 0: it has none.
	Deadline int64
	// Bound is which bound Deadline enforces.
	Bound Bound
	// CPU is the processor time charged to the run so far, Clock what its
	// run clock spent, Heap the memory it is estimated to hold and Peak
	// the most it held: a run the parent must stop reports them.
	CPU   time.Duration
	Clock time.Duration
	Heap  int64
	Peak  int64
}

// Bound is which bound a slot's deadline enforces.
type Bound uint32

const (
	BoundTime   Bound = iota // the run clock: past it the run timed out
	BoundMemory              // the memory watchdog cancelled the run: it must stop now
)

// TableFD is the descriptor a worker finds its run table on: the first of
// exec.Cmd.ExtraFiles.
const TableFD = 3
