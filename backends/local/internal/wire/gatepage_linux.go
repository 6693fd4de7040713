package wire

import (
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Page is one page of memory shared between the parent and one worker:
// the worker writes which run holds its CPU gate and until when that run
// may hold it, and the parent reads it on its monitor tick. A write is a
// few atomic stores, so the worker pays nothing per slice it could notice,
// and the parent can tell which run a worker was executing even after the
// worker died (its mapping outlives the process).
//
// The layout is a seqlock: seq is odd while the worker writes, so a reader
// that sees seq change, or odd, reads again.
type Page struct {
	mem  []byte
	file *os.File // the worker's end, passed as an extra file
}

// PageFD is the descriptor a worker finds its page on: the first of
// exec.Cmd.ExtraFiles.
const PageFD = 3

type gateWords struct {
	seq      atomic.Uint64
	holder   atomic.Uint64 // run id executing JavaScript; 0: none
	deadline atomic.Int64  // CLOCK_MONOTONIC ns past which the holder overran; 0: no bound
	bound    atomic.Uint32 // which bound the deadline is
}

// Bound is which bound a holder's deadline enforces.
type Bound uint32

const (
	BoundTime   Bound = iota // the run clock: past it the run timed out
	BoundMemory              // the memory watchdog cancelled the run: it must stop now
)

// NewPage makes a page for a worker about to start (the parent's side).
func NewPage() (*Page, error) {
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
	return &Page{mem: mem, file: f}, nil
}

// OpenPage maps the page a worker was started with (the worker's
// side); nil when it has none.
func OpenPage() *Page {
	f := os.NewFile(PageFD, "gate-page")
	if f == nil {
		return nil
	}
	mem, err := unix.Mmap(PageFD, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return &Page{mem: mem, file: f}
}

func (g *Page) words() *gateWords { return (*gateWords)(unsafe.Pointer(&g.mem[0])) }

// Set records that run holds the gate until deadline (0: no bound), and
// which bound that is.
func (g *Page) Set(run uint64, deadline int64, b Bound) {
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

// Entry is what the page says of the holder.
type Entry struct {
	Holder   uint64
	Deadline int64
	Bound    Bound
}

// Read returns the page as last written.
func (g *Page) Read() Entry {
	if g == nil {
		return Entry{}
	}
	w := g.words()
	load := func() Entry {
		return Entry{Holder: w.holder.Load(), Deadline: w.deadline.Load(), Bound: Bound(w.bound.Load())}
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

// CloseFile drops the descriptor once the worker has its own copy.
func (g *Page) CloseFile() {
	if g != nil && g.file != nil {
		g.file.Close()
		g.file = nil
	}
}

// Release unmaps the page; the parent calls it once the worker is reaped.
func (g *Page) Release() {
	if g == nil {
		return
	}
	g.CloseFile()
	if g.mem != nil {
		_ = unix.Munmap(g.mem)
		g.mem = nil
	}
}

// MonoNow is CLOCK_MONOTONIC in nanoseconds: the one clock the parent and
// its workers share.
func MonoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// ExtraFile is the descriptor to pass to the worker, nil when none.
func (g *Page) ExtraFile() *os.File {
	if g == nil {
		return nil
	}
	return g.file
}
