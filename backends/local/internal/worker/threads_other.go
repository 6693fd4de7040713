//go:build !linux

package worker

import "time"

// Outside Linux no thread's CPU clock is readable from another thread: the
// meter sees no piece run, so it charges runs no CPU of their own and the
// heap they allocate to the worker; the process-wide bounds hold.

func currentThread() int { return 0 }

type threadClock int32

func clockOfThread(int) threadClock { return 0 }

func (threadClock) read() time.Duration { return 0 }

func processCPU() time.Duration { return 0 }
