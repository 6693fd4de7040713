package local

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/internal/testutil"
)

// descriptorsOf maps each open descriptor of process pid to what it
// refers to.
func descriptorsOf(t *testing.T, pid int) map[int]string {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range entries {
		fd, _ := strconv.Atoi(e.Name())
		if target, err := os.Readlink(dir + e.Name()); err == nil {
			out[fd] = target
		}
	}
	return out
}

// given reports whether target is a descriptor a worker is given or opens
// itself: its pipes, its run table, the Go runtime's poller and the
// cgroup files it reads its CPU quota from.
func given(target string) bool {
	for _, p := range []string{"pipe:", "/memfd:codemode-runs", "anon_inode:", "/sys/fs/cgroup/"} {
		if strings.HasPrefix(target, p) {
			return true
		}
	}
	return false
}

// A descriptor the gateway inherited without close-on-exec (a supervisor's
// /dev/null, say) is not passed on to its workers: a worker holds its
// pipes, its run table and its runtime's own descriptors, nothing else.
func TestWorkersHoldOnlyWhatTheyAreGiven(t *testing.T) {
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	e := newScripted(t, Options{MaxWorkers: 1, MinWorkers: 1})
	pid := pidFor(t, e, "t")
	for n, target := range descriptorsOf(t, pid) {
		if !given(target) {
			t.Fatalf("worker %d holds descriptor %d (%s), which it was not given; all: %v", pid, n, target, descriptorsOf(t, pid))
		}
	}
}

// A worker started with a descriptor it was not meant to have closes it
// before it serves: the parent's close-on-exec marking is not the only
// layer.
func TestWorkerClosesWhatItInherits(t *testing.T) {
	table, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer table.Close()
	stray, err := os.CreateTemp(t.TempDir(), "stray")
	if err != nil {
		t.Fatal(err)
	}
	defer stray.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{wire.WorkerEnv + "=" + wire.WorkerEnvValue}
	// Descriptor 3 is where a worker finds its run table; 4 is a stray.
	cmd.ExtraFiles = []*os.File{table, stray}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	holds := func(path string) bool {
		for _, target := range descriptorsOf(t, cmd.Process.Pid) {
			if target == path {
				return true
			}
		}
		return false
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return !holds(stray.Name()) }, "the worker to close its stray descriptor")
	if target := descriptorsOf(t, cmd.Process.Pid)[wire.TableFD]; target != os.DevNull {
		t.Fatalf("descriptor %d reads %q: the worker closed what it was given", wire.TableFD, target)
	}
}
