package capnweb_test

// Interop tests against the real capnweb JavaScript library (npm capnweb 0.12.0, installed in
// capnweb/interop by `make interop-deps`), in both directions:
//
//   - JS client → Go server: interop/client.mjs runs its scenario list against the Go test
//     server of interop_server_test.go; interop/garbage.mjs sends malformed frames to it.
//   - Go client → JS server: the Go scenarios of interop_client_test.go run against
//     interop/server.mjs; interop/garbage-server.mjs answers the Go client with malformed
//     frames.
//
// The same scenarios also run JS → JS and Go → Go: the first proves the scripts ask only what
// the reference library does, the second that the Go peer agrees with itself over a real
// WebSocket. interop/trace.mjs then checks that the Go server puts the very frames on the
// wire that the JS server does. Without node or node_modules these tests fail, saying what
// to run.

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/internal/testutil"
)

// The number of scenarios client.mjs reports when all run: four per named value, plus the
// call, callback, error, pipelining and close scenarios.
func jsClientScenarioCount() int { return 4*len(goSendValues()) + 21 }

// The number of scenarios garbage.mjs reports: its malformed cases plus others_unaffected
// (plus "oversized" when OVERSIZE_BYTES is set).
const garbageScenarioCount = 18

// TestInteropJSClientJSServer runs the JS scripts against the JS server: the reference run
// that shows each scenario asks only what the real library does.
func TestInteropJSClientJSServer(t *testing.T) {
	js := startJSServer(t)
	results, code, stderr := runJSScript(t, "client.mjs", js.URL, nil)
	checkScenarios(t, "client.mjs", results, code, stderr, jsClientScenarioCount())
	results, code, stderr = runJSScript(t, "garbage.mjs", js.URL, nil)
	checkScenarios(t, "garbage.mjs", results, code, stderr, garbageScenarioCount)
}

// TestInteropJSClientGoServer runs every client.mjs scenario against the Go server.
func TestInteropJSClientGoServer(t *testing.T) {
	srv := startGoServer(t, false, capnweb.Options{})
	results, code, stderr := runJSScript(t, "client.mjs", srv.URL, nil)
	checkScenarios(t, "client.mjs", results, code, stderr, jsClientScenarioCount())

	// close/client_mid_call ended a session while hang() was being served: the handler's
	// context must have been cancelled.
	srv.mu.Lock()
	cancelled := srv.hangsCancelled
	srv.mu.Unlock()
	if cancelled < 1 {
		t.Errorf("no hang() handler saw its context cancelled when the JS client ended the session")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return srv.activeSessions() == 0
	}, "every session the JS client opened ends")
}

// TestInteropJSGarbageGoServer sends the Go server (built by capnweb.Accept, with a small read
// limit) malformed frames: each such session aborts and ends, leaving no goroutine behind,
// while a session opened before keeps working.
func TestInteropJSGarbageGoServer(t *testing.T) {
	const readLimit = 64 << 10
	srv := startGoServer(t, true, capnweb.Options{MaxMessageSize: readLimit})
	// One session that stays open, to count what the server's idle goroutines are.
	ctx, cancel := context.WithTimeout(context.Background(), goScenarioTimeout+nodeScriptTimeout)
	defer cancel()
	idle := dialSession(t, srv.URL)
	if _, err := idle.Main().Call(ctx, "add", 1, 1); err != nil {
		t.Fatal(err)
	}
	baseline := runtime.NumGoroutine()

	results, code, stderr := runJSScript(t, "garbage.mjs", srv.URL, nil, "OVERSIZE_BYTES=200000")
	checkScenarios(t, "garbage.mjs", results, code, stderr, garbageScenarioCount+1)
	// Each aborted session must end on the Go side too, not linger, and leave no goroutine
	// behind (a small slack for the HTTP server's own).
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return srv.activeSessions() == 1
	}, "every garbage session ends on the Go side")
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return runtime.NumGoroutine() <= baseline+3
	}, "the garbage sessions' goroutines exit")
	if _, err := idle.Main().Call(ctx, "add", 2, 2); err != nil {
		t.Errorf("the session open during the garbage failed afterwards: %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for id, why := range srv.ends {
		t.Logf("session %d: %s", id, why)
	}
}

// TestInteropGoClientJSServer runs every Go client scenario against the JS server.
func TestInteropGoClientJSServer(t *testing.T) {
	runGoClientScenarios(t, startJSServer(t).URL)
}

// TestInteropGoClientGoServer runs the Go client scenarios against the Go server, over a real
// WebSocket.
func TestInteropGoClientGoServer(t *testing.T) {
	srv := startGoServer(t, false, capnweb.Options{})
	runGoClientScenarios(t, srv.URL)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		return srv.activeSessions() == 0
	}, "every session the Go client opened ends")
}

