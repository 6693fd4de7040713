package local

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/webplatform"
	"github.com/supolka/codemode-gateway/protocol"
)

// Defaults of Options.
const (
	// DefaultRunsPerWorker is how many executions one worker process hosts
	// at once. A parked run costs a fraction of a megabyte there, so the
	// bound is the worker's memory more than this count.
	DefaultRunsPerWorker = 1024
	// DefaultWorkerMemoryMB is one worker process's memory across the runs
	// it hosts.
	DefaultWorkerMemoryMB = 1024
	// DefaultQueueBound is how many executions of one tenant may wait for
	// room.
	DefaultQueueBound = 64
	// DefaultQueueTimeout is how long an execution may wait for room.
	DefaultQueueTimeout = 10 * time.Second
	// DefaultWorkerIdleTimeout stops a tenant's worker process that had
	// nothing to run for this long.
	DefaultWorkerIdleTimeout = 30 * time.Second
	// DefaultMaxRunsPerWorker drains and replaces a worker after this many
	// runs, so that whatever a long-lived process accumulates (fragmented
	// heap, runtime caches) never builds up.
	DefaultMaxRunsPerWorker = 10000
	// DefaultStuckDrain is how long a worker whose run is stuck in Go code
	// past its deadline keeps serving its other runs before it is stopped.
	DefaultStuckDrain = 10 * time.Second
	// DefaultKillGrace is how long past a deadline the parent waits for
	// the worker's own report before it kills the worker.
	DefaultKillGrace = 500 * time.Millisecond
	// DefaultStartTimeout bounds a worker's start, ready frame included.
	DefaultStartTimeout = 10 * time.Second
	// DefaultAddressSpaceHeadroomMB is RLIMIT_AS's allowance above the
	// worker's address space at start plus its memory. The Go runtime
	// reserves its heap in 64 MiB arenas and maps GC metadata beside them,
	// so a worker legitimately near its memory needs a few arenas of
	// headroom; see docs/local-executor.md for the measurement.
	DefaultAddressSpaceHeadroomMB = 256
	// DefaultRSSHeadroomMB is the parent's RSS poll allowance above the
	// worker's RSS at start plus its memory.
	DefaultRSSHeadroomMB = 64
)

// DefaultMaxWorkers is the ceiling of worker processes for n CPUs.
func DefaultMaxWorkers(n int) int { return 4 * max(n, 1) }

// DefaultMinWorkers is the warm minimum for n CPUs under a ceiling.
func DefaultMinWorkers(n, maxWorkers int) int { return min(max(n, 1), maxWorkers) }

// DefaultCPUSlots is a tenant's share of worker processes for n CPUs under
// a ceiling: one per CPU but one, so that no tenant left at the default
// keeps every CPU busy (nor takes every worker process); at least one.
// Measured on 2 CPUs (docs/benchmarks.md): with a tenant at two, another
// tenant's trivial run waited up to 100 ms at p99 behind its CPU-bound
// flood; at one, under 12 ms.
func DefaultCPUSlots(n, maxWorkers int) int { return max(1, min(n-1, maxWorkers-1)) }

// monitorPoll is how often the parent reads a worker's RSS (with its CPU)
// and its gate page, while the worker hosts runs. Nothing signals either:
// the RSS is the kernel's count, read from /proc/PID/stat, and the page is
// memory the worker writes at every gate slice without waking anyone, so
// that a slice costs the parent nothing. Both bounds are for a worker that
// no longer answers, so they are polled rather than waited for.
const monitorPoll = 10 * time.Millisecond

// Host calls of one execution in the parent: at most maxOpenHostCalls run
// at once, at most maxHostBacklog more wait; a call past both is refused.
// The sandbox keeps far fewer in flight (sandbox.MaxHostCallsInFlight), so
// this is the parent's guard against a worker that breaks its own bound.
const (
	maxOpenHostCalls = 256
	maxHostBacklog   = protocol.MaxWaitingHostCalls
)

