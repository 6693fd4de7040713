// Package poolstats holds the counters of a local backend's worker pool, so
// that what reports them (the metrics of a gateway and of an executor
// server) need not import the backend.
package poolstats

import "time"

// Stats counts what a local backend's worker pool has done since it
// started (local.Executor.Stats), for metrics and tests.
type Stats struct {
	WorkersStarted int64 // worker processes that became ready
	WorkersCrashed int64 // executions failed with WORKER_CRASHED, and starts that failed (deprecated: WorkerDeaths, ExecutionsLost)
	TimeoutKills   int64 // workers killed for a run that held the CPU past its deadline or its cancel
	RSSKills       int64 // workers killed by the parent's RSS poll
	OutOfMemory    int64 // workers whose runtime died refusing an allocation (RLIMIT_AS)
	HeapLimits     int64 // runs and sessions the in-worker memory watchdog ended
	QueueOverflows int64 // executions refused at the queue bound
	QueueTimeouts  int64 // executions that waited the queue's bound and were refused
	HandlesGranted int64 // executions that retained their handles
	HandlesExpired int64 // retained executions closed at the idle bound

	// WorkerDeaths counts worker processes that ended other than by the
	// pool's retiring them or the executor's closing, and starts that
	// failed, by tenant and cause; ExecutionsLost counts executions, by
	// tenant, that failed with WORKER_CRASHED because their worker died.
	// Both are sorted.
	WorkerDeaths   []WorkerDeaths
	ExecutionsLost []TenantCount
	// WorkerCPU is, by tenant, the CPU (user and system) its worker
	// processes burned, read by the parent from the kernel, not from what
	// the workers report: /proc while a worker hosts runs and when a
	// tenant claims it, the reaped process's exact account when it ends.
	// An idle worker's CPU shows at its next poll or its end. Tenant "" is
	// what spares burned before a tenant held them. Sorted.
	WorkerCPU []TenantCPU

	// Gauges, as they are at the moment of the call.
	WorkersAlive int    // worker processes alive or being started
	Spares       int    // warm worker processes no tenant holds yet
	Busy         int    // worker processes hosting at least one execution
	Runs         int    // executions on workers, retained ones included
	Parked       int    // executions waiting on their host (a tool call, an outbound request)
	Retained     int    // retained executions
	Invocations  int    // invocations of retained executions waiting for the one before them
	Queued       int    // executions waiting for room
	Tenants      int    // tenants holding a worker or waiting for one
	MemoryBytes  uint64 // resident memory of the worker processes, as last polled
	MaxWorkers   int    // the ceiling of worker processes
	// TenantWorkers are, per tenant holding any, the process ids of the
	// worker processes it holds: no pid is ever under two tenants.
	TenantWorkers map[string][]int
}

// WorkerDeaths is how many of a tenant's worker processes died of one
// cause. Tenant is "" for a spare no tenant held yet, and for a start that
// failed.
type WorkerDeaths struct {
	Tenant string
	Cause  string // local.DeathCauses
	Count  int64
}

// TenantCPU is the CPU one tenant's worker processes burned.
type TenantCPU struct {
	Tenant string
	CPU    time.Duration
}

// TenantCount is a count of one tenant's.
type TenantCount struct {
	Tenant string
	Count  int64
}