// traceFrame is one line of interop/trace.mjs.
type traceFrame struct {
	Step  string `json:"step"`
	Dir   string `json:"dir"`
	Frame string `json:"frame"`
}

// runTrace runs interop/trace.mjs against url and returns its frames grouped by step and
// direction, and the steps in the order they ran.
func runTrace(t *testing.T, url string) (map[string][]string, []string) {
	t.Helper()
	node := requireInterop(t)
	ctx, cancel := context.WithTimeout(context.Background(), nodeScriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "trace.mjs", url)
	cmd.Dir = interopDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { killGroup(cmd); return nil }
	cmd.WaitDelay = 5 * time.Second
	var stderr testutil.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	killGroup(cmd)
	if err != nil {
		t.Fatalf("trace.mjs against %s: %v; stderr:\n%s", url, err, stderr.String())
	}
	frames := map[string][]string{}
	var steps []string
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var f traceFrame
		if err := json.Unmarshal([]byte(line), &f); err != nil || f.Step == "" {
			t.Fatalf("trace.mjs printed %q", line)
		}
		if !seen[f.Step] {
			seen[f.Step] = true
			steps = append(steps, f.Step)
		}
		frames[f.Step+" "+f.Dir] = append(frames[f.Step+" "+f.Dir], f.Frame)
	}
	return frames, steps
}

// TestInteropSameFramesAsJSServer runs one fixed list of calls from the real JS client against
// the JS server and against the Go server: every step must put the same frames on the wire,
// text for text, in each direction.
func TestInteropSameFramesAsJSServer(t *testing.T) {
	js := startJSServer(t)
	gosrv := startGoServer(t, false, capnweb.Options{})
	want, steps := runTrace(t, js.URL)
	got, _ := runTrace(t, gosrv.URL)
	if len(steps) < 40 {
		t.Fatalf("the JS server's trace has only %d steps", len(steps))
	}
	for _, step := range steps {
		for _, dir := range []string{"C->S", "S->C"} {
			key := step + " " + dir
			if !slices.Equal(got[key], want[key]) {
				t.Errorf("step %s, %s frames differ:\nGo server: %s\nJS server: %s", step, dir,
					strings.Join(got[key], "\n           "), strings.Join(want[key], "\n           "))
			}
		}
	}
}

// garbageServerCases are the cases of interop/garbage-server.mjs.
var garbageServerCases = []string{
	"binary", "invalid_json", "not_an_array", "unknown_message", "resolve_without_value",
	"push_to_unknown_import", "pull_unknown_id", "release_unknown_id", "unknown_special_value",
	"unescaped_array", "too_deep", "bigint_too_long",
}

// TestInteropGoClientGarbageFromServer: a server answers the Go client's first call with a
// malformed frame. The Go session must fail the call as CONNECTION_BROKEN with the protocol
// error as its cause, and tell the server: an abort frame, then close code 3000.
func TestInteropGoClientGarbageFromServer(t *testing.T) {
	srv := startNodeServer(t, "garbage-server.mjs")
	for _, name := range garbageServerCases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), goScenarioTimeout)
			defer cancel()
			sess := dialGo(t, ctx, srv.URL+name)
			_, err := sess.Main().Call(ctx, "add", 1, 2)
			var broken *capnweb.BrokenError
			if !errors.As(err, &broken) {
				t.Fatalf("the call failed with %T %v, want *capnweb.BrokenError", err, err)
			}
			var pe *capnweb.ProtocolError
			if !errors.As(err, &pe) {
				t.Errorf("the call's error %v does not wrap a *capnweb.ProtocolError", err)
			}
			select {
			case <-sess.Done():
			case <-time.After(5 * time.Second):
				t.Fatalf("the session did not end within 5 s of the garbage")
			}
			var seen struct {
				Case     string   `json:"case"`
				Received []string `json:"received"`
				Code     int      `json:"code"`
				Reason   string   `json:"reason"`
			}
			deadline := time.After(10 * time.Second)
			for seen.Case != name {
				select {
				case line := <-srv.Lines:
					if err := json.Unmarshal([]byte(line), &seen); err != nil {
						t.Fatalf("garbage-server.mjs printed %q", line)
					}
				case <-deadline:
					t.Fatalf("garbage-server.mjs reported no close of case %s within 10 s", name)
				}
			}
			if n := len(seen.Received); n == 0 || !strings.HasPrefix(seen.Received[n-1], `["abort",`) {
				t.Errorf("the Go client's last frame was not an abort: %q", seen.Received)
			}
			if seen.Code != capnweb.CloseAbort {
				t.Errorf("the Go client closed with %d %q, want %d", seen.Code, seen.Reason, capnweb.CloseAbort)
			}
		})
	}
}
