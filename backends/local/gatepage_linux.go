package local

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// gatePage is one page of memory shared between the parent and one worker:
// the worker writes which run holds its CPU gate and until when that run
// may hold it, and the parent reads it on its monitor tick. A write is a
// few atomic stores, so the worker pays nothing per slice it could notice,
// and the parent can tell which run a worker was executing even after the
// worker died (its mapping outlives the process).
//
// The layout is a seqlock: seq is odd while the worker writes, so a reader
// that sees seq change, or odd, reads again.
type gatePage struct {
	mem  []byte
	file *os.File // the worker's end, passed as an extra file
}

// gatePageFD is the descriptor a worker finds its page on: the first of
// exec.Cmd.ExtraFiles.
const gatePageFD = 3

type gateWords struct {
	seq      atomic.Uint64
	holder   atomic.Uint64 // run id executing JavaScript; 0: none
	deadline atomic.Int64  // CLOCK_MONOTONIC ns past which the holder overran; 0: no bound
	bound    atomic.Uint32 // which bound the deadline is
}

// gateBound is which bound a holder's deadline enforces.
type gateBound uint32

const (
	boundTime   gateBound = iota // the run clock: past it the run timed out
	boundMemory                  // the memory watchdog cancelled the run: it must stop now
)

// newGatePage makes a page for a worker about to start (the parent's side).
func newGatePage() (*gatePage, error) {
	fd, err := unix.MemfdCreate("codemode-gate", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("gate page: %w", err)
	}
	f := os.NewFile(uintptr(fd), "gate-page")
	if err := f.Truncate(int64(os.Getpagesize())); err != nil {
		f.Close()
		return nil, fmt.Errorf("gate page: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gate page: %w", err)
	}
	return &gatePage{mem: mem, file: f}, nil
}

// openGatePage maps the page a worker was started with (the worker's
// side); nil when it has none.
func openGatePage() *gatePage {
	f := os.NewFile(gatePageFD, "gate-page")
	if f == nil {
		return nil
	}
	mem, err := unix.Mmap(gatePageFD, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return &gatePage{mem: mem, file: f}
}

func (g *gatePage) words() *gateWords { return (*gateWords)(unsafe.Pointer(&g.mem[0])) }

// set records that run holds the gate until deadline (0: no bound), and
// which bound that is.
func (g *gatePage) set(run uint64, deadline int64, b gateBound) {
	if g == nil {
		return
	}
	w := g.words()
	w.seq.Add(1)
	w.holder.Store(run)
	w.deadline.Store(deadline)
	w.bound.Store(uint32(b))
	w.seq.Add(1)
}

// gateEntry is what the page says of the holder.
type gateEntry struct {
	holder   uint64
	deadline int64
	bound    gateBound
}

// read returns the page as last written.
func (g *gatePage) read() gateEntry {
	if g == nil {
		return gateEntry{}
	}
	w := g.words()
	load := func() gateEntry {
		return gateEntry{holder: w.holder.Load(), deadline: w.deadline.Load(), bound: gateBound(w.bound.Load())}
	}
	for range 100 {
		s1 := w.seq.Load()
		e := load()
		if s1%2 == 0 && w.seq.Load() == s1 {
			return e
		}
	}
	// A writer that stopped halfway (it died mid-write): what is there is
	// the best there is.
	return load()
}

// closeFile drops the descriptor once the worker has its own copy.
func (g *gatePage) closeFile() {
	if g != nil && g.file != nil {
		g.file.Close()
		g.file = nil
	}
}

// release unmaps the page; the parent calls it once the worker is reaped.
func (g *gatePage) release() {
	if g == nil {
		return
	}
	g.closeFile()
	if g.mem != nil {
		_ = unix.Munmap(g.mem)
		g.mem = nil
	}
}

// monoNow is CLOCK_MONOTONIC in nanoseconds: the one clock the parent and
// its workers share.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// extraFile is the descriptor to pass to the worker, nil when none.
func (g *gatePage) extraFile() *os.File {
	if g == nil {
		return nil
	}
	return g.file
}
