package capnweb_test

// The harness that runs the real capnweb JavaScript library (capnweb/interop) from Go
// tests: it finds node and the installed packages, starts the JS server, runs the JS client
// scripts and parses their one-JSON-line-per-scenario output. Every process it starts is
// killed when the test ends, and every wait has a deadline.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
)

const (
	interopDir = "interop"
	// How long node may take to start and print its port on a busy machine.
	nodeStartTimeout = 20 * time.Second
	// The longest a whole JS script run may take before it is killed.
	nodeScriptTimeout = 3 * time.Minute
)

// requireInterop fails the test (never skips it) when node or the npm packages are missing.
func requireInterop(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH (%v): the capnweb interop tests need Node 20+ and the npm "+
			"packages; install node, then run `make interop-deps`", err)
	}
	for _, pkg := range []string{"capnweb", "ws"} {
		manifest := filepath.Join(interopDir, "node_modules", pkg, "package.json")
		if _, err := os.Stat(manifest); err != nil {
			t.Fatalf("%s is missing (%v): run `make interop-deps` (npm ci --prefix "+
				"capnweb/interop) before the tests", manifest, err)
		}
	}
	return node
}

// killGroup ends the child and everything it started (it runs in its own process group).
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// jsServer is a node server script of interop/ running for one test.
type jsServer struct {
	URL string
	PID int
	// Lines carries the stdout lines the server prints after its port.
	Lines  <-chan string
	stderr *testutil.Buffer
}

// startJSServer starts the capnweb JS server, interop/server.mjs.
func startJSServer(t testing.TB) *jsServer { return startNodeServer(t, "server.mjs") }

// startNodeServer starts a server script of interop/ on a free port and returns its URL. It
// is killed when the test ends.
func startNodeServer(t testing.TB, script string) *jsServer {
	t.Helper()
	node := requireInterop(t)
	cmd := exec.Command(node, script, "0")
	cmd.Dir = interopDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the JS server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		killGroup(cmd)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit within 10 s of SIGKILL", script, cmd.Process.Pid)
		}
	})

	// The first stdout line is the port; the rest go to Lines, and are dropped when nobody
	// reads them, so the child never blocks.
	portLine := make(chan string, 1)
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		first := true
		for sc.Scan() {
			if first {
				portLine <- sc.Text()
				first = false
				continue
			}
			select {
			case lines <- sc.Text():
			default:
			}
		}
		if first {
			close(portLine)
		}
	}()
	select {
	case line, ok := <-portLine:
		port, err := strconv.Atoi(strings.TrimSpace(line))
		if !ok || err != nil || port <= 0 {
			t.Fatalf("%s printed %q instead of its port; stderr:\n%s", script, line, stderr.String())
		}
		return &jsServer{URL: fmt.Sprintf("ws://127.0.0.1:%d/", port), PID: cmd.Process.Pid, Lines: lines, stderr: stderr}
	case <-time.After(nodeStartTimeout):
		t.Fatalf("%s printed no port within %v; stderr:\n%s", script, nodeStartTimeout, stderr.String())
	}
	return nil
}

// scenarioResult is one line of a JS client script's output.
type scenarioResult struct {
	Scenario string          `json:"scenario"`
	OK       bool            `json:"ok"`
	Error    string          `json:"error"`
	Detail   json.RawMessage `json:"detail"`
}

// runJSScript runs a JS client script (client.mjs, garbage.mjs) against url with the given
// scenario prefixes and returns its parsed results, its exit code and its stderr.
func runJSScript(t testing.TB, script, url string, prefixes []string, env ...string) ([]scenarioResult, int, string) {
	t.Helper()
	node := requireInterop(t)
	ctx, cancel := context.WithTimeout(context.Background(), nodeScriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, url, strings.Join(prefixes, ","))
	cmd.Dir = interopDir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { killGroup(cmd); return nil }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr testutil.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	killGroup(cmd) // anything the script left behind
	if ctx.Err() != nil {
		t.Fatalf("%s did not finish within %v; output so far:\n%s\nstderr:\n%s", script, nodeScriptTimeout, stdout.String(), stderr.String())
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", script, err)
	}
	var results []scenarioResult
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if line == "" {
			continue
		}
		var r scenarioResult
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Scenario == "" {
			t.Errorf("%s printed a line that is not a scenario result: %q", script, line)
			continue
		}
		results = append(results, r)
	}
	return results, code, stderr.String()
}

// checkScenarios turns each JS scenario result into a subtest, and fails when the script's exit
// code disagrees with its results or when fewer than minScenarios ran (a crash part-way).
func checkScenarios(t *testing.T, script string, results []scenarioResult, code int, stderr string, minScenarios int) {
	t.Helper()
	failed := 0
	for _, r := range results {
		t.Run(r.Scenario, func(t *testing.T) {
			if !r.OK {
				t.Errorf("%s", r.Error)
				if len(r.Detail) > 0 {
					t.Logf("detail: %s", r.Detail)
				}
			}
		})
		if !r.OK {
			failed++
		}
	}
	if len(results) < minScenarios {
		t.Errorf("%s reported %d scenarios, want at least %d (exit code %d); stderr:\n%s", script, len(results), minScenarios, code, stderr)
	}
	if (failed > 0) != (code != 0) {
		t.Errorf("%s exited with %d but %d scenarios failed; stderr:\n%s", script, code, failed, stderr)
	}
}
