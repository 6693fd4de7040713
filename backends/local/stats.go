package local

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/poolstats"
)

// Stats counts what the pool has done since New, for metrics and tests
// (poolstats.Stats, so that what reports it need not import this package).
type Stats = poolstats.Stats

// WorkerDeaths is how many of a tenant's worker processes died of one
// cause (poolstats.WorkerDeaths).
type WorkerDeaths = poolstats.WorkerDeaths

// TenantCount is a count of one tenant's (poolstats.TenantCount).
type TenantCount = poolstats.TenantCount

// TenantCPU is the CPU one tenant's worker processes burned
// (poolstats.TenantCPU).
type TenantCPU = poolstats.TenantCPU

// DeathCauses are the causes WorkerDeaths counts: the parent killed the
// worker for its RSS or a memory cancel it ignored (rss), for a run stuck
// past its deadline (timeout), or for a frame it could not accept
// (protocol); its runtime ran out of its address space (rlimit); it exited
// or was killed by anything else (crashed); it did not start (start).
var DeathCauses = []string{"rss", "timeout", "protocol", "rlimit", "crashed", "start"}

type stats struct {
	workersStarted, workersCrashed, timeoutKills, rssKills, outOfMemory, heapLimits atomic.Int64
	queueOverflows, queueTimeouts, handlesGranted, handlesExpired                   atomic.Int64

	mu     sync.Mutex
	deaths map[deathKey]int64       // guarded by mu
	lost   map[string]int64         // guarded by mu
	cpu    map[string]time.Duration // guarded by mu

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
	out.WorkerDeaths, out.ExecutionsLost, out.WorkerCPU = s.byTenant()
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

// burned counts d of CPU tenant's worker processes burned.
func (s *stats) burned(tenant string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cpu == nil {
		s.cpu = map[string]time.Duration{}
	}
	s.cpu[tenant] += d
}

func (s *stats) byTenant() ([]WorkerDeaths, []TenantCount, []TenantCPU) {
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
	var cpu []TenantCPU
	for _, t := range slices.Sorted(maps.Keys(s.cpu)) {
		cpu = append(cpu, TenantCPU{Tenant: t, CPU: s.cpu[t]})
	}
	return deaths, lost, cpu
}
