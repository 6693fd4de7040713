package gateway

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/supolka/codemode-gateway/protocol"
)

// metrics are the gateway's Prometheus collectors, on a registry of its own
// that the admin listener serves.
type metrics struct {
	reg *prometheus.Registry

	executions   *prometheus.CounterVec
	wall         *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	toolCalls    *prometheus.CounterVec
	toolLatency  *prometheus.HistogramVec
	outbound     *prometheus.CounterVec
	requests     *prometheus.CounterVec
	runClock     *prometheus.HistogramVec
	connections  *prometheus.GaugeVec
	authFailures *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	queueWait    *prometheus.HistogramVec
	cpuWait      *prometheus.HistogramVec
	usage        usageMetrics
	// collectors are every registered collector, for the test that checks
	// the dashboards and alerts name only series that exist.
	collectors []prometheus.Collector
}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c); m.collectors = append(m.collectors, c) }
	m.executions = executionsCounter("tenant", "backend", "outcome")
	m.wall = wallHistogram("tenant", "backend")
	m.inFlight = gaugeVec("codemode_executions_in_flight",
		"Executions in flight by tenant.", "tenant")
	m.toolCalls = counterVec("codemode_tool_calls_total",
		"Tool calls dispatched back to the caller, by tenant and whether the caller answered (ok) or failed (error).", "tenant", "result")
	m.toolLatency = histogramVec("codemode_tool_call_seconds",
		"Time the caller took to answer a tool call.", secondsBuckets(), "tenant")
	m.outbound = counterVec("codemode_outbound_total",
		"Executions by the outbound mode they ran with, after the operator's veto.", "tenant", "mode")
	m.requests = counterVec("codemode_outbound_requests_total",
		"Requests programs sent with fetch, by mode: stub (to the caller's outbound function) and native (performed by a local backend; remote backends do not report theirs).", "tenant", "mode")
	m.runClock = histogramVec("codemode_execution_run_clock_seconds",
		"Time executions spent on their run clock (host waits excluded unless countHostWaits), as local backends report it.", secondsBuckets(), "tenant", "backend")
	m.connections = gaugeVec("codemode_connections",
		"Open connections by tenant and route kind.", "tenant", "kind")
	m.authFailures = counterVec("codemode_auth_failures_total",
		"Requests refused before any upgrade, by tenant and reason (unauthenticated, forbidden, too_many_connections; the last is also codemode_refusals_total{reason=\"connections\"}). The tenant is the configured tenant the credential proved it belongs to (for unauthenticated, a JWT whose signature verified but whose claims failed), else unknown.", "tenant", "reason")
	m.refusals = counterVec("codemode_refusals_total",
		"Executions and connections turned away, by tenant and reason: rate, concurrency, budget_executions, budget_run_clock, connections, draining, and from a backend queue_full, queue_wait, no_executor or backend.", "tenant", "reason")
	m.queueWait = histogramVec("codemode_queue_wait_seconds",
		"Time executions waited for room in their backend before they started, as local backends report it.", prometheus.ExponentialBuckets(0.0001, 4, 10), "tenant", "backend")
	m.cpuWait = histogramVec("codemode_cpu_wait_seconds",
		"Time each execution's work waited for a CPU behind the tenant's other executions in its worker process, ready to run (part of its run clock), as local backends report it.", prometheus.ExponentialBuckets(0.0001, 4, 10), "tenant", "backend")
	for _, c := range []prometheus.Collector{m.executions, m.wall, m.inFlight, m.toolCalls, m.toolLatency, m.outbound, m.requests, m.runClock, m.connections, m.authFailures, m.refusals, m.queueWait, m.cpuWait} {
		f(c)
	}
	ps := g.handles.pins
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "codemode_pins", Help: "ExecutionIds pinned to a backend: the retained executions this replica holds."},
		func() float64 { return float64(ps.len()) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "codemode_pin_hits_total", Help: "Handle calls routed from the pin table."},
		func() float64 { return float64(ps.hits.Load()) }))
	f(&pinMisses{ps: ps, desc: prometheus.NewDesc("codemode_pin_misses_total", "Handle calls whose id was not pinned here (routed from the id, or refused), by the tenant that called.", []string{"tenant"}, nil)})
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "codemode_pin_evictions_total", Help: "Pins evicted past the table's size or a tenant's handle bound; their handles were closed."},
		func() float64 { return float64(ps.evictions.Load()) }))
	f(&healthCollector{g: g, desc: prometheus.NewDesc("codemode_backend_healthy", "1 when a backend member passes its health check.", []string{"backend", "member"}, nil)})
	f(&discoveryCollector{g: g, desc: prometheus.NewDesc("codemode_discovery_failures_total",
		"Resolutions of a remote group's discover name that changed nothing, by reason: error (the lookup failed; the members stay) or empty (no address; the members stay for emptyGrace).", []string{"backend", "reason"}, nil)})
	f(newPoolCollector(g.localPools))
	for _, c := range processCollectors(g.version) {
		f(c)
	}
	m.usage = newUsageMetrics(f)
	return m
}

