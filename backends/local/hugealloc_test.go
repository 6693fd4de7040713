package local

import (
	"fmt"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// bombBesideSiblings runs bomb on a worker of tenant t that hosts ten runs
// parked on a tool and one holding 64 MB, half its limit, honestly: the
// bomb ends with the memory text, every sibling completes with its value,
// and the worker that hosted them is still the tenant's, the same process.
func bombBesideSiblings(t *testing.T, bomb string) {
	t.Helper()
	e := newPool(t, Options{MaxWorkers: 2, MinWorkers: 1, Shares: oneSlotEach, WorkerCommand: jsWorkerCommand(t)})
	g := newGatedTool()
	holder := parkedRequest(g, 0)
	holder.Code = "async () => { const b = new Uint8Array(64 << 20).fill(7); const n = await t.wait(0); return n + b[12345] }"
	holder.Timeout = protocol.TimeoutOf(60000)
	siblings, want := []*protocol.ExecuteRequest{holder}, []string{"7"}
	for i := 1; i <= 10; i++ {
		siblings, want = append(siblings, parkedRequest(g, i)), append(want, fmt.Sprint(i+1))
	}
	results := startParked(t, e, g, siblings)
	before := e.Stats().TenantWorkers["t"]
	res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: bomb, Timeout: protocol.TimeoutOf(30000)}, tenantT)
	if memory := protocol.NewMemoryLimitError(128).Error(); err != nil || res.Error != memory {
		t.Fatalf("%+v, %v; want the memory text", res, err)
	}
	close(g.release)
	for i := range siblings {
		if res := <-results[i]; res == nil || res.HasError || res.ResultJSON != want[i] {
			t.Fatalf("sibling %d: %+v, want %s", i, res, want[i])
		}
	}
	s := e.Stats()
	if after := s.TenantWorkers["t"]; len(before) != 1 || fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the tenant's worker was %v, now %v: the bomb cost its siblings their process", before, after)
	}
	if s.WorkersCrashed+s.OutOfMemory+s.RSSKills+s.TimeoutKills != 0 {
		t.Fatalf("a layer that stops the process acted: %+v", s)
	}
}

// One template literal over a large string asks goja for many times the
// run's limit in one allocation; split, it is allocations of two values at
// most, and the meter ends the run at the first of its whole limit. Whole,
// it took the worker past its address-space limit and all eleven siblings
// with it.
func TestOneHugeTemplateEndsOnlyItsRun(t *testing.T) {
	bomb := "async () => { const s = 'x'.repeat(64 << 20); return `" + strings.Repeat("${s}", 24) + "`.length }"
	bombBesideSiblings(t, bomb)
}

// A string doubling itself ends at the allocation of its whole limit, and
// the copy into it, which no interrupt reaches, is given the time it takes
// before the parent would replace the worker.
func TestDoublingStringsEndOnlyTheirRunInPlace(t *testing.T) {
	for _, bomb := range []string{
		"async () => { let s = 'x'.repeat(1 << 20); while (true) s += s }",
		"async () => { let s = 'x'.repeat(1 << 20); while (true) s = `${s}${s}` }",
	} {
		t.Run(bomb, func(t *testing.T) { bombBesideSiblings(t, bomb) })
	}
}
