package worker

import (
	"os"
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
