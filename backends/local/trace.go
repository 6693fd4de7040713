package local

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/internal/telemetry"
)

// traceStart records on the execution's span (when one records) how long
// it waited for room and, when its worker process started for it, that
// start.
func (e *Executor) traceStart(ctx context.Context, w *worker, wait time.Duration) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	telemetry.Execution(ctx, telemetry.QueueWaitMs.Float64(telemetry.Ms(wait)))
	e.mu.Lock()
	fresh := w.started == 1
	e.mu.Unlock()
	if fresh {
		telemetry.WorkerStarted(ctx, w.p.pid)
	}
}

// traceDeath records on a run's span that its worker process died, and
// why.
func (r *run) traceDeath(d deathNote) {
	telemetry.WorkerKilled(r.runCtx, r.w.p.pid, d.kind().String())
}
