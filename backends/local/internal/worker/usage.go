package worker

import (
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is the CPU time the process has used, user and system, all
// threads. Only one run executes JavaScript at a time, so what it grows
// by while a run holds the gate is that run's, like the heap it allocates.
// It costs a system call (about a microsecond) per gate entry and exit.
func processCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
