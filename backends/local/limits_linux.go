package local

import (
	"os"
	"strconv"
	"syscall"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
)

// readRSS reads a process's resident set size in bytes.
func readRSS(pid int) (uint64, bool) {
	return wire.ReadStatm("/proc/"+strconv.Itoa(pid)+"/statm", 1)
}

// processGroupAttr starts a worker in a process group of its own, as cred
// when it is not nil.
func processGroupAttr(cred workerCred) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Credential: cred}
}

// workerCred is the user a root gateway starts workers as.
type workerCred = *syscall.Credential

// workerPath is the program a worker starts from: this executable through
// /proc/self/exe when the worker changes user, since the user may not be
// allowed into the directories on the way to it (a test binary's build
// directory is the gateway user's alone).
func workerPath(name string, cred workerCred) string {
	if cred == nil {
		return name
	}
	if exe, err := os.Executable(); err == nil && exe == name {
		return "/proc/self/exe"
	}
	return name
}

// confineSupported: seccomp filters are Linux's.
const confineSupported = true

// killGroup sends SIGKILL to the process group led by pid.
func killGroup(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }

// lowerPriority raises the nice value of every thread of the process group
// led by pid; threads it starts later inherit it.
func lowerPriority(pid, nice int) {
	_ = syscall.Setpriority(syscall.PRIO_PGRP, pid, nice)
}