// processCollectors are the series about the process itself that a gateway
// and an executor server both serve: which build runs (version is the one
// `gateway version` prints), the Go runtime's and the process's own.
func processCollectors(version string) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "codemode_build_info",
			Help:        "Always 1; its labels say which build runs: the gateway's version, the Go version and the executor protocol version.",
			ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version(), "protocol_version": strconv.Itoa(protocol.ProtocolVersion)}},
			func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}

// executionsCounter and wallHistogram are the execution metrics a gateway
// and an executor server share, by the labels each can tell.
func executionsCounter(labels ...string) *prometheus.CounterVec {
	return counterVec("codemode_executions_total",
		"Executions by tenant, backend group and outcome (ok, user_error, timeout, memory, payload, or a fault code).", labels...)
}

func wallHistogram(labels ...string) *prometheus.HistogramVec {
	return histogramVec("codemode_execution_wall_seconds",
		"Wall-clock duration of executions as the gateway saw them, tool waits included.", secondsBuckets(), labels...)
}

// counterVec, gaugeVec and histogramVec build the series name over labels.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// secondsBuckets span 0.5 ms to about two minutes by fours, for the
// durations of executions and tool calls.
func secondsBuckets() []float64 { return prometheus.ExponentialBuckets(0.0005, 4, 10) }

// logExecution writes the one log line of an execution, the same on a
// gateway and an executor server: with its connection and trace ids when
// ctx has them, and its wall time in milliseconds.
func logExecution(ctx context.Context, log *slog.Logger, backend, outcome string, wall time.Duration, retained bool) {
	log.Info("execution", append(logIDs(ctx), "request", requestID(), "backend", backend, "outcome", outcome, "wallMs", millis(wall), "retained", retained)...)
}

// localPools lists the gateway's local backends by group name.
func (g *Gateway) localPools(yield func(string, poolReporter) bool) {
	for _, grp := range g.groups {
		for _, m := range grp.current() {
			if m.pool != nil && !yield(grp.name, m.pool) {
				return
			}
		}
	}
}

// poolCollector reports the counters of every local backend's worker pool
// as they are at scrape time.
type poolCollector struct {
	pools iter.Seq2[string, poolReporter]
	descs map[string]*prometheus.Desc
}

func newPoolCollector(pools iter.Seq2[string, poolReporter]) *poolCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"backend"}, nil)
	}
	return &poolCollector{pools: pools, descs: map[string]*prometheus.Desc{
		"started":       d("codemode_workers_started_total", "Worker processes that became ready (replacements included)."),
		"crashed":       d("codemode_workers_crashed_total", "Deprecated, removed in the next release: despite its name it counts executions failed with WORKER_CRASHED, plus worker starts that failed. Use codemode_worker_deaths_total and codemode_executions_worker_lost_total."),
		"deaths":        prometheus.NewDesc("codemode_worker_deaths_total", "Worker processes that died other than by the pool retiring them or the gateway closing, by tenant (\"\" for a spare or a start) and cause: rss, timeout, protocol (the gateway killed it for its memory, a run stuck past its deadline, a frame it could not accept), rlimit (its runtime ran out of address space), crashed (it exited or was killed by anything else), start (it did not start).", []string{"backend", "tenant", "cause"}, nil),
		"lost":          prometheus.NewDesc("codemode_executions_worker_lost_total", "Executions failed with WORKER_CRASHED because their worker process died or did not start, by tenant.", []string{"backend", "tenant"}, nil),
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

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
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

// pinMisses reports the pin table's misses by tenant at scrape time.
type pinMisses struct {
	ps   *pins
	desc *prometheus.Desc
}

func (c *pinMisses) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *pinMisses) Collect(ch chan<- prometheus.Metric) {
	for tenant, n := range c.ps.missesByTenant() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), tenant)
	}
}

// healthCollector reports each member's health as it is at scrape time.
type healthCollector struct {
	g    *Gateway
	desc *prometheus.Desc
}

