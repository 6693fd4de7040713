package local

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

func TestOptionsDefaultsAndValidation(t *testing.T) {
	o, err := Options{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.MaxWorkers < 1 || o.MinWorkers < 1 || o.MinWorkers > o.MaxWorkers || o.RunsPerWorker != DefaultRunsPerWorker ||
		o.WorkerMemoryMB != DefaultWorkerMemoryMB || o.QueueTimeout != DefaultQueueTimeout || o.WorkerIdleTimeout != DefaultWorkerIdleTimeout ||
		o.QueueBound != DefaultQueueBound || o.MemoryLimitMB != protocol.DefaultMemoryLimitMB ||
		o.DefaultTimeoutMs != protocol.DefaultTimeout || o.MaxRunsPerWorker != DefaultMaxRunsPerWorker ||
		o.HandlesIdleTimeout != protocol.DefaultHandlesIdleTimeout*time.Millisecond || len(o.WorkerCommand) != 1 {
		t.Fatalf("defaults %+v", o)
	}
	if o, _ := (Options{QueueBound: -1, DefaultTimeoutMs: 1 << 40}).withDefaults(); o.QueueBound != 0 || o.DefaultTimeoutMs != protocol.MaxSupportedTimeout {
		t.Fatalf("queue %d, timeout %d", o.QueueBound, o.DefaultTimeoutMs)
	}
	if o, _ := (Options{PoolSize: 3}).withDefaults(); o.MaxWorkers != 3 {
		t.Fatalf("PoolSize 3 gave MaxWorkers %d", o.MaxWorkers)
	}
	if o, _ := (Options{MemoryLimitMB: 2048}).withDefaults(); o.WorkerMemoryMB != 2048 {
		t.Fatalf("a worker's memory %d below one run's limit", o.WorkerMemoryMB)
	}
	for _, bad := range []Options{{PoolSize: -1}, {MemoryLimitMB: -5}, {KillGrace: -1}, {MaxWorkers: 2, MinWorkers: 3},
		{MemoryLimitMB: 512, WorkerMemoryMB: 256}, {QueueTimeout: -1}, {RunsPerWorker: -1}} {
		if _, err := New(bad); err == nil {
			t.Fatalf("New(%+v) accepted a negative option", bad)
		}
	}
}

func TestInvalidTimeoutIsDeclared(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid", Timeout: protocol.TimeoutOf(-1)})
	if err != nil {
		t.Fatal(err)
	}
	var want *protocol.InvalidTimeoutError
	if !res.HasError || res.Error != (&protocol.InvalidTimeoutError{Millis: -1}).Error() {
		t.Fatalf("got %+v, want %T's text", res, want)
	}
}
