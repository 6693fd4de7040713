// Package serving holds what a gateway and an executor server both serve
// their operator, so that the two say the same by the same names: the
// execution metrics and log line, a worker pool's counters, the process's
// own series, the admin endpoints and the count a drain waits on.
package serving

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"iter"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/backends/poolstats"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
)

// InFlightGauge is the executions in flight by tenant.
func InFlightGauge() *prometheus.GaugeVec {
	return GaugeVec("codemode_executions_in_flight", "Executions in flight by tenant.", "tenant")
}

// ProcessCollectors are the series about the process itself that a gateway
// and an executor server both serve: which build runs (version is the one
// `gateway version` prints), the Go runtime's and the process's own.
func ProcessCollectors(version string) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "codemode_build_info",
			Help:        "Always 1; its labels say which build runs: the gateway's version, the Go version and the executor protocol version.",
			ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version(), "protocol_version": strconv.Itoa(protocol.ProtocolVersion)}},
			func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}

// ExecutionsCounter and WallHistogram are the execution metrics a gateway
// and an executor server share, by the labels each can tell.
func ExecutionsCounter(labels ...string) *prometheus.CounterVec {
	return CounterVec("codemode_executions_total",
		"Executions by tenant, backend group and outcome (ok, user_error, timeout, memory, payload, or a fault code).", labels...)
}

func WallHistogram(labels ...string) *prometheus.HistogramVec {
	return HistogramVec("codemode_execution_wall_seconds",
		"Wall-clock duration of executions as the gateway saw them, tool waits included.", SecondsBuckets(), labels...)
}

// CounterVec, GaugeVec and HistogramVec build the series name over labels.
func CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// SecondsBuckets span 0.5 ms to about two minutes by fours, for the
// durations of executions and tool calls.
func SecondsBuckets() []float64 { return prometheus.ExponentialBuckets(0.0005, 4, 10) }

// LogExecution writes the one log line of an execution, the same on a
// gateway and an executor server: with its connection and trace ids when
// ctx has them, and its wall time in milliseconds.
func LogExecution(ctx context.Context, log *slog.Logger, backend, outcome string, wall time.Duration, retained bool) {
	// The line's values (and its request id) are made only for a log that
	// takes it: at the level an operator under load sets, it takes none.
	if !log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	log.Info("execution", append(logIDs(ctx), "request", RequestID(), "backend", backend, "outcome", outcome, "wallMs", telemetry.Ms(wall), "retained", retained)...)
}

// PoolReporter is a member with a worker pool whose counters the metrics
// report: a local backend.
type PoolReporter interface {
	Stats() poolstats.Stats
}

// PoolCollector reports the counters of every local backend's worker pool
// as they are at scrape time.
type PoolCollector struct {
	pools iter.Seq2[string, PoolReporter]
	descs map[string]*prometheus.Desc
}