// Options configures an Executor. Every zero field takes its default.
type Options struct {
	// MaxWorkers is the ceiling of worker processes. Each hosts the
	// executions of one tenant and runs one of them at a time.
	// Default: DefaultMaxWorkers(runtime.NumCPU()).
	MaxWorkers int
	// PoolSize is the old name of MaxWorkers, read when MaxWorkers is
	// zero.
	//
	// Deprecated: use MaxWorkers.
	PoolSize int
	// MinWorkers is the warm minimum: worker processes kept started while
	// nothing runs, ready for whichever tenant comes first.
	// Default: DefaultMinWorkers.
	MinWorkers int
	// RunsPerWorker is how many executions one worker process hosts at
	// once, waiting and retained ones included. Default:
	// DefaultRunsPerWorker.
	RunsPerWorker int
	// WorkerMemoryMB is one worker process's memory across its executions:
	// its address-space limit, its GC target and the parent's RSS poll are
	// set from it, and a worker near it takes no new executions.
	// Default: DefaultWorkerMemoryMB, at least MemoryLimitMB.
	WorkerMemoryMB int
	// QueueBound is how many executions of one tenant may wait for room;
	// one more fails at once with QUEUE_OVERFLOW. Zero takes
	// DefaultQueueBound; a negative value allows no waiting at all.
	QueueBound int
	// QueueTimeout is how long an execution may wait for room before it
	// fails with QUEUE_OVERFLOW. Default: DefaultQueueTimeout.
	QueueTimeout time.Duration
	// WorkerIdleTimeout stops a tenant's worker that ran nothing for this
	// long. Default: DefaultWorkerIdleTimeout.
	WorkerIdleTimeout time.Duration
	// Shares gives each tenant's share of the pool (Policy.Tenant);
	// it is called on every placement, so it may change while the
	// executor runs. Nil gives every tenant the default share.
	Shares func(tenant string) Share
	// MemoryLimitMB is each run's memory limit. Default:
	// protocol.DefaultMemoryLimitMB.
	MemoryLimitMB int
	// DefaultTimeoutMs is the run bound of a request that sets none.
	// Default: protocol.DefaultTimeout; capped at MaxSupportedTimeout.
	DefaultTimeoutMs int64
	// CountHostWaits is the default of the request field of that name.
	CountHostWaits bool
	// HandlesIdleTimeout is the idle bound of retained executions: one
	// nobody invokes for that long is closed. Default:
	// protocol.DefaultHandlesIdleTimeout milliseconds.
	HandlesIdleTimeout time.Duration
	// MaxRunsPerWorker drains and replaces a worker after that many
	// executions. Default: DefaultMaxRunsPerWorker.
	MaxRunsPerWorker int
	// WorkerCommand is the program and arguments a worker runs. It must
	// call RunWorkerIfRequested first thing. Default: this executable.
	WorkerCommand []string
	// WorkerEnv is added to a worker's environment ("NAME=value"). A
	// worker inherits nothing else of the gateway's environment but TZ,
	// ZONEINFO, SSL_CERT_FILE, SSL_CERT_DIR, GODEBUG and GOMAXPROCS, so
	// that no secret there reaches the process that runs guest code.
	WorkerEnv []string
	// KillGrace: past a run's deadline, or past a cancellation, the parent
	// waits this long for the worker before killing it. Default:
	// DefaultKillGrace.
	KillGrace time.Duration
	// StuckDrain: a run still executing KillGrace past its deadline is in
	// Go code goja's interrupt cannot reach, and only stopping its worker
	// stops it. Its caller gets its bound's text at once; the worker takes
	// nothing new, and its other runs have this long to finish before the
	// process is stopped (sooner once none is left). Default:
	// DefaultStuckDrain.
	StuckDrain time.Duration
	// StartTimeout bounds a worker's start. Default: DefaultStartTimeout.
	StartTimeout time.Duration
	// AddressSpaceHeadroomMB is RLIMIT_AS's headroom, see
	// DefaultAddressSpaceHeadroomMB. Negative disables the rlimit.
	AddressSpaceHeadroomMB int
	// RSSHeadroomMB is the RSS poll's headroom, see DefaultRSSHeadroomMB.
	RSSHeadroomMB int
	// Logger receives worker crashes with their stderr. Default:
	// slog.Default().
	Logger *slog.Logger
	// Native configures fetch in the native mode (a request that left
	// outbound absent). The zero value allows it, under the default deny
	// list.
	Native NativeOptions
	// NativeOf, when set, gives each tenant's native settings (by
	// Policy.Tenant) in place of Native, asked on every run, for an
	// executor that serves several operators' groups (an executor server).
	// Native.Vetoed still vetoes every run: its worker processes have no
	// sockets.
	NativeOf func(tenant string) NativeOptions
	// WorkerUser is who worker processes run as when the gateway runs as
	// root: a user name or "uid:gid". Default "65534:65534" (nobody); a
	// user whose uid is 0 keeps them root. Ignored when the gateway is not
	// root: its workers run as its own user.
	WorkerUser string
	// NoSeccomp starts workers without their system-call filter, for a
	// kernel without seccomp. By default (on Linux) a worker sets
	// no_new_privs and allows only the system calls a worker makes: no
	// execve, no new process, no file written, and no socket unless native
	// fetch is allowed (Native.Vetoed false).
	NoSeccomp bool

	cred workerCred // WorkerUser resolved
}

