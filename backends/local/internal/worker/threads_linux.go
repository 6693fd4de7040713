package worker

import (
	"time"

	"golang.org/x/sys/unix"
)

// currentThread is the calling thread's id.
func currentThread() int { return unix.Gettid() }

// threadClock is one thread's CPU clock, readable from any thread of the
// process: the kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), which is
// what pthread_getcpuclockid gives.
type threadClock int32

func clockOfThread(tid int) threadClock { return threadClock(int32(^uint32(tid)<<3 | 6)) }

// read is the thread's CPU time; 0 once the thread is gone.
func (c threadClock) read() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(int32(c), &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// processCPU is the CPU time the process has used, user and system, all
// threads. It costs a system call (well under a microsecond).
func processCPU() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
