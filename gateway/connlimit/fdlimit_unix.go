//go:build unix

package connlimit

import (
	"math"
	"syscall"
)

// descriptorLimit is the soft RLIMIT_NOFILE (the Go runtime raised it to
// the hard limit at start); 0 when it cannot be read or is too large to
// bound anything (unlimited among them).
func descriptorLimit() int {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur > math.MaxInt32 {
		return 0
	}
	return int(r.Cur)
}
