package gateway

import (
	"encoding/json"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/internal/testutil"
)

// memoryLimitLines are the "memory limit" lines a JSON log holds.
func memoryLimitLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("a log line that is not JSON: %q", line)
		}
		if m["msg"] == "memory limit" {
			out = append(out, m)
		}
	}
	return out
}

// TestMemoryLimitIsBasePlusWireAtStartAndReload: a gateway that holds the
// process's memory limit sets it at New, and again at a reload, to the
// base it measured plus limits.wireMemoryMB, and says so.
func TestMemoryLimitIsBasePlusWireAtStartAndReload(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	url, _ := recorderServer(t)
	cfg := remoteGroupConfig(t, "1h", url)
	wire := float64(int64(cfg.Limits.WireMemoryMB) << 20)
	var log testutil.Buffer
	noLimitEnv := func(k string) string { return "" }
	g := newGateway(t, cfg, Options{MemoryLimit: true, Getenv: noLimitEnv, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	check := func(when string, n int) {
		t.Helper()
		lines := memoryLimitLines(t, log.String())
		if len(lines) != n {
			t.Fatalf("%s: %d memory limit lines in the log, want %d", when, len(lines), n)
		}
		l := lines[n-1]
		limit, _ := l["limitBytes"].(float64)
		base, _ := l["baseBytes"].(float64)
		if base <= 0 || limit != base+wire || l["source"] != "wire memory bound" {
			t.Fatalf("%s: the memory limit line is %v, want a base plus %v bytes from the wire memory bound", when, l, wire)
		}
		if now := debug.SetMemoryLimit(-1); float64(now) != limit {
			t.Fatalf("%s: the process's limit is %d, the log says %v", when, now, limit)
		}
	}
	check("at start", 1)
	debug.SetMemoryLimit(1 << 40)
	if err := g.Reload(remoteGroupConfig(t, "1h", url)); err != nil {
		t.Fatal(err)
	}
	check("after a reload", 2)
}

// TestMemoryLimitLeavesTheOperatorsLimit: under GOMEMLIMIT the gateway
// sets nothing, and says whose the limit is.
func TestMemoryLimitLeavesTheOperatorsLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
	const theirs = 700 << 20
	debug.SetMemoryLimit(theirs)
	url, _ := recorderServer(t)
	var log testutil.Buffer
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "700MiB"
		}
		return ""
	}
	newGateway(t, remoteGroupConfig(t, "1h", url), Options{MemoryLimit: true, Getenv: env, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	lines := memoryLimitLines(t, log.String())
	if len(lines) != 1 || lines[0]["limitBytes"] != float64(theirs) || lines[0]["source"] != "GOMEMLIMIT" || lines[0]["baseBytes"] != nil {
		t.Fatalf("the memory limit lines are %v, want one that names GOMEMLIMIT's %d bytes", lines, theirs)
	}
	if now := debug.SetMemoryLimit(-1); now != theirs {
		t.Errorf("the process's limit is %d, want the operator's %d", now, theirs)
	}
}
