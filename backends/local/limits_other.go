//go:build !linux

package local

import (
	"syscall"
	"time"
)

// Outside Linux there is no /proc and RLIMIT_AS is not honoured the same
// way: the worker runs with its in-process watchdog and the sandbox's run
// clock only.

// procStat: without /proc there is no RSS poll, and a worker's CPU is
// counted when it ends, from its reaped state.
type procStat struct {
	rss uint64
	cpu time.Duration
}

// statFile: without /proc, reads fail.
type statFile struct{}

func openStat(int) *statFile             { return &statFile{} }
func (*statFile) read() (procStat, bool) { return procStat{}, false }
func (*statFile) close()                 {}

func processGroupAttr(workerCred) *syscall.SysProcAttr { return nil }

type workerCred = struct{}

func workerCredential(string) (workerCred, error) { return workerCred{}, nil }
func workerPath(name string, _ workerCred) string { return name }

const confineSupported = false

func killGroup(pid int) {}

func lowerPriority(pid, nice int) {}

func lowerThread(pid, tid, nice int) {}

func pinProcess(pid, cpu int) bool { return false }

func allowedCPUs() []int { return nil }

func closeOnExec() {}