func (h *healthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, grp := range h.g.groups {
		for i, m := range grp.current() {
			v := 0.0
			if m.healthy.Load() {
				v = 1
			}
			// A remote member is labelled by its place in the group's
			// list, as the operator wrote it; its name is for ids.
			label := m.name
			if m.remote {
				label = fmt.Sprintf("%s/%d", grp.name, i)
			}
			ch <- prometheus.MustNewConstMetric(h.desc, prometheus.GaugeValue, v, grp.name, label)
		}
	}
}

// discoveryCollector reports the failed resolutions of each remote group
// that finds its members in DNS.
type discoveryCollector struct {
	g    *Gateway
	desc *prometheus.Desc
}

func (d *discoveryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *discoveryCollector) Collect(ch chan<- prometheus.Metric) {
	for _, grp := range d.g.groups {
		if disc := grp.discovery; disc != nil {
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(disc.failures.Load()), grp.name, "error")
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(disc.empties.Load()), grp.name, "empty")
		}
	}
}

// outcome classifies how an execution ended, for metrics and logs.
func outcome(res *protocol.ExecuteResult, err error) string {
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

// observeDispatch counts and times the tool calls of one execution.
func (m *metrics) observeDispatch(tenant string, d protocol.DispatchFunc) protocol.DispatchFunc {
	if d == nil {
		return nil
	}
	return func(ctx context.Context, provider, tool, args string) (string, error) {
		start := time.Now()
		out, err := d(ctx, provider, tool, args)
		m.toolLatency.WithLabelValues(tenant).Observe(time.Since(start).Seconds())
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.toolCalls.WithLabelValues(tenant, result).Inc()
		return out, err
	}
}

// observeOutbound counts the requests sent to a caller's outbound function.
func (m *metrics) observeOutbound(tenant string, fn protocol.OutboundFunc) protocol.OutboundFunc {
	return func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		m.requests.WithLabelValues(tenant, "stub").Inc()
		return fn(ctx, req)
	}
}

// reportsQueueWait: a member with a worker pool (the local backend)
// measures how long each execution waited for it; a remote one does not say.
func reportsQueueWait(m *member) bool {
	return m != nil && m.pool != nil
}

// usageMetrics add up, per tenant, what executions report they used
// (protocol.Usage), so that a platform can bill or budget its own users.
type usageMetrics struct {
	cpu, runClock, toolCalls, requests, logBytes *prometheus.CounterVec
	peakHeap                                     *prometheus.HistogramVec
}

func newUsageMetrics(register func(prometheus.Collector)) usageMetrics {
	counter := func(name, help string) *prometheus.CounterVec {
		c := counterVec(name, help, "tenant")
		register(c)
		return c
	}
	u := usageMetrics{
		cpu:       counter("codemode_usage_cpu_seconds_total", "CPU time executions used, as their executors report it (the usage extension)."),
		runClock:  counter("codemode_usage_run_clock_seconds_total", "Run-clock time executions used, as their executors report it."),
		toolCalls: counter("codemode_usage_tool_calls_total", "Tool calls executions made, as their executors report them."),
		requests:  counter("codemode_usage_outbound_requests_total", "Requests executions sent with fetch, as their executors report them."),
		logBytes:  counter("codemode_usage_log_bytes_total", "Bytes of console text executions captured, as their executors report them."),
		peakHeap: histogramVec("codemode_usage_peak_heap_bytes",
			"The largest heap each execution was charged, as its executor reports it.", prometheus.ExponentialBuckets(1<<20, 2, 10), "tenant"),
	}
	register(u.peakHeap)
	return u
}

// observeRetained adds what a retained execution used after its result
// (an invocation, its timers) to its tenant's time series; the execution's
// own peak was observed with its result.
func (u usageMetrics) observeRetained(tenant string, x *protocol.Usage) {
	u.cpu.WithLabelValues(tenant).Add(x.CPU.Seconds())
	u.runClock.WithLabelValues(tenant).Add(x.RunClock.Seconds())
}

// observe adds one execution's usage to its tenant's.
func (u usageMetrics) observe(tenant string, x *protocol.Usage) {
	u.cpu.WithLabelValues(tenant).Add(x.CPU.Seconds())
	u.runClock.WithLabelValues(tenant).Add(x.RunClock.Seconds())
	u.toolCalls.WithLabelValues(tenant).Add(float64(x.ToolCalls))
	u.requests.WithLabelValues(tenant).Add(float64(x.OutboundRequests))
	u.logBytes.WithLabelValues(tenant).Add(float64(x.LogBytes))
	u.peakHeap.WithLabelValues(tenant).Observe(float64(x.PeakHeapBytes))
}
