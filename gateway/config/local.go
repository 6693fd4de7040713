package config

import (
	"cmp"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// The local backend's defaults that do not depend on the machine. The local
// backend package keeps its own copy, and a test pins that the two agree.
const (
	// DefaultLocalWorkersPerCPU: maxWorkers defaults to this many worker
	// processes per CPU.
	DefaultLocalWorkersPerCPU = 4
	// DefaultLocalRunsPerWorker is how many executions one worker process
	// hosts at once, waiting and retained ones included.
	DefaultLocalRunsPerWorker = 1024
	// DefaultLocalWorkerMemoryMB is one worker process's memory across its
	// executions.
	DefaultLocalWorkerMemoryMB = 1024
	// DefaultLocalQueue is how many executions of one tenant may wait for
	// room.
	DefaultLocalQueue = 64
	// DefaultLocalQueueTimeout is how long an execution may wait for room.
	DefaultLocalQueueTimeout = 10 * time.Second
	// DefaultLocalWorkerIdleTimeout stops a tenant's worker process that
	// had nothing to run for this long.
	DefaultLocalWorkerIdleTimeout = 30 * time.Second
)

// LocalSettings are a local group's sizes with every default filled in:
// what the group runs with, and what the configuration checks hold tenant
// caps against.
type LocalSettings struct {
	MinWorkers        int
	MaxWorkers        int
	RunsPerWorker     int
	WorkerMemoryMB    int
	MemoryMB          int // each run's memory limit
	Queue             int // executions of one tenant that may wait
	QueueTimeout      time.Duration
	WorkerIdleTimeout time.Duration
	// CPUSlots is a tenant's policy.cpuSlots when it sets none.
	CPUSlots int
}

// LocalDefaults are the local backend's defaults on a machine of numCPU
// CPUs (fewer than one counts as one): what a local group that sets none of
// its keys runs with.
func LocalDefaults(numCPU int) LocalSettings {
	return (&LocalBackend{}).Settings(numCPU)
}

// Settings are l's values with the local backend's defaults filled in for
// a machine of numCPU CPUs. poolSize counts as maxWorkers, its old name.
// Values are taken as they are; Parse refuses negative ones.
func (l *LocalBackend) Settings(numCPU int) LocalSettings {
	numCPU = max(numCPU, 1)
	s := LocalSettings{
		MinWorkers:        l.MinWorkers,
		MaxWorkers:        l.MaxWorkers,
		RunsPerWorker:     l.RunsPerWorker,
		WorkerMemoryMB:    l.WorkerMemoryMB,
		MemoryMB:          l.MemoryMB,
		Queue:             l.Queue,
		QueueTimeout:      l.QueueTimeout.Std(),
		WorkerIdleTimeout: l.WorkerIdleTimeout.Std(),
	}
	s.MaxWorkers = cmp.Or(s.MaxWorkers, l.PoolSize, DefaultLocalWorkersPerCPU*numCPU)
	s.MinWorkers = cmp.Or(s.MinWorkers, min(numCPU, s.MaxWorkers))
	s.RunsPerWorker = cmp.Or(s.RunsPerWorker, DefaultLocalRunsPerWorker)
	s.MemoryMB = cmp.Or(s.MemoryMB, protocol.DefaultMemoryLimitMB)
	s.WorkerMemoryMB = cmp.Or(s.WorkerMemoryMB, max(DefaultLocalWorkerMemoryMB, s.MemoryMB))
	s.Queue = cmp.Or(s.Queue, DefaultLocalQueue)
	s.QueueTimeout = cmp.Or(s.QueueTimeout, DefaultLocalQueueTimeout)
	s.WorkerIdleTimeout = cmp.Or(s.WorkerIdleTimeout, DefaultLocalWorkerIdleTimeout)
	s.CPUSlots = DefaultCPUSlots(numCPU, s.MaxWorkers)
	return s
}

// DefaultCPUSlots is the local backend's default policy.cpuSlots for a
// tenant of a group of maxWorkers worker processes on numCPU CPUs: one per
// CPU but one, and one short of every worker process, so that no tenant left
// at the default keeps every CPU busy or takes a whole group; at least 1.
func DefaultCPUSlots(numCPU, maxWorkers int) int {
	return max(1, min(numCPU-1, maxWorkers-1))
}
