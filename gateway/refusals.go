package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// reason is why the gateway or a backend turned a tenant away: the reason
// label of codemode_refusals_total and of the log line.
type reason string

// Every reason a refusal can have.
const (
	reasonRate             reason = "rate"              // policy.rate
	reasonConcurrency      reason = "concurrency"       // policy.maxConcurrent
	reasonBudgetExecutions reason = "budget_executions" // policy.budget.executions
	reasonBudgetRunClock   reason = "budget_run_clock"  // policy.budget.runClock
	reasonConnections      reason = "connections"       // policy.maxConnections
	reasonDraining         reason = "draining"          // the gateway is stopping
	reasonQueueFull        reason = "queue_full"        // a backend's queue is at its bound
	reasonQueueWait        reason = "queue_wait"        // a backend's bound on waiting ran out
	reasonNoExecutor       reason = "no_executor"       // no executor server of a remote group could take it
	reasonBackend          reason = "backend"           // any other refusal of a backend
)

var allReasons = []reason{reasonRate, reasonConcurrency, reasonBudgetExecutions, reasonBudgetRunClock,
	reasonConnections, reasonDraining, reasonQueueFull, reasonQueueWait, reasonNoExecutor, reasonBackend}

// refusal is one turned-away request: why, the bound in words (the Limit of
// a TenantLimitError), and how long the caller should wait (0: nothing to
// say).
type refusal struct {
	reason     reason
	limit      string
	retryAfter time.Duration
}

// backendRefusal classifies a QUEUE_OVERFLOW that every member of a group
// answered.
func backendRefusal(err error) refusal {
	retry, _ := protocol.RetryAfterOf(err)
	var full *protocol.QueueOverflowError
	var wait *protocol.QueueTimeoutError
	var none *protocol.NoExecutorError
	switch {
	case errors.As(err, &none):
		return refusal{reason: reasonNoExecutor, limit: "no executor server could take it", retryAfter: retry}
	case errors.As(err, &full):
		return refusal{reason: reasonQueueFull, limit: count(full.Bound, "waiting execution", "waiting executions"), retryAfter: retry}
	case errors.As(err, &wait):
		return refusal{reason: reasonQueueWait, limit: count(wait.Waited.Milliseconds(), "ms of waiting", "ms of waiting"), retryAfter: retry}
	default:
		return refusal{reason: reasonBackend, limit: clip(err.Error(), 200), retryAfter: retry}
	}
}

// clip keeps a text from another process to a log line's worth.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Retry hints for a tenant at its concurrency cap.
const (
	// concurrencyRetryUnknown is the hint before any execution finished.
	concurrencyRetryUnknown = 100 * time.Millisecond
	concurrencyRetryMin     = time.Millisecond
	concurrencyRetryMax     = time.Minute
)

// concurrencyRetry estimates when one of inFlight executions finishes,
// from the tenant's average wall time (0: none finished yet): with their
// ends spread evenly, the first comes after about avg/(inFlight+1).
func concurrencyRetry(avg time.Duration, inFlight int64) time.Duration {
	if avg <= 0 {
		return concurrencyRetryUnknown
	}
	return min(max(avg/time.Duration(inFlight+1), concurrencyRetryMin), concurrencyRetryMax)
}

// wallAverage is an exponentially weighted moving average of a tenant's
// execution wall times: recent ones count most, so the estimate follows a
// workload that changes.
type wallAverage struct {
	mu  sync.Mutex
	avg time.Duration // 0 until the first sample
}

// wallWeight is the weight of each new sample.
const wallWeight = 0.2

func (w *wallAverage) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.avg == 0 {
		w.avg = max(d, 1)
		return
	}
	w.avg = max(w.avg+time.Duration(wallWeight*float64(d-w.avg)), 1)
}

func (w *wallAverage) get() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.avg
}

// refusalLogInterval is how often one tenant's refusals of one reason may
// write a log line; the rest are counted into the next line.
const refusalLogInterval = 10 * time.Second

// refusalLog lets the first refusal of each reason through to the log at
// once, then at most one per interval, so that a tenant hammering a bound
// cannot flood the log; the metric still counts every one.
type refusalLog struct {
	mu      sync.Mutex
	every   time.Duration
	windows map[reason]*logWindow
}

type logWindow struct {
	logged     time.Time // when the last line was written
	suppressed int       // refusals since, not logged
}

func newRefusalLog(every time.Duration) *refusalLog {
	return &refusalLog{every: every, windows: map[reason]*logWindow{}}
}

// note records a refusal at now. log says whether to write a line for it;
// suppressed is how many refusals of that reason went unlogged before it.
func (l *refusalLog) note(r reason, now time.Time) (log bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[r]
	if w == nil {
		l.windows[r] = &logWindow{logged: now}
		return true, 0
	}
	if now.Sub(w.logged) < l.every {
		w.suppressed++
		return false, 0
	}
	suppressed = w.suppressed
	w.logged, w.suppressed = now, 0
	return true, suppressed
}

// refuse counts a refusal and logs it, at most once per interval and
// reason.
func (t *tenant) refuse(r refusal) {
	t.m.refusals.WithLabelValues(t.name, string(r.reason)).Inc()
	if log, suppressed := t.refusals.note(r.reason, t.now()); log {
		t.log.Info("refused", "reason", string(r.reason), "limit", r.limit, "retryAfterMs", r.retryAfter.Milliseconds(), "suppressed", suppressed)
	}
}

// connectionRetryAfter is the wait a refused connection is told: nothing
// says when one of the tenant's open connections will close, so it is the
// shortest a Retry-After can name.
const connectionRetryAfter = time.Second

// refuseConnection answers a connection past the tenant's bound with 429,
// a Retry-After in whole seconds, and a body that names the bound.
func refuseConnection(w http.ResponseWriter, t *tenant, maxConns int) {
	t.refuse(refusal{reason: reasonConnections, limit: count(maxConns, "open connection", "open connections"), retryAfter: connectionRetryAfter})
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(connectionRetryAfter)))
	http.Error(w, fmt.Sprintf("tenant %q is at its bound of %s (policy.maxConnections); connect again after one of them closes",
		t.name, count(maxConns, "open connection", "open connections")), http.StatusTooManyRequests)
}

// retryAfterSeconds is d as a Retry-After header's whole seconds, rounded
// up and at least one.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}

// count writes n with the singular or plural noun.
func count[N int | int64 | float64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%v %s", n, one)
	}
	return fmt.Sprintf("%v %s", n, many)
}
