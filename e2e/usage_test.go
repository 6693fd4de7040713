package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
	"github.com/supolka/codemode-gateway/internal/testutil"
)

// TestUsageAndTraceContextFromJavaScript runs usage.test.mjs, the real
// capnweb client reading the usage member of result messages and sending
// traceparent in the call options, against a gateway whose tenants run on
// the local backend and on a remote executor server; then checks that
// each execution joined the trace the client named and that the usage
// reached the tenant's metrics.
func TestUsageAndTraceContextFromJavaScript(t *testing.T) {
	nodeModules(t)
	rcv := otlptest.Start()
	defer rcv.Close()
	memberKey, memberHash := newKey(t)
	member := startExecutorServer(t, "--key-hash", memberHash)
	gw, keys := tracedGateway(t, rcv, member.url, memberKey, "gamma")

	traces := map[string]string{"alpha": "11111111111111111111111111111111", "gamma": "22222222222222222222222222222222"}
	const parent = "3333333333333333"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "usage.test.mjs")
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+gw.url, "ALPHA_KEY="+keys["alpha"], "GAMMA_KEY="+keys["gamma"],
		"ALPHA_TRACEPARENT=00-"+traces["alpha"]+"-"+parent+"-01", "GAMMA_TRACEPARENT=00-"+traces["gamma"]+"-"+parent+"-01")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test usage.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the usage scenarios failed from JavaScript: %v", err)
	}

	testutil.WaitFor(t, 15*time.Second, func() bool {
		found := 0
		for _, s := range rcv.Spans() {
			if s.Name == "codemode.execute" && s.ParentID() == parent && s.TraceID() == traces[s.Attr("codemode.tenant")] {
				found++
			}
		}
		return found == 2
	}, "both executions under the traceparent the JavaScript client sent")
	for _, s := range rcv.Spans() {
		if s.Name == "codemode.execute" && s.ParentID() == parent && (s.Attr("codemode.usage.tool_calls") != "2" || s.Attr("codemode.usage.log_bytes") != "6") {
			t.Errorf("the %s execution's span records usage %v", s.Attr("codemode.tenant"), s.Attributes)
		}
	}

	_, body := testutil.Get(t, gw.admin+"/metrics")
	for _, tenant := range []string{"alpha", "gamma"} {
		for series, want := range map[string]float64{
			`codemode_usage_tool_calls_total{tenant="` + tenant + `"}`:        2,
			`codemode_usage_outbound_requests_total{tenant="` + tenant + `"}`: 1,
			`codemode_usage_log_bytes_total{tenant="` + tenant + `"}`:         6,
			`codemode_usage_peak_heap_bytes_count{tenant="` + tenant + `"}`:   1,
		} {
			if got := metric(t, body, series); got != want {
				t.Errorf("%s = %v, want %v", series, got, want)
			}
		}
		if cpu := metric(t, body, `codemode_usage_cpu_seconds_total{tenant="`+tenant+`"}`); cpu < 0.01 {
			t.Errorf("%s's CPU seconds %v, want the program's loop", tenant, cpu)
		}
		if rc := metric(t, body, `codemode_usage_run_clock_seconds_total{tenant="`+tenant+`"}`); rc < 0.01 {
			t.Errorf("%s's run-clock seconds %v", tenant, rc)
		}
	}
}
