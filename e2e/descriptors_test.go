package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/protocol"
)

// descriptorLimit is the RLIMIT_NOFILE the gateway under test runs with.
const descriptorLimit = 256

// TestClientsWithoutCredentialsCannotTakeEveryDescriptor: a gateway at a
// 256-descriptor limit meets 240 clients that each take a 401 and keep the
// connection, and 300 that connect and send nothing. The 401s close their
// connections, the silent ones are bounded, a client with a key still runs
// programs, and a killed worker process is replaced.
func TestClientsWithoutCredentialsCannotTakeEveryDescriptor(t *testing.T) {
	key, hash := newKey(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, path, oneTenantConfig(hash))
	// The shell lowers both limits, so the Go runtime cannot raise the soft
	// one back, then becomes the gateway.
	cmd := exec.Command("/bin/sh", "-c", `ulimit -n `+strconv.Itoa(descriptorLimit)+` && exec "$0" "$@"`,
		gatewayBinary(t), "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Env = os.Environ()
	gw := startProcess(t, "the gateway", cmd, nil)
	addr := strings.TrimPrefix(gw.url, "http://")
	pid := gw.cmd.Process.Pid

	// 240 clients without a credential read their 401, then would idle.
	for i := 0; i < 240; i++ {
		c := dialRaw(t, addr)
		if _, err := io.WriteString(c, "GET /v1/executor HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("client %d: status %d", i, resp.StatusCode)
		}
		// The gateway closes the connection after the refusal.
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("client %d: the connection stayed open after its 401 (%v)", i, err)
		}
	}
	// 300 clients connect and send nothing.
	for i := 0; i < 300; i++ {
		dialRaw(t, addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(what string) {
		t.Helper()
		dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
		defer dcancel()
		ex, err := remote.Dial(dctx, "ws://"+addr+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, DialTimeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("%s: a client with a key could not connect: %v (the gateway holds %d descriptors)", what, err, openDescriptors(pid))
		}
		defer ex.Close()
		res, err := ex.Execute(dctx, &protocol.ExecuteRequest{Code: "async () => 6 * 7"})
		// The pool places a run again when its job cannot reach a dead
		// worker, but a job written just before the gateway saw the worker
		// die still fails with WORKER_CRASHED (seen about once in six
		// runs), which the contract makes retryable; the retry needs a new
		// worker process, and so descriptors.
		if protocol.CodeOf(err) == protocol.CodeWorkerCrashed {
			res, err = ex.Execute(dctx, &protocol.ExecuteRequest{Code: "async () => 6 * 7"})
		}
		if err != nil || res.ResultJSON != "42" {
			t.Fatalf("%s: %+v, %v", what, res, err)
		}
	}
	run("beside the idle clients")
	if n := openDescriptors(pid); n >= descriptorLimit {
		t.Fatalf("the gateway holds %d descriptors at a limit of %d", n, descriptorLimit)
	}
	// Kill every worker process: the next run needs a new one, which needs
	// descriptors.
	workers := childrenOf(t, pid)
	if len(workers) == 0 {
		t.Fatal("the gateway has no worker process")
	}
	for _, w := range workers {
		syscall.Kill(w, syscall.SIGKILL)
	}
	for _, w := range workers {
		for i := 0; i < 100 && processExists(w); i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
	run("after its worker processes were killed")
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openDescriptors(pid int) int {
	entries, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(entries)
}

// childrenOf lists pid's child processes.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	var out []int
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// processExists: a zombie not yet reaped counts as gone.
func processExists(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) > 2 && fields[2] != "Z"
}
