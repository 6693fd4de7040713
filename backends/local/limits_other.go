//go:build !linux

package local

import (
	"os"
	"syscall"
)

// Outside Linux there is no /proc and RLIMIT_AS is not honoured the same
// way: the worker runs with its in-process watchdog and the sandbox's run
// clock only.

func setAddressLimit(extra uint64) uint64 { return 0 }
func readRSS(pid int) (uint64, bool)      { return 0, false }

func processGroupAttr(workerCred) *syscall.SysProcAttr { return nil }

type workerCred = struct{}

func workerCredential(string) (workerCred, error) { return workerCred{}, nil }
func workerPath(name string, _ workerCred) string { return name }

const confineSupported = false

func killGroup(pid int) {}

// claimStdout keeps the frame stream on stdout: descriptor juggling is
// Linux-only here.
func claimStdout() *os.File { return os.Stdout }

func lowerPriority(pid, nice int) {}
