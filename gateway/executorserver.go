package gateway

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/protocol"
)

// ExecutorServerBackend is the backend label of an executor server's
// metrics and log lines: it serves its one embedded local backend.
const ExecutorServerBackend = "local"

// ExecutorServer is the executor `gateway serve --executor-server` serves:
// its local backend, with each execution logged and counted the way a
// gateway logs and counts its own, and an admin listener of its own.
type ExecutorServer struct {
	exec       PooledExecutor
	tenants    *MemberTenants
	log        *slog.Logger
	reg        *prometheus.Registry
	executions *prometheus.CounterVec
	wall       *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
	usage      usageMetrics
	stopping   atomic.Bool
}

// PooledExecutor is what an executor server serves: an executor that takes
// policy beside each request and reports its worker pool, as the local
// backend does.
type PooledExecutor interface {
	protocol.PolicyExecutor
	poolReporter
	Options() local.Options
}

// NewExecutorServer observes exec, whose Options.Shares is tenants.Share;
// closing the server closes exec. version is the build's, for
// codemode_build_info.
func NewExecutorServer(exec PooledExecutor, tenants *MemberTenants, log *slog.Logger, version string) *ExecutorServer {
	o := exec.Options()
	tenants.mu.Lock()
	tenants.memoryMB, tenants.maxWorkers = o.MemoryLimitMB, o.MaxWorkers
	tenants.mu.Unlock()
	s := &ExecutorServer{exec: exec, tenants: tenants, log: log, reg: prometheus.NewRegistry(),
		executions: executionsCounter("tenant", "backend", "outcome"),
		wall:       wallHistogram("tenant", "backend"),
		inFlight:   gaugeVec("codemode_executions_in_flight", "Executions in flight by tenant.", "tenant"),
	}
	pools := func(yield func(string, poolReporter) bool) { yield(ExecutorServerBackend, exec) }
	s.reg.MustRegister(s.executions, s.wall, s.inFlight, newPoolCollector(pools))
	s.reg.MustRegister(processCollectors(version)...)
	s.usage = newUsageMetrics(func(c prometheus.Collector) { s.reg.MustRegister(c) })
	return s
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (s *ExecutorServer) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return s.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor: the ExecutorApi server
// passes the hook that releases the stubs it kept, and the tenant's
// session its tenant (tenantExecutor), which labels the metrics.
func (s *ExecutorServer) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	tenant := p.Tenant
	s.inFlight.WithLabelValues(tenant).Inc()
	defer s.inFlight.WithLabelValues(tenant).Dec()
	// What a retained execution uses after its result is its tenant's too.
	after := p.Usage
	p.Usage = func(u *protocol.Usage) {
		s.usage.observeRetained(tenant, u)
		if after != nil {
			after(u)
		}
	}
	start := time.Now()
	res, err := s.exec.ExecuteWith(ctx, req, p)
	wall := time.Since(start)
	oc := outcome(res, err)
	s.executions.WithLabelValues(tenant, ExecutorServerBackend, oc).Inc()
	s.wall.WithLabelValues(tenant, ExecutorServerBackend).Observe(wall.Seconds())
	if err == nil && res.Usage != nil {
		s.usage.observe(tenant, res.Usage)
	}
	logExecution(ctx, s.log, ExecutorServerBackend, oc, wall, err == nil && res.ExecutionID != "")
	return res, err
}

// InvokeHandle implements protocol.Executor.
func (s *ExecutorServer) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return s.exec.InvokeHandle(ctx, id, handle, req)
}

// CloseHandles implements protocol.Executor.
func (s *ExecutorServer) CloseHandles(ctx context.Context, id string) error {
	return s.exec.CloseHandles(ctx, id)
}

// Close implements protocol.Executor: it closes the local backend.
func (s *ExecutorServer) Close() error { return s.exec.Close() }

// Stop fails readiness from now on, for a server about to shut down.
func (s *ExecutorServer) Stop() { s.stopping.Store(true) }

// AdminHandler serves the executor server's operator endpoints
// (NewAdminHandler): /readyz passes until Stop. It has no configuration
// file, so no /reload.
func (s *ExecutorServer) AdminHandler() http.Handler {
	return NewAdminHandler(AdminEndpoints{Registry: s.reg, NotReady: func() string {
		if s.stopping.Load() {
			return "stopping"
		}
		return ""
	}})
}

var _ protocol.PolicyExecutor = (*ExecutorServer)(nil)