func NewPoolCollector(pools iter.Seq2[string, PoolReporter]) *PoolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"backend"}, nil)
	}
	return &PoolCollector{pools: pools, descs: map[string]*prometheus.Desc{
		"started":       d("codemode_workers_started_total", "Worker processes that became ready (replacements included)."),
		"crashed":       d("codemode_workers_crashed_total", "Deprecated, removed in the next release: despite its name it counts executions failed with WORKER_CRASHED, plus worker starts that failed. Use codemode_worker_deaths_total and codemode_executions_worker_lost_total."),
		"deaths":        prometheus.NewDesc("codemode_worker_deaths_total", "Worker processes that died other than by the pool retiring them or the gateway closing, by tenant (\"\" for a spare or a start) and cause: rss, timeout, protocol (the gateway killed it for its memory, a run stuck past its deadline, a frame it could not accept), rlimit (its runtime ran out of address space), crashed (it exited or was killed by anything else), start (it did not start).", []string{"backend", "tenant", "cause"}, nil),
		"lost":          prometheus.NewDesc("codemode_executions_worker_lost_total", "Executions failed with WORKER_CRASHED because their worker process died or did not start, by tenant.", []string{"backend", "tenant"}, nil),
		"cpu":           prometheus.NewDesc("codemode_worker_cpu_seconds_total", "CPU seconds (user and system) the tenant's worker processes burned, read by the gateway from the kernel, not from what the workers report (\"\" for spares no tenant held yet).", []string{"backend", "tenant"}, nil),
		"kills":         prometheus.NewDesc("codemode_worker_kills_total", "Runs a bound ended, by the layer that acted (timeout: a run held its worker past its deadline and the worker was killed; rss: the worker was killed for memory, by the RSS poll or for a run that ignored its memory cancel; rlimit: the address-space limit; heap: the in-worker watchdog ended the run alone).", []string{"backend", "layer"}, nil),
		"overflow":      d("codemode_queue_overflows_total", "Executions refused at their tenant's queue bound."),
		"queueTimeouts": d("codemode_queue_timeouts_total", "Executions refused after waiting the queue's bound on waiting."),
		"granted":       d("codemode_handles_granted_total", "Executions that retained their handles."),
		"expired":       d("codemode_handles_expired_total", "Retained executions closed at the idle bound."),
		"alive":         d("codemode_workers_alive", "Worker processes alive or being started."),
		"spare":         d("codemode_workers_spare", "Warm worker processes no tenant holds yet."),
		"busy":          d("codemode_workers_busy", "Worker processes hosting at least one execution."),
		"runs":          d("codemode_worker_runs", "Executions placed on worker processes, retained ones included."),
		"parked":        d("codemode_worker_runs_parked", "Executions waiting on their host (a tool call, an outbound request)."),
		"retained":      d("codemode_worker_runs_retained", "Retained executions living in worker processes."),
		"invocations":   d("codemode_handle_invocations_waiting", "Invocations of retained executions waiting for the one before them to finish."),
		"queued":        d("codemode_executions_queued", "Executions waiting for room."),
		"memory":        d("codemode_worker_memory_bytes", "Resident memory of the worker processes, as the pool last polled it."),
		"maxWorkers":    d("codemode_workers_max", "The ceiling of worker processes (maxWorkers)."),
		"poolTenants":   d("codemode_pool_tenants", "Tenants holding a worker process or waiting for one."),
		"tenantWorkers": prometheus.NewDesc("codemode_tenant_workers", "Worker processes each tenant holds; a worker process is only ever one tenant's.", []string{"backend", "tenant"}, nil),
	}}
}

func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, pool := range c.pools {
		s := pool.Stats()
		counter := func(key string, v int64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(c.descs[key], prometheus.CounterValue, float64(v), append([]string{name}, labels...)...)
		}
		counter("started", s.WorkersStarted)
		counter("crashed", s.WorkersCrashed)
		for _, d := range s.WorkerDeaths {
			counter("deaths", d.Count, d.Tenant, d.Cause)
		}
		for _, l := range s.ExecutionsLost {
			counter("lost", l.Count, l.Tenant)
		}
		for _, b := range s.WorkerCPU {
			ch <- prometheus.MustNewConstMetric(c.descs["cpu"], prometheus.CounterValue, b.CPU.Seconds(), name, b.Tenant)
		}
		counter("kills", s.TimeoutKills, "timeout")
		counter("kills", s.RSSKills, "rss")
		counter("kills", s.OutOfMemory, "rlimit")
		counter("kills", s.HeapLimits, "heap")
		counter("overflow", s.QueueOverflows)
		counter("queueTimeouts", s.QueueTimeouts)
		counter("granted", s.HandlesGranted)
		counter("expired", s.HandlesExpired)
		gauge := func(key string, v int) {
			ch <- prometheus.MustNewConstMetric(c.descs[key], prometheus.GaugeValue, float64(v), name)
		}
		gauge("alive", s.WorkersAlive)
		gauge("spare", s.Spares)
		gauge("busy", s.Busy)
		gauge("runs", s.Runs)
		gauge("parked", s.Parked)
		gauge("retained", s.Retained)
		gauge("invocations", s.Invocations)
		gauge("queued", s.Queued)
		gauge("memory", int(s.MemoryBytes))
		gauge("maxWorkers", s.MaxWorkers)
		gauge("poolTenants", s.Tenants)
		for tenant, pids := range s.TenantWorkers {
			ch <- prometheus.MustNewConstMetric(c.descs["tenantWorkers"], prometheus.GaugeValue, float64(len(pids)), name, tenant)
		}
	}
}

