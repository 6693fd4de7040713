package local

import "sync/atomic"

// Stats counts what the pool has done since New, for metrics and tests.
type Stats struct {
	WorkersStarted int64 // worker processes that became ready
	WorkersCrashed int64 // executions failed with WORKER_CRASHED, and starts that failed
	TimeoutKills   int64 // workers killed for a run that held the CPU past its deadline or its cancel
	RSSKills       int64 // workers killed by the parent's RSS poll
	OutOfMemory    int64 // workers whose runtime died refusing an allocation (RLIMIT_AS)
	HeapLimits     int64 // runs and sessions the in-worker memory watchdog ended
	QueueOverflows int64 // executions refused at the queue bound
	QueueTimeouts  int64 // executions that waited the queue's bound and were refused
	HandlesGranted int64 // executions that retained their handles
	HandlesExpired int64 // retained executions closed at the idle bound

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

type stats struct {
	workersStarted, workersCrashed, timeoutKills, rssKills, outOfMemory, heapLimits atomic.Int64
	queueOverflows, queueTimeouts, handlesGranted, handlesExpired                   atomic.Int64

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
