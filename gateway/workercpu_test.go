package gateway_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestWorkerCPUIsExportedByTenant: the CPU a tenant's local worker
// processes burned, as the gateway reads it from the kernel, is served
// under the tenant's label, and covers what the tenant's run reported it
// used.
func TestWorkerCPUIsExportedByTenant(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "policy: {timeoutMs: 300}", "policy: {timeoutMs: 10000}", 1)
	})
	res, err := e.mustDial(t, "/v1/executor", "acme").Execute(testCtx(t), &protocol.ExecuteRequest{
		Code: "async () => { let x = 0; for (let i = 0; i < 1e6; i++) { x += i % 7 } return 1 }",
	})
	if err != nil || res.ResultJSON != "1" || res.Usage == nil || res.Usage.CPU <= 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	series := `codemode_worker_cpu_seconds_total{backend="local",tenant="acme"}`
	// The pool reads a worker's CPU every few milliseconds while it hosts
	// runs: the run's last moments show at the next read.
	testutil.WaitFor(t, 10*time.Second, func() bool {
		got, err := strconv.ParseFloat(e.metric(t, series), 64)
		return err == nil && got >= res.Usage.CPU.Seconds()*0.9
	}, "%s to cover the run's reported CPU %v", series, res.Usage.CPU)
}
