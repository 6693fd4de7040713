package config

import (
	"fmt"
	"math"
)

// capacity refuses local groups whose sizes contradict each other, and
// tenant caps that a tenant's local group could never honour: each problem
// at its line, saying why. It reads every size with the local backend's
// defaults filled in, so a cap is held against what the group will run
// with, not only against what the file says.
func (v *validator) capacity(c *Config) {
	groups := map[string]LocalSettings{} // local groups whose own keys are sane
	for i := range c.Backends {
		b := &c.Backends[i]
		if b.Type != "local" || b.Local == nil || negativeSize(b.Local) {
			continue
		}
		s := b.Local.Settings(v.numCPU)
		v.localGroup(fmt.Sprintf("backends[%d].local", i), b.Local, s)
		groups[b.Name] = s
	}
	sharing := map[string]int{}
	for _, t := range c.Tenants {
		sharing[t.Backend]++
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		if s, ok := groups[t.Backend]; ok {
			v.tenantOnLocal(i, t, s, sharing[t.Backend]-1)
		}
	}
}

func negativeSize(l *LocalBackend) bool {
	return l.MinWorkers < 0 || l.MaxWorkers < 0 || l.PoolSize < 0 || l.RunsPerWorker < 0 ||
		l.WorkerMemoryMB < 0 || l.MemoryMB < 0
}

func (v *validator) localGroup(path string, l *LocalBackend, s LocalSettings) {
	if s.MinWorkers > s.MaxWorkers {
		v.add(path+".minWorkers", "%d is more than %s: the group could never keep that many worker processes started", s.MinWorkers, maxWorkersText(l, s))
	}
	// Left out, workerMemoryMB is at least memoryMB: only a value set too
	// low can fall below it.
	if s.WorkerMemoryMB < s.MemoryMB {
		v.add(path+".workerMemoryMB", "%d MB is below %s: a worker process could not hold one execution at its memory limit", s.WorkerMemoryMB, sizeText("memoryMB", l.MemoryMB, s.MemoryMB, " MB"))
	}
}

// tenantOnLocal holds tenant t's caps against its local group, which
// others other tenants share.
func (v *validator) tenantOnLocal(i int, t *Tenant, s LocalSettings, others int) {
	path := fmt.Sprintf("tenants[%d].policy", i)
	p := t.Policy
	slots, slotsText := p.CPUSlots, fmt.Sprint(p.CPUSlots)
	if slots == 0 {
		slots, slotsText = s.CPUSlots, fmt.Sprintf("the default of %d", s.CPUSlots)
	}
	slotsOK := false
	switch {
	case p.CPUSlots > s.MaxWorkers:
		v.add(path+".cpuSlots", "%d is more worker processes than backend %q may ever start (maxWorkers %d)", p.CPUSlots, t.Backend, s.MaxWorkers)
	case others > 0 && slots >= s.MaxWorkers:
		fix := fmt.Sprintf("at most %d", s.MaxWorkers-1)
		if s.MaxWorkers < 2 {
			fix = "a shared group needs maxWorkers of at least 2"
		}
		v.add(path+".cpuSlots", "%s would let it take every worker process of backend %q, which %s; %s",
			slotsText, t.Backend, plural(others, "other tenant shares", "other tenants share"), fix)
	default:
		slotsOK = p.CPUSlots >= 0
	}
	if m := p.MemoryMB; m >= 16 {
		switch {
		case m > s.WorkerMemoryMB:
			v.add(path+".memoryMB", "%d MB is more than one worker process of backend %q may hold (workerMemoryMB %d MB)", m, t.Backend, s.WorkerMemoryMB)
		case m > s.MemoryMB:
			v.add(path+".memoryMB", "%d MB is above backend %q's limit of %d MB; a tenant can only lower it", m, t.Backend, s.MemoryMB)
		}
	}
	if !slotsOK {
		return // the cap below depends on a cpuSlots that is already wrong
	}
	hold := mulSat(slots, s.RunsPerWorker)
	for _, f := range []struct {
		key string
		n   int
	}{{"maxConcurrent", p.MaxConcurrent}, {"maxHandles", p.MaxHandles}} {
		if f.n <= hold {
			continue
		}
		value := fmt.Sprint(f.n)
		if v.inherited[i][f.key] {
			value = fmt.Sprintf("%d (limits.%s)", f.n, f.key)
		}
		v.add(path+"."+f.key, "%s is more than its %s can hold at runsPerWorker %d each (%d); lower it, or raise cpuSlots or backend %q's runsPerWorker",
			value, plural(slots, "worker process", "worker processes"), s.RunsPerWorker, hold, t.Backend)
	}
}

// maxWorkersText names the group's ceiling of worker processes and where
// it came from.
func maxWorkersText(l *LocalBackend, s LocalSettings) string {
	switch {
	case l.MaxWorkers != 0:
		return fmt.Sprintf("maxWorkers (%d)", s.MaxWorkers)
	case l.PoolSize != 0:
		return fmt.Sprintf("poolSize (%d)", s.MaxWorkers)
	default:
		return fmt.Sprintf("maxWorkers (%d by default: %d per CPU)", s.MaxWorkers, DefaultLocalWorkersPerCPU)
	}
}

// sizeText names a key and its effective value, saying when it is the
// default.
func sizeText(key string, set, effective int, unit string) string {
	if set == 0 {
		return fmt.Sprintf("%s (%d%s by default)", key, effective, unit)
	}
	return fmt.Sprintf("%s (%d%s)", key, effective, unit)
}

// plural writes n with the singular or plural words.
func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// mulSat is a*b for non-negative a and b, held at math.MaxInt rather than
// overflowing.
func mulSat(a, b int) int {
	if a != 0 && b > math.MaxInt/a {
		return math.MaxInt
	}
	return a * b
}
