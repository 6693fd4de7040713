package local

import (
	"sync"
	"time"
)

// workerCPU counts the CPU a worker process burns, as the kernel counts
// it, for the tenant holding the worker when it is read. The worker
// reports what each of its runs used (usage.cpuMs), but code that escaped
// the sandbox controls what it reports; this count is the parent's own.
// It is read while the worker hosts runs (the monitor's poll), when a
// tenant claims it (what it burned as a spare is no tenant's), and when it
// has ended, from its reaped state, so that nothing since the last poll
// is lost.
type workerCPU struct {
	mu     sync.Mutex
	tenant string        // who the CPU from here on is charged to; "" while a spare
	seen   time.Duration // the CPU already charged
	ended  bool          // the final count is in
}

// pollCPU charges what the worker burned since it was last read, total
// in all as the monitor's poll read it.
func (w *worker) pollCPU(total time.Duration) {
	w.cpu.mu.Lock()
	defer w.cpu.mu.Unlock()
	if !w.cpu.ended {
		w.chargeCPU(total)
	}
}

// claimCPU charges what the worker burned so far to whoever held it, and
// what it burns from now on to tenant.
func (w *worker) claimCPU(tenant string) {
	w.cpu.mu.Lock()
	defer w.cpu.mu.Unlock()
	if !w.cpu.ended {
		if st, ok := w.p.stat.read(); ok {
			w.chargeCPU(st.cpu)
		}
	}
	w.cpu.tenant = tenant
}

// endCPU charges the rest of what a reaped worker burned, from the
// kernel's exact account of the process (wait4's rusage).
func (w *worker) endCPU() {
	w.cpu.mu.Lock()
	defer w.cpu.mu.Unlock()
	if w.cpu.ended {
		return
	}
	if ps := w.p.cmd.ProcessState; ps != nil {
		w.chargeCPU(ps.UserTime() + ps.SystemTime())
	}
	w.cpu.ended = true
}

// chargeCPU charges total less what was charged already. The count never
// goes back: a reading below it charges nothing. Call it with cpu.mu held.
func (w *worker) chargeCPU(total time.Duration) {
	if total <= w.cpu.seen {
		return
	}
	w.e.stats.burned(w.cpu.tenant, total-w.cpu.seen)
	w.cpu.seen = total
}
