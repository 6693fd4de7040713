//go:build !linux

package worker

import "os"

// Outside Linux there is no /proc and RLIMIT_AS is not honoured the same
// way: the worker runs with its in-process watchdog and the sandbox's run
// clock only.

func setAddressLimit(extra uint64) uint64 { return 0 }

// claimStdout keeps the frame stream on stdout: descriptor juggling is
// Linux-only here.
func claimStdout() *os.File { return os.Stdout }

func closeInherited() {}
