package worker

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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

// readVmSize reads this process's address space size in bytes: the first
// field of /proc/self/statm, a count of pages.
func readVmSize() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, false
	}
	pages, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * uint64(os.Getpagesize()), true
}

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

// closeInherited closes every descriptor the worker did not get on
// purpose: its pipes (0, 1, 2) and its run table (wire.TableFD) stay, and
// so do the Go runtime's own (its poller's, the cgroup files it reads its
// CPU quota from). The parent marks its descriptors close-on-exec before
// it starts a worker; this holds where something it inherited slipped
// through, so that code escaping the sandbox finds nothing of the
// gateway's to read or write.
func closeInherited() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 || fd == wire.TableFD {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory ReadDir read, closed since
		}
		if strings.HasPrefix(target, "anon_inode:") || strings.HasPrefix(target, "/sys/fs/cgroup/") {
			continue
		}
		syscall.Close(fd)
	}
}
