package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/supolka/codemode-gateway/internal/serving"
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
	usage        serving.UsageMetrics
	// collectors are every registered collector, for the test that checks
	// the dashboards and alerts name only series that exist.
	collectors []prometheus.Collector
}

func newMetrics(g *Gateway) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c); m.collectors = append(m.collectors, c) }
	m.executions = serving.ExecutionsCounter("tenant", "backend", "outcome")
	m.wall = serving.WallHistogram("tenant", "backend")
	m.inFlight = serving.InFlightGauge()
	m.toolCalls = serving.CounterVec("codemode_tool_calls_total",
		"Tool calls dispatched back to the caller, by tenant and whether the caller answered (ok) or failed (error).", "tenant", "result")
	m.toolLatency = serving.HistogramVec("codemode_tool_call_seconds",
		"Time the caller took to answer a tool call.", serving.SecondsBuckets(), "tenant")
	m.outbound = serving.CounterVec("codemode_outbound_total",
		"Executions by the outbound mode they ran with, after the operator's veto.", "tenant", "mode")
	m.requests = serving.CounterVec("codemode_outbound_requests_total",
		"Requests programs sent with fetch, by mode: stub (to the caller's outbound function) and native (performed by a local backend; remote backends do not report theirs).", "tenant", "mode")
	m.runClock = serving.HistogramVec("codemode_execution_run_clock_seconds",
		"Time executions spent on their run clock (host waits excluded unless countHostWaits), as local backends report it.", serving.SecondsBuckets(), "tenant", "backend")
	m.connections = serving.GaugeVec("codemode_connections",
		"Open connections by tenant and route kind.", "tenant", "kind")
	m.authFailures = serving.CounterVec("codemode_auth_failures_total",
		"Requests refused before any upgrade, by tenant and reason (unauthenticated, forbidden, too_many_connections; the last is also codemode_refusals_total{reason=\"connections\"}). The tenant is the configured tenant the credential proved it belongs to (for unauthenticated, a JWT whose signature verified but whose claims failed), else unknown.", "tenant", "reason")
	m.refusals = serving.CounterVec("codemode_refusals_total",
		"Executions and connections turned away, by tenant and reason: rate, concurrency, budget_executions, budget_run_clock, connections, draining, and from a backend queue_full, queue_wait, no_executor or backend.", "tenant", "reason")
	m.queueWait = serving.HistogramVec("codemode_queue_wait_seconds",
		"Time executions waited for room in their backend before they started, as local backends report it.", prometheus.ExponentialBuckets(0.0001, 4, 10), "tenant", "backend")
	m.cpuWait = serving.HistogramVec("codemode_cpu_wait_seconds",
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
	f(serving.NewPoolCollector(g.localPools))
	for _, c := range serving.ProcessCollectors(g.version) {
		f(c)
	}
	m.usage = serving.NewUsageMetrics(f)
	return m
}

// localPools lists the gateway's local backends by group name.
func (g *Gateway) localPools(yield func(string, serving.PoolReporter) bool) {
	for _, grp := range g.groups {
		for _, m := range grp.current() {
			if m.pool != nil && !yield(grp.name, m.pool) {
				return
			}
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
			if m.health != nil {
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