// NativeOptions are the operator's settings for the native outbound mode,
// where the worker performs a program's requests itself. The zero value
// allows native fetch, denies loopback, private, link-local and reserved
// ranges (docs/security.md lists them), and takes the default bounds.
type NativeOptions struct {
	// Vetoed is the operator's veto of native mode: a run that asked the
	// executor to fetch for itself gets no network at all.
	Vetoed bool
	// Deny adds address ranges to the default deny list. Both are checked
	// against every address dialed, after DNS resolution, on every
	// redirect hop.
	Deny []netip.Prefix
	// Allow carves ranges out of the deny lists (an internal API programs
	// may reach, a test server on loopback). A Policy's NativeDeny binds
	// even inside it.
	Allow []netip.Prefix
	// MaxResponseBytes caps one response body after content decoding;
	// 0 takes the default, 8 MiB.
	MaxResponseBytes int64
	// MaxRedirects is how many redirects one request follows; 0 takes the
	// default, 20, and a negative value follows none.
	MaxRedirects int
	// RequestTimeout bounds one request, headers and body; 0 takes the
	// default, 30 s. The run's own bound still applies above it.
	RequestTimeout time.Duration
}

// nativeFor is the native settings of tenant's runs.
func (o *Options) nativeFor(tenant string) NativeOptions {
	if o.NativeOf == nil {
		return o.Native
	}
	n := o.NativeOf(tenant)
	n.Vetoed = n.Vetoed || o.Native.Vetoed
	return n
}

// forJob is o as a job carries it into the worker, with a request's own
// denied ranges added. Those bind even inside the allow list, which carves
// exceptions out of the operator's deny list, never out of the request's.
func (o NativeOptions) forJob(deny []netip.Prefix) webplatform.NativeOptions {
	return webplatform.NativeOptions{
		Vetoed:           o.Vetoed,
		Deny:             o.Deny,
		DenyAlways:       deny,
		Allow:            o.Allow,
		MaxResponseBytes: o.MaxResponseBytes,
		MaxRedirects:     o.MaxRedirects,
		RequestTimeout:   o.RequestTimeout,
	}
}

// Share is one tenant's share of a pool.
type Share struct {
	// Weight orders the tenants waiting for a worker process: the one that
	// used the least run-clock time per weight lately goes first. Default 1.
	Weight float64
	// CPUSlots is how many worker processes the tenant may hold, so how
	// many of its executions may run JavaScript at the same moment; at
	// most MaxWorkers. Zero takes DefaultCPUSlots, and then while no other
	// tenant holds a worker or waits for one the tenant may borrow more, up
	// to one per CPU (never the whole group), at a lower priority.
	CPUSlots int
}

