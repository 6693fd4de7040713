package wire

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Table is memory shared between the parent and one worker: a slot per run
// the worker hosts, in which the worker writes whether the run is executing
// and until when it may, and what it has used so far. The parent reads it
// on its monitor tick, to stop Go code past a deadline that goja's
// interrupt cannot reach, to tell which run a death is charged to, and to
// report the usage of runs a death ended. A write is a few atomic stores,
// so the worker pays nothing for it that it could notice; the parent's
// mapping outlives the worker, so it reads the table after a death too.
//
// Each slot is a seqlock: seq is odd while the worker writes, so a reader
// that sees seq change, or odd, reads again.
type Table struct {
	mem  []byte
	file *os.File // the worker's end, passed as an extra file
}

// slotWords is a slot's layout: one cache line.
type slotWords struct {
	seq      atomic.Uint64
	run      atomic.Uint64
	deadline atomic.Int64
	bound    atomic.Uint32
	active   atomic.Uint32
	cpu      atomic.Int64
	clock    atomic.Int64
	heap     atomic.Int64
	peak     atomic.Int64
}

const slotSize = int(unsafe.Sizeof(slotWords{}))

// NewTable makes a table of slots for a worker about to start (the
// parent's side).
func NewTable(slots int) (*Table, error) {
	if slots < 1 {
		return nil, errors.New("run table: no slots")
	}
	fd, err := unix.MemfdCreate("codemode-runs", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("run table: %w", err)
	}
	f := os.NewFile(uintptr(fd), "run-table")
	size := tableBytes(slots)
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("run table: %w", err)
	}
	// The worker holds the same file: sealed at its size, so that a worker
	// that escaped its sandbox cannot shrink it under the parent's mapping
	// (the parent's next read would fault and take the gateway down).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("run table: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("run table: %w", err)
	}
	return &Table{mem: mem, file: f}, nil
}

// tableBytes is the size of a table of n slots, in whole pages.
func tableBytes(n int) int {
	page := os.Getpagesize()
	return (n*slotSize + page - 1) / page * page
}

// OpenTable maps the table a worker was started with (the worker's side);
// nil when it has none.
func OpenTable() *Table {
	var st unix.Stat_t
	if unix.Fstat(TableFD, &st) != nil || st.Size < int64(slotSize) {
		return nil
	}
	mem, err := unix.Mmap(TableFD, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return &Table{mem: mem, file: os.NewFile(TableFD, "run-table")}
}

// Slots is how many slots the table has; 0 for a nil table.
func (t *Table) Slots() int {
	if t == nil || t.mem == nil {
		return 0
	}
	return len(t.mem) / slotSize
}

func (t *Table) words(i int) *slotWords {
	return (*slotWords)(unsafe.Pointer(&t.mem[i*slotSize]))
}

// Write stores s in slot i (the worker's side). Out of range, or on a nil
// table, it does nothing.
func (t *Table) Write(i int, s Slot) {
	if i < 0 || i >= t.Slots() {
		return
	}
	w := t.words(i)
	w.seq.Add(1)
	w.run.Store(s.Run)
	w.deadline.Store(s.Deadline)
	w.bound.Store(uint32(s.Bound))
	var active uint32
	if s.Active {
		active = 1
	}
	w.active.Store(active)
	w.cpu.Store(int64(s.CPU))
	w.clock.Store(int64(s.Clock))
	w.heap.Store(s.Heap)
	w.peak.Store(s.Peak)
	w.seq.Add(1)
}

// Read returns slot i as last written.
func (t *Table) Read(i int) Slot {
	if i < 0 || i >= t.Slots() {
		return Slot{}
	}
	w := t.words(i)
	load := func() Slot {
		return Slot{
			Run: w.run.Load(), Active: w.active.Load() == 1, Deadline: w.deadline.Load(), Bound: Bound(w.bound.Load()),
			CPU: time.Duration(w.cpu.Load()), Clock: time.Duration(w.clock.Load()), Heap: w.heap.Load(), Peak: w.peak.Load(),
		}
	}
	for range 100 {
		s1 := w.seq.Load()
		s := load()
		if s1%2 == 0 && w.seq.Load() == s1 {
			return s
		}
	}
	// A writer that stopped halfway (it died mid-write): what is there is
	// the best there is.
	return load()
}

// Each calls fn with every slot in use, in slot order.
func (t *Table) Each(fn func(Slot)) {
	for i := range t.Slots() {
		if s := t.Read(i); s.Run != 0 {
			fn(s)
		}
	}
}

// CloseFile drops the descriptor once the worker has its own copy.
func (t *Table) CloseFile() {
	if t != nil && t.file != nil {
		t.file.Close()
		t.file = nil
	}
}

// Release unmaps the table; the parent calls it once the worker is reaped.
func (t *Table) Release() {
	if t == nil {
		return
	}
	t.CloseFile()
	if t.mem != nil {
		_ = unix.Munmap(t.mem)
		t.mem = nil
	}
}

// ExtraFile is the descriptor to pass to the worker, nil when none.
func (t *Table) ExtraFile() *os.File {
	if t == nil {
		return nil
	}
	return t.file
}

// MonoNow is CLOCK_MONOTONIC in nanoseconds: the one clock the parent and
// its workers share. It is read through Go's own monotonic clock, which is
// CLOCK_MONOTONIC read in the vDSO, from an offset taken once: a system
// call a reading (unix.ClockGettime) cost a worker a dozen calls a run.
func MonoNow() int64 { return monoBase + int64(time.Since(monoStart)) }

// monoStart and monoBase are one instant on Go's clock and on
// CLOCK_MONOTONIC: the middle of the closest of a few pairs of readings
// around it (the first calls pay for page faults).
var monoStart, monoBase = monoOffset()

func monoOffset() (start time.Time, base int64) {
	gap := int64(-1)
	for range 8 {
		var before, after unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
		now := time.Now()
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
		if g := after.Nano() - before.Nano(); gap < 0 || g < gap {
			gap, start, base = g, now, before.Nano()+g/2
		}
	}
	return start, base
}
