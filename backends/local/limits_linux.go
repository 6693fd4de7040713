package local

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what the parent reads of a worker in /proc/PID/stat, the
// kernel's own counts, which nothing the process does can lower: its
// resident set and the CPU time, user and system, it and its threads used.
type procStat struct {
	rss uint64 // bytes
	cpu time.Duration
}

// statFile is a worker's /proc/PID/stat held open for the worker's life,
// for the monitor's polls: a read at offset 0 is the kernel's count at that
// moment, one system call where opening the file each time took seven
// (open, the poller's two, fstat, two reads, close), a hundred times a
// second for every busy worker. The descriptor names the process, not its
// number: once the worker is reaped, a read fails instead of finding a
// process that reused the number.
type statFile struct {
	mu  sync.Mutex
	fd  int // -1: closed, or never opened
	buf [statMax]byte
}

// statMax is more than the longest /proc/PID/stat line: 52 fields of at
// most 20 digits, and a command name of at most 64 bytes.
const statMax = 2048

// openStat opens pid's stat file; reads of a statFile that could not be
// opened fail.
func openStat(pid int) *statFile {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		fd = -1
	}
	return &statFile{fd: fd}
}

// read is the worker's counts now.
func (s *statFile) read() (procStat, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return procStat{}, false
	}
	n, err := unix.Pread(s.fd, s.buf[:], 0)
	if err != nil || n <= 0 || n == len(s.buf) {
		return procStat{}, false
	}
	return parseStat(s.buf[:n])
}

// close gives the descriptor back; reads after it fail.
func (s *statFile) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// parseStat reads the fields procStat holds from a /proc/PID/stat line.
func parseStat(b []byte) (procStat, bool) {
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start past the last ')', at field 3. utime and stime
	// are fields 14 and 15, rss (in pages) field 24.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	field := func(n int) (uint64, error) { return strconv.ParseUint(string(f[n-3]), 10, 64) }
	if len(f) < 24-2 {
		return procStat{}, false
	}
	utime, err1 := field(14)
	stime, err2 := field(15)
	pages, err3 := field(24)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, false
	}
	return procStat{
		rss: pages * uint64(os.Getpagesize()),
		cpu: time.Duration(utime+stime) * time.Second / clockTicks,
	}, true
}

// clockTicks is the unit of /proc's CPU times per second, sysconf
// (_SC_CLK_TCK): USER_HZ, which Linux fixes at 100 on every architecture
// Go runs on, whatever the kernel's own tick.
const clockTicks = 100

// processGroupAttr starts a worker as the leader of a session of its own
// (and so of a process group of its own), as cred when it is not nil.
//
// The session matters to the scheduler: where the kernel groups CPU time
// by session (autogroup, the default of desktop and many server kernels
// outside a cpu cgroup), each group competes with the others as one, and
// the nice values of its threads count only inside it. In the gateway's
// session a worker's spinning runs would make the gateway's whole group
// heavy against every other session on the machine: with 8 spinners on 2
// CPUs, a client in another session waited up to seconds for the CPU to
// send its next message (measured on Linux 6.18 in e2e's step e; the same
// client in the gateway's session, or the workers in sessions of their
// own, waits milliseconds). In a session of its own a worker is one group
// among the machine's, which is what a worker is meant to be: its
// tenant's CPU slot.
func processGroupAttr(cred workerCred) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Credential: cred}
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
// led by pid, which threads it starts later inherit, and of the session
// group pid leads where the kernel groups by session: the threads' nice
// values count only inside that group. Where there is no such group the
// file is absent or ignored.
func lowerPriority(pid, nice int) {
	_ = syscall.Setpriority(syscall.PRIO_PGRP, pid, nice)
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/autogroup", []byte(strconv.Itoa(nice)), 0)
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

// closeOnExec marks every descriptor of this process from 3 up
// close-on-exec before a worker starts, so that the worker holds exactly
// what it is given. Go opens its own descriptors that way; those the
// gateway inherited (a pipe or /dev/null its supervisor left open) it
// does not, and every worker would hold them.
func closeOnExec() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11: one at a time.
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