// Outcome classifies how an execution ended, for metrics and logs.
func Outcome(res *protocol.ExecuteResult, err error) string {
	if err != nil {
		if c := protocol.CodeOf(err); c != "" {
			return strings.ToLower(string(c))
		}
		return "error"
	}
	if !res.HasError {
		return "ok"
	}
	switch res.Failure {
	case protocol.FailureTimeout:
		return "timeout"
	case protocol.FailureMemory:
		return "memory"
	case protocol.FailurePayload:
		return "payload"
	}
	// What the program threw, or a failure its executor did not name.
	return "user_error"
}

// UsageMetrics add up, per tenant, what executions report they used
// (protocol.Usage), so that a platform can bill or budget its own users.
type UsageMetrics struct {
	cpu, runClock, toolCalls, requests, logBytes *prometheus.CounterVec
	peakHeap                                     *prometheus.HistogramVec
}

func NewUsageMetrics(register func(prometheus.Collector)) UsageMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		c := CounterVec(name, help, "tenant")
		register(c)
		return c
	}
	u := UsageMetrics{
		cpu:       counter("codemode_usage_cpu_seconds_total", "CPU time executions used, as their executors report it (the usage extension)."),
		runClock:  counter("codemode_usage_run_clock_seconds_total", "Run-clock time executions used, as their executors report it."),
		toolCalls: counter("codemode_usage_tool_calls_total", "Tool calls executions made, as their executors report them."),
		requests:  counter("codemode_usage_outbound_requests_total", "Requests executions sent with fetch, as their executors report them."),
		logBytes:  counter("codemode_usage_log_bytes_total", "Bytes of console text executions captured, as their executors report them."),
		peakHeap: HistogramVec("codemode_usage_peak_heap_bytes",
			"The largest heap each execution was charged, as its executor reports it.", prometheus.ExponentialBuckets(1<<20, 2, 10), "tenant"),
	}
	register(u.peakHeap)
	return u
}

// ObserveRetained adds what a retained execution used after its result
// (an invocation, its timers) to its tenant's time series; the execution's
// own peak was observed with its result.
func (u UsageMetrics) ObserveRetained(tenant string, x *protocol.Usage) {
	u.cpu.WithLabelValues(tenant).Add(x.CPU.Seconds())
	u.runClock.WithLabelValues(tenant).Add(x.RunClock.Seconds())
}

// Observe adds one execution's usage to its tenant's.
func (u UsageMetrics) Observe(tenant string, x *protocol.Usage) {
	u.cpu.WithLabelValues(tenant).Add(x.CPU.Seconds())
	u.runClock.WithLabelValues(tenant).Add(x.RunClock.Seconds())
	u.toolCalls.WithLabelValues(tenant).Add(float64(x.ToolCalls))
	u.requests.WithLabelValues(tenant).Add(float64(x.OutboundRequests))
	u.logBytes.WithLabelValues(tenant).Add(float64(x.LogBytes))
	u.peakHeap.WithLabelValues(tenant).Observe(float64(x.PeakHeapBytes))
}

type connectionIDKey struct{}

// WithConnectionID lets the calls of a connection name it in their log
// lines.
func WithConnectionID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, connectionIDKey{}, id)
}

// logIDs are the ids that join an execution's log line to its connection's
// and to its trace.
func logIDs(ctx context.Context) []any {
	var out []any
	if id, ok := ctx.Value(connectionIDKey{}).(string); ok {
		out = append(out, slog.String("connection", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		out = append(out, slog.String("trace", sc.TraceID().String()))
	}
	return out
}

// RequestID names one execution in the logs.
func RequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
