package local

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// pageSize converts statm's page counts to bytes.
var pageSize = uint64(os.Getpagesize())

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

// readVmSize reads this process's address space size in bytes.
func readVmSize() (uint64, bool) { return readStatm("/proc/self/statm", 0) }

// readRSS reads a process's resident set size in bytes.
func readRSS(pid int) (uint64, bool) {
	return readStatm("/proc/"+strconv.Itoa(pid)+"/statm", 1)
}

// readStatm reads field i of a statm file, a count of pages, in bytes.
func readStatm(path string, i int) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) <= i {
		return 0, false
	}
	n, err := strconv.ParseUint(string(f[i]), 10, 64)
	if err != nil {
		return 0, false
	}
	return n * pageSize, true
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
