package worker

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hugePagesAdvisable reports whether the kernel's transparent huge page
// policy is madvise: with always the heap has them already, with never
// the advice does nothing.
func hugePagesAdvisable() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && bytes.Contains(b, []byte("[madvise]"))
}

// heapMappings lists the process's private anonymous read-write mappings
// of 2 MiB or more: in a Go program without cgo, the heap's arenas (and
// its goroutine stacks, which live there).
func heapMappings() ([]memRange, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []memRange
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if r, ok := parseAnonMapping(sc.Text()); ok && r.end-r.start >= 2<<20 {
			out = append(out, r)
		}
	}
	return out, sc.Err()
}

// parseAnonMapping reads one line of /proc/self/maps, "start-end perms
// offset dev inode [path]", and reports whether it is a private anonymous
// read-write mapping.
func parseAnonMapping(line string) (memRange, bool) {
	f := strings.Fields(line)
	if len(f) != 5 || f[1] != "rw-p" || f[4] != "0" {
		return memRange{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return memRange{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return memRange{}, false
	}
	return memRange{uintptr(start), uintptr(end)}, true
}

// adviseHuge advises huge pages over ranges (on), or takes the advice
// back. A range the runtime unmapped meanwhile fails with ENOMEM, which
// changes nothing.
func adviseHuge(ranges []memRange, on bool) {
	advice := unix.MADV_NOHUGEPAGE
	if on {
		advice = unix.MADV_HUGEPAGE
	}
	for _, r := range ranges {
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, r.start, r.end-r.start, uintptr(advice))
	}
}
