package worker

import (
	"os"
	"runtime/debug"
	"syscall"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
)

// setAddressLimit sets RLIMIT_AS to the process's current address space
// plus extra bytes and returns the limit, or 0 when it could not be set.
// Measured from inside, after start: a limit set before exec makes the Go
// runtime fail unpredictably while it reserves its arenas.
func setAddressLimit(extra uint64) uint64 {
	vm, ok := readVmSize()
	if !ok {
		return 0
	}
	limit := vm + extra
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return 0
	}
	return limit
}

// threadAddressSpace is the address space each OS thread of this process
// reserves beyond the Go heap. A binary built with cgo starts its threads
// with pthread_create, which maps a stack of RLIMIT_STACK's size (8 MiB
// when it is unlimited) plus a guard page for each: a worker whose runs
// compute on, each holding a thread of its own (a hog), would otherwise
// meet RLIMIT_AS with a small heap, and the runtime dies of it. Without
// cgo the Go runtime allocates its threads' small stacks itself.
func threadAddressSpace() uint64 {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return 0
	}
	cgo := false
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" && s.Value == "1" {
			cgo = true
		}
	}
	if !cgo {
		return 0
	}
	const fallback = 8 << 20
	var rl syscall.Rlimit
	stack := uint64(fallback) // and RLIM_INFINITY reads as all ones
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err == nil && rl.Cur != ^uint64(0) && rl.Cur > 0 {
		stack = min(rl.Cur, 64<<20)
	}
	return stack + uint64(os.Getpagesize())
}

// readVmSize reads this process's address space size in bytes.
func readVmSize() (uint64, bool) { return wire.ReadStatm("/proc/self/statm", 0) }

// claimStdout moves the frame stream off file descriptor 1 and points 1 at
// stderr, so that nothing printing to stdout (a library, a stray debug
// line) can corrupt the frames.
func claimStdout() *os.File {
	fd, err := syscall.Dup(1)
	if err != nil {
		return os.Stdout
	}
	if err := syscall.Dup3(2, 1, 0); err != nil {
		syscall.Close(fd)
		return os.Stdout
	}
	return os.NewFile(uintptr(fd), "frames")
}
