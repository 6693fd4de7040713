package worker

import (
	"fmt"
	"os"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// A worker process runs guest code, so it gives up what it does not need
// before it takes its first job: the parent starts it as an unprivileged
// user when the gateway is root (workerCredential, in package local), and
// the worker itself makes its memory unreadable to other processes of that
// user, sets no_new_privs and loads a seccomp filter that allows only the
// system calls a worker makes (confineWorker).

// workerSyscalls are the system calls a worker makes once it serves jobs:
// the Go runtime's (memory, threads, signals, timers, the network poller),
// glibc's thread start, and reading files (time zones, certificates). Found
// by tracing the local backend's whole test suite (strace -f), then checked
// by running it under the filter.
var workerSyscalls = []string{
	// the most frequent first: the filter compares in this order
	"futex", "read", "write", "epoll_pwait", "nanosleep", "sched_yield", "getpid", "rt_sigreturn",
	// memory
	"brk", "mmap", "munmap", "mprotect", "madvise", "mremap", "mincore",
	// threads and scheduling
	"set_robust_list", "get_robust_list", "rseq", "set_tid_address", "gettid",
	"sched_getaffinity", "exit", "exit_group", "restart_syscall", "arch_prctl",
	// signals (tgkill is limited to this process below)
	"rt_sigaction", "rt_sigprocmask", "sigaltstack",
	// time
	"clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday",
	"timer_create", "timer_settime", "timer_delete", "setitimer", "getitimer",
	// descriptors it holds (pipes to the parent, the gate page, the poller)
	"readv", "writev", "pread64", "pwrite64", "close", "dup", "dup3", "fcntl",
	"lseek", "fstat", "ioctl", "epoll_create1", "epoll_ctl", "epoll_wait",
	"eventfd2", "poll", "ppoll", "pipe2",
	// reading files (openat is read-only below)
	"newfstatat", "statx", "access", "faccessat", "faccessat2", "readlinkat", "getdents64",
	"getcwd", "fstatfs",
	// identity and limits (prlimit64 read-only below)
	"getuid", "geteuid", "getgid", "getegid", "getppid", "getrandom", "uname", "sysinfo",
	"getrusage", "times", "prctl", "membarrier",
}

// socketSyscalls are what native fetch needs: outbound connections and
// name resolution, never a listening socket.
var socketSyscalls = []string{
	"socket", "connect", "getsockopt", "setsockopt", "getsockname", "getpeername",
	"sendto", "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown",
}

// openWriteFlags are the open flags that write or create; a worker opens
// files to read only.
const openWriteFlags = unix.O_WRONLY | unix.O_RDWR | unix.O_CREAT | unix.O_TRUNC | unix.O_APPEND

// confineWorker drops the worker's last privileges and loads its filter;
// sockets lets native fetch open outbound connections. Every call the
// filter does not allow fails with EPERM (clone3 with ENOSYS, so that
// glibc starts threads with clone, whose flags the filter can read).
func confineWorker(sockets bool) error {
	// Other processes of the worker's user (the other tenants' workers)
	// cannot read this one's memory through /proc.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}
	allow := append([]string(nil), workerSyscalls...)
	if sockets {
		allow = append(allow, socketSyscalls...)
	}
	pid := uint64(os.Getpid())
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionAllow, Names: allow},
			{Action: seccomp.ActionAllow, NamesWithCondtions: []seccomp.NameWithConditions{
				// Threads only: a new process (fork, vfork) is refused.
				{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: unix.CLONE_THREAD}}},
				// Signals to itself only: its threads (preemption), and
				// the runtime's own death by a signal.
				{Name: "tgkill", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: pid}}},
				{Name: "kill", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: pid}}},
				{Name: "openat", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.BitsNotSet, Value: openWriteFlags}}},
				// Reading its limits, never raising them.
				{Name: "prlimit64", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.Equal, Value: 0}}},
			}},
			{Action: seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)), Names: []string{"clone3"}},
		},
	}
	return seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy})
}
