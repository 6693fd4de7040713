package worker

import (
	"runtime"
	"sync"
	"testing"
)

// A thread takes little of a worker's address space, however the worker was
// built: each run computing on holds a thread, and a worker sets its own
// address-space limit. With cgo's defaults (pthread's 8 MiB stacks, an
// allocator arena of 64 MiB a thread) 32 threads took 960 MiB. It runs
// alone: another test's heap growing meanwhile grew the address space by
// hundreds of MiB.
func TestThreadsTakeLittleAddressSpace(t *testing.T) {
	if !alone(t) {
		return
	}
	if err := smallThreadStacks(); err != nil {
		t.Fatal(err)
	}
	const threads = 32
	before := addressSpace(t)
	var started, ended sync.WaitGroup
	release := make(chan struct{})
	for range threads {
		started.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			// Locked and blocked, each holds a thread of its own, as a
			// hog's piece does.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			started.Done()
			<-release
		}()
	}
	started.Wait()
	grew := addressSpace(t) - before
	close(release)
	ended.Wait()
	t.Logf("%d threads grew the address space by %d KiB", threads, grew>>10)
	if limit := int64(threads) * 2 * threadStack; grew > limit {
		t.Fatalf("%d threads grew the address space by %d MiB, more than %d MiB", threads, grew>>20, limit>>20)
	}
}

// addressSpace is the process's address space in bytes (readVmSize, which
// the worker's own RLIMIT_AS is set from).
func addressSpace(t *testing.T) int64 {
	t.Helper()
	vm, ok := readVmSize()
	if !ok {
		t.Fatal("the address space could not be read")
	}
	return int64(vm)
}