// withDefaults validates o and fills every zero field.
func (o Options) withDefaults() (Options, error) {
	if o.MaxWorkers < 0 || o.PoolSize < 0 || o.MinWorkers < 0 || o.RunsPerWorker < 0 || o.WorkerMemoryMB < 0 ||
		o.QueueTimeout < 0 || o.WorkerIdleTimeout < 0 || o.MemoryLimitMB < 0 || o.DefaultTimeoutMs < 0 ||
		o.MaxRunsPerWorker < 0 || o.KillGrace < 0 || o.StuckDrain < 0 || o.StartTimeout < 0 || o.HandlesIdleTimeout < 0 || o.RSSHeadroomMB < 0 {
		return o, errors.New("local: negative option")
	}
	n := runtime.NumCPU()
	o.MaxWorkers = cmp.Or(o.MaxWorkers, o.PoolSize, DefaultMaxWorkers(n))
	o.PoolSize = o.MaxWorkers
	o.MinWorkers = cmp.Or(o.MinWorkers, DefaultMinWorkers(n, o.MaxWorkers))
	if o.MinWorkers > o.MaxWorkers {
		return o, fmt.Errorf("local: MinWorkers %d is above MaxWorkers %d", o.MinWorkers, o.MaxWorkers)
	}
	o.RunsPerWorker = cmp.Or(o.RunsPerWorker, DefaultRunsPerWorker)
	o.MemoryLimitMB = cmp.Or(o.MemoryLimitMB, protocol.DefaultMemoryLimitMB)
	o.WorkerMemoryMB = cmp.Or(o.WorkerMemoryMB, max(DefaultWorkerMemoryMB, o.MemoryLimitMB))
	if o.WorkerMemoryMB < o.MemoryLimitMB {
		return o, fmt.Errorf("local: WorkerMemoryMB %d is below MemoryLimitMB %d: a worker could not hold one execution at its limit", o.WorkerMemoryMB, o.MemoryLimitMB)
	}
	if o.QueueBound < 0 {
		o.QueueBound = 0
	} else {
		o.QueueBound = cmp.Or(o.QueueBound, DefaultQueueBound)
	}
	o.QueueTimeout = cmp.Or(o.QueueTimeout, DefaultQueueTimeout)
	o.WorkerIdleTimeout = cmp.Or(o.WorkerIdleTimeout, DefaultWorkerIdleTimeout)
	o.DefaultTimeoutMs = cmp.Or(o.DefaultTimeoutMs, protocol.DefaultTimeout)
	o.DefaultTimeoutMs = min(o.DefaultTimeoutMs, protocol.MaxSupportedTimeout)
	o.HandlesIdleTimeout = cmp.Or(o.HandlesIdleTimeout, protocol.DefaultHandlesIdleTimeout*time.Millisecond)
	o.MaxRunsPerWorker = cmp.Or(o.MaxRunsPerWorker, DefaultMaxRunsPerWorker)
	if len(o.WorkerCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("local: find this executable for the worker command: %w", err)
		}
		o.WorkerCommand = []string{exe}
	}
	o.WorkerCommand = append([]string(nil), o.WorkerCommand...)
	cred, err := workerCredential(o.WorkerUser)
	if err != nil {
		return o, err
	}
	o.cred = cred
	o.WorkerEnv = append([]string(nil), o.WorkerEnv...)
	o.KillGrace = cmp.Or(o.KillGrace, DefaultKillGrace)
	o.StuckDrain = cmp.Or(o.StuckDrain, DefaultStuckDrain)
	o.StartTimeout = cmp.Or(o.StartTimeout, DefaultStartTimeout)
	if o.AddressSpaceHeadroomMB < 0 {
		o.AddressSpaceHeadroomMB = 0
	} else {
		o.AddressSpaceHeadroomMB = cmp.Or(o.AddressSpaceHeadroomMB, DefaultAddressSpaceHeadroomMB)
	}
	o.RSSHeadroomMB = cmp.Or(o.RSSHeadroomMB, DefaultRSSHeadroomMB)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// tenantShare is a tenant's share with defaults filled in and held to the
// pool: its weight, the worker processes it holds at full priority
// (slots), and how many it may hold in all, borrowing the rest while
// nobody else waits (borrow).
type tenantShare struct {
	weight        float64
	slots, borrow int
}

// shareOf is tenant's share. A tenant left at the default CPU slots may
// borrow up to one worker process per CPU (never the whole group) while it
// is the group's only tenant; one whose share names its slots holds that
// many and no more.
func (o *Options) shareOf(tenant string) tenantShare {
	var s Share
	if o.Shares != nil {
		s = o.Shares(tenant)
	}
	out := tenantShare{weight: s.Weight, slots: s.CPUSlots}
	if out.weight <= 0 || math.IsNaN(out.weight) || math.IsInf(out.weight, 0) {
		out.weight = 1
	}
	if out.slots <= 0 {
		n := runtime.NumCPU()
		out.slots = DefaultCPUSlots(n, o.MaxWorkers)
		out.borrow = max(out.slots, min(n, o.MaxWorkers-1))
	}
	out.slots = min(out.slots, o.MaxWorkers)
	out.borrow = max(out.borrow, out.slots)
	return out
}
