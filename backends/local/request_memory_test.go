package local

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// TestRequestLowersTheMemoryLimit: a request may lower its own memory limit
// below the executor's (a gateway applying a tenant's policy), never raise
// it; the text names the limit that applied.
func TestRequestLowersTheMemoryLimit(t *testing.T) {
	ex, err := New(Options{PoolSize: 1, MemoryLimitMB: 128, WorkerCommand: jsWorkerCommand(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// About 64 MB held, in 1 MB steps, and still held across a wait: the
	// watchdog looks at least as the slice ends there, whenever a busy
	// machine lets its own polls run.
	const grow = "async () => { const keep = []; for (let i = 0; i < 64; i++) keep.push(new Uint8Array(1 << 20).fill(1)); await new Promise((r) => setTimeout(r, 20)); return keep.length }"
	for _, c := range []struct {
		limit int
		want  string // "" for the value
	}{
		{0, ""},
		{256, ""}, // above the executor's: the executor's 128 MB applies
		{32, protocol.NewMemoryLimitError(32).Error()},
	} {
		res, err := ex.ExecuteWith(ctx, &protocol.ExecuteRequest{Code: grow, Timeout: protocol.TimeoutOf(30000)}, protocol.Policy{MemoryLimitMB: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if c.want == "" && (res.HasError || res.ResultJSON != "64") {
			t.Errorf("limit %d: %+v, want the 64 MB run to finish", c.limit, res)
		}
		if c.want != "" && res.Error != c.want {
			t.Errorf("limit %d: %q, want %q", c.limit, res.Error, c.want)
		}
	}
}
