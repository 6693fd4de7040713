package worker

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// A thread takes little of a worker's address space, however the worker was
// built: each run computing on holds a thread, and a worker sets its own
// address-space limit. With cgo's defaults (pthread's 8 MiB stacks, an
// allocator arena of 64 MiB a thread) 32 threads took 960 MiB. The threads
// are made in a process of their own (this test binary again), where no
// other test's heap grows meanwhile.
func TestThreadsTakeLittleAddressSpace(t *testing.T) {
	const threads = 32
	if os.Getenv(threadsChildEnv) != "" {
		fmt.Printf("grew %d\n", threadsGrowth(t, threads))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestThreadsTakeLittleAddressSpace$", "-test.count=1")
	cmd.Env = append(os.Environ(), threadsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	grew, found := int64(0), false
	for line := range strings.Lines(string(out)) {
		if _, err := fmt.Sscanf(line, "grew %d", &grew); err == nil {
			found = true
			break
		}
	}
	if !found {
		t.Fatalf("the child process said nothing of its threads: %s", out)
	}
	t.Logf("%d threads grew the address space by %d KiB", threads, grew>>10)
	if limit := int64(threads) * 2 * threadStack; grew > limit {
		t.Fatalf("%d threads grew the address space by %d MiB, more than %d MiB", threads, grew>>20, limit>>20)
	}
}

// threadsChildEnv marks the process TestThreadsTakeLittleAddressSpace
// makes its threads in.
const threadsChildEnv = "CODEMODE_TEST_THREADS_CHILD"

// threadsGrowth makes n threads the way a worker's hogs hold them, and
// returns how much they grew the address space by.
func threadsGrowth(t *testing.T, n int) int64 {
	if err := smallThreadStacks(); err != nil {
		t.Fatal(err)
	}
	before := addressSpace(t)
	var started, ended sync.WaitGroup
	release := make(chan struct{})
	for range n {
		started.Add(1)
		ended.Add(1)
		go func() {
			defer ended.Done()
			// Locked and blocked, each holds a thread of its own.
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
	return grew
}

// addressSpace is the process's address space (VmSize) in bytes.
func addressSpace(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmSize in /proc/self/status")
	return 0
}
