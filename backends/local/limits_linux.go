package local

import (
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

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

// lowerThread raises the nice value of thread tid of process pid to nice,
// when tid is one of pid's threads.
func lowerThread(pid, tid, nice int) {
	if tid <= 0 {
		return
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid)); err != nil {
		return
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
}

// pinProcess confines every thread of process pid to one CPU. Threads
// inherit the mask of the thread that starts them, so two passes catch one
// started during the first; it reports whether every thread it saw took
// it.
func pinProcess(pid, cpu int) bool {
	var set unix.CPUSet
	set.Set(cpu)
	ok := true
	for range 2 {
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			return false
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
				ok = false
			}
		}
	}
	return ok
}

// allowedCPUs are the CPUs this process may run on, in order.
func allowedCPUs() []int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return nil
	}
	var cpus []int
	for i := range 1024 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	return cpus
}
