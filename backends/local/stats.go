package local

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Stats counts what the pool has done since New, for metrics and tests.
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
	Cause  string // DeathCauses
	Count  int64
}

// DeathCauses are the causes WorkerDeaths counts: the parent killed the
// worker for its RSS or a memory cancel it ignored (rss), for a run stuck
// past its deadline (timeout), or for a frame it could not accept
// (protocol); its runtime ran out of its address space (rlimit); it exited
// or was killed by anything else (crashed); it did not start (start).
var DeathCauses = []string{"rss", "timeout", "protocol", "rlimit", "crashed", "start"}

// TenantCount is a count of one tenant's.
type TenantCount struct {
	Tenant string
	Count  int64
}

type stats struct {
	workersStarted, workersCrashed, timeoutKills, rssKills, outOfMemory, heapLimits atomic.Int64
	queueOverflows, queueTimeouts, handlesGranted, handlesExpired                   atomic.Int64

	mu     sync.Mutex
	deaths map[deathKey]int64 // guarded by mu
	lost   map[string]int64   // guarded by mu

	// invocationsWaiting is a gauge: callers of InvokeHandle waiting for
	// their turn at a retained execution.
	invocationsWaiting atomic.Int64
}

// Stats returns the pool's counters and gauges.
func (e *Executor) Stats() Stats {
	s := &e.stats
	out := Stats{
		WorkersStarted: s.workersStarted.Load(),
		WorkersCrashed: s.workersCrashed.Load(),
		TimeoutKills:   s.timeoutKills.Load(),
		RSSKills:       s.rssKills.Load(),
		OutOfMemory:    s.outOfMemory.Load(),
		HeapLimits:     s.heapLimits.Load(),
		QueueOverflows: s.queueOverflows.Load(),
		QueueTimeouts:  s.queueTimeouts.Load(),
		HandlesGranted: s.handlesGranted.Load(),
		HandlesExpired: s.handlesExpired.Load(),
	}
	out.WorkerDeaths, out.ExecutionsLost = s.byTenant()
	out.Invocations = int(e.stats.invocationsWaiting.Load())
	e.mu.Lock()
	defer e.mu.Unlock()
	out.WorkersAlive = len(e.pool.workers) + e.pool.starting
	out.Spares = len(e.pool.spares)
	out.Queued = e.pool.queued
	for w := range e.pool.workers {
		if w.runs > 0 {
			out.Busy++
		}
		out.Runs += w.runs
		out.Retained += w.retained
		out.Parked += int(w.parked.Load())
		out.MemoryBytes += w.rss.Load()
	}
	out.MaxWorkers = e.opts.MaxWorkers
	for name, t := range e.pool.tenants {
		if len(t.workers) > 0 || t.waiting.Len() > 0 {
			out.Tenants++
		}
		for _, w := range t.workers {
			if out.TenantWorkers == nil {
				out.TenantWorkers = map[string][]int{}
			}
			out.TenantWorkers[name] = append(out.TenantWorkers[name], w.p.pid)
		}
	}
	return out
}

type deathKey struct{ tenant, cause string }

// died counts a worker of tenant that died of cause.
func (s *stats) died(tenant, cause string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deaths == nil {
		s.deaths = map[deathKey]int64{}
	}
	s.deaths[deathKey{tenant, cause}]++
}

// lose counts n of tenant's executions failed with WORKER_CRASHED because
// their worker died or did not start.
func (s *stats) lose(tenant string, n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == nil {
		s.lost = map[string]int64{}
	}
	s.lost[tenant] += int64(n)
}

func (s *stats) byTenant() ([]WorkerDeaths, []TenantCount) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var deaths []WorkerDeaths
	for _, k := range slices.SortedFunc(maps.Keys(s.deaths), func(a, b deathKey) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), strings.Compare(a.cause, b.cause))
	}) {
		deaths = append(deaths, WorkerDeaths{Tenant: k.tenant, Cause: k.cause, Count: s.deaths[k]})
	}
	var lost []TenantCount
	for _, t := range slices.Sorted(maps.Keys(s.lost)) {
		lost = append(lost, TenantCount{Tenant: t, Count: s.lost[t]})
	}
	return deaths, lost
}
