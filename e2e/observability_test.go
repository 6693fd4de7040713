package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestJSONLogsMetricsAndBuildInfo runs a gateway that logs JSON and traces
// to a receiver in the test: stdout and stderr hold JSON lines only; the
// start-up line names the version and the configuration's digest; the
// execution's line names its connection (as the connection's line does)
// and its trace (as the collector received it), with durations in
// milliseconds; and /metrics has the build, Go, process, queue-wait and
// pool series.
func TestJSONLogsMetricsAndBuildInfo(t *testing.T) {
	rcv := otlptest.Start()
	defer rcv.Close()
	key, hash := newKey(t)
	config := oneTenantConfig(hash) + "tracing: {enabled: true, endpoint: " + rcv.URL() + "}\n"
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBinary(t), "serve", "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), exportSoon)
	stderr := &testutil.Buffer{Echo: t}
	cmd.Stderr = stderr
	var mu sync.Mutex
	var stdout []string
	var admin string
	proc := startProcess(t, "the gateway", cmd, func(line string) {
		mu.Lock()
		defer mu.Unlock()
		stdout = append(stdout, line)
		if m := adminListening.FindStringSubmatch(line); m != nil {
			admin = m[1]
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex := dialExecutor(t, ctx, proc.url, key, nil)
	// A run long enough for the pool's memory poll to see its worker.
	res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => { const end = Date.now() + 300; while (Date.now() < end) {} return 1 }"})
	if err != nil || res.ResultJSON != "1" {
		t.Fatalf("the run: %+v, %v", res, err)
	}
	mu.Lock()
	adminURL := admin
	mu.Unlock()
	code, body := testutil.Get(t, adminURL+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics answered %d", code)
	}
	version := checkProcessSeries(t, body)
	for series, want := range map[string]float64{
		`codemode_queue_wait_seconds_count{backend="local",tenant="alpha"}`: 1,
		`codemode_workers_max{backend="local"}`:                             2,
		`codemode_pool_tenants{backend="local"}`:                            1,
	} {
		if got := metric(t, body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	for _, series := range []string{`codemode_worker_memory_bytes{backend="local"}`} {
		if got := metric(t, body, series); got <= 0 {
			t.Errorf("%s = %v, want more than 0", series, got)
		}
	}
	ex.Close()
	var spans []otlptest.Span
	testutil.WaitFor(t, 15*time.Second, func() bool {
		spans = rcv.Spans()
		for _, s := range spans {
			if s.Name == "codemode.execute" {
				return true
			}
		}
		return false
	}, "the execution's span")

	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.cmd.Wait(); err != nil {
		t.Fatalf("the gateway exited with %v", err)
	}

	records := func(stream string, lines []string) []map[string]any {
		var out []map[string]any
		for _, l := range lines {
			if l == "" {
				continue
			}
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Errorf("%s holds a line that is not JSON: %q", stream, l)
				continue
			}
			out = append(out, rec)
		}
		return out
	}
	mu.Lock()
	out := records("stdout", stdout)
	mu.Unlock()
	if len(out) != 2 || out[0]["url"] != adminURL || out[1]["url"] != proc.url {
		t.Errorf("stdout: %v, want the admin and gateway addresses", out)
	}
	logs := records("stderr", strings.Split(stderr.String(), "\n"))
	byMsg := map[string]map[string]any{}
	for _, r := range logs {
		byMsg[r["msg"].(string)] = r
	}
	sum := sha256.Sum256([]byte(config))
	start := byMsg["gateway starting"]
	if start == nil || start["version"] != version || start["go"] != runtime.Version() || start["protocol"] != float64(protocol.ProtocolVersion) ||
		start["configDigest"] != hex.EncodeToString(sum[:8]) || start["config"] != path {
		t.Errorf("the start-up line: %v", start)
	}
	run, conn := byMsg["execution"], byMsg["connection closed"]
	if run == nil || conn == nil {
		t.Fatalf("no execution or connection line in %v", logs)
	}
	if run["connection"] == nil || run["connection"] != conn["connection"] {
		t.Errorf("the execution's connection %v is not the connection line's %v", run["connection"], conn["connection"])
	}
	var traced string
	for _, s := range spans {
		if s.Name == "codemode.execute" {
			traced = s.TraceID()
		}
	}
	if run["trace"] != traced {
		t.Errorf("the execution's trace %v, the collector's %s", run["trace"], traced)
	}
	if wall, ok := run["wallMs"].(float64); !ok || wall < 300 || wall > 60000 {
		t.Errorf("the execution's wallMs %v, want the run's 300 ms or more, in milliseconds", run["wallMs"])
	}
	if d, ok := conn["durationMs"].(float64); !ok || d < 300 {
		t.Errorf("the connection's durationMs %v", conn["durationMs"])
	}
}

// checkProcessSeries checks the series a gateway and an executor server
// both serve about their own process in the exposition body:
// codemode_build_info naming the version `gateway version` prints, the Go
// version and the protocol version, and the Go and process collectors. It
// returns that version.
func checkProcessSeries(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`codemode_build_info\{go_version="[^"]*",protocol_version="\d+",version="([^"]+)"\} 1`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no codemode_build_info in:\n%s", body)
	}
	version := m[1]
	if out, err := exec.Command(gatewayBinary(t), "version").Output(); err != nil || !strings.HasPrefix(string(out), "gateway "+version+" (") {
		t.Errorf("codemode_build_info says version %q; gateway version says %q (%v)", version, out, err)
	}
	buildInfo := fmt.Sprintf(`codemode_build_info{go_version=%q,protocol_version="%d",version=%q}`, runtime.Version(), protocol.ProtocolVersion, version)
	if got := metric(t, body, buildInfo); got != 1 {
		t.Errorf("%s = %v, want 1", buildInfo, got)
	}
	for _, series := range []string{`go_goroutines`, `process_resident_memory_bytes`} {
		if got := metric(t, body, series); got <= 0 {
			t.Errorf("%s = %v, want more than 0", series, got)
		}
	}
	return version
}
