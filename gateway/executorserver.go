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
	// draining is set by Drain: readiness fails and new executions are
	// refused with the retryable ExecutorDrainingError.
	draining atomic.Bool
	// runs and calls count the executions and the calls on retained ones
	// in flight, which a drain waits for.
	runs, calls inFlightCount
}

// PooledExecutor is what an executor server serves: an executor that takes
// policy beside each request and reports its worker pool, as the local
// backend does.
type PooledExecutor interface {
	protocol.PolicyExecutor
	poolReporter
	Options() local.Options
}

// NewExecutorServer observes exec, whose Options.Shares is tenants.Share
// and Options.NativeOf tenants.Native;
// closing the server closes exec. version is the build's, for
// codemode_build_info.
func NewExecutorServer(exec PooledExecutor, tenants *MemberTenants, log *slog.Logger, version string) *ExecutorServer {
	o := exec.Options()
	tenants.mu.Lock()
	tenants.memoryMB, tenants.maxWorkers, tenants.own = o.MemoryLimitMB, o.MaxWorkers, o.Native
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
	// Counted before the check, so that a drain which saw no execution in
	// flight cannot miss one that slipped past the check.
	s.runs.Add(1)
	defer s.runs.Add(-1)
	if s.draining.Load() {
		return nil, protocol.NewExecutorDrainingError()
	}
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
	s.calls.Add(1)
	defer s.calls.Add(-1)
	return s.exec.InvokeHandle(ctx, id, handle, req)
}

// CloseHandles implements protocol.Executor.
func (s *ExecutorServer) CloseHandles(ctx context.Context, id string) error {
	s.calls.Add(1)
	defer s.calls.Add(-1)
	return s.exec.CloseHandles(ctx, id)
}

// Close implements protocol.Executor: it closes the local backend.
func (s *ExecutorServer) Close() error { return s.exec.Close() }

// drainPoll is how often a drain asks the local backend whether retained
// executions are left: it closes them on its own (closeHandles, the idle
// bound, a crash) and tells no one.
const drainPoll = 50 * time.Millisecond

// Drain readies the server to shut down: from now on readiness fails and
// new executions are refused with the retryable ExecutorDrainingError,
// while the executions in flight, the retained executions and the calls on
// them go on. It returns once none is left, or with ctx's error at the
// drain bound; closing the server then ends what remains.
func (s *ExecutorServer) Drain(ctx context.Context) error {
	s.draining.Store(true)
	s.log.Info("draining: new executions are refused, waiting for those in flight and the retained ones")
	for {
		if !waitClosed(ctx, s.runs.idle()) || !waitClosed(ctx, s.calls.idle()) {
			return s.drainEnded(ctx)
		}
		st := s.exec.Stats()
		if st.Retained == 0 && s.runs.Load() == 0 && s.calls.Load() == 0 {
			s.log.Info("drained")
			return nil
		}
		select {
		case <-ctx.Done():
			return s.drainEnded(ctx)
		case <-time.After(drainPoll):
		}
	}
}

// drainEnded says what the drain bound left behind.
func (s *ExecutorServer) drainEnded(ctx context.Context) error {
	s.log.Warn("drain bound reached: what is left is closed", "executions", s.runs.Load(), "retained", s.exec.Stats().Retained)
	return ctx.Err()
}

// AdminHandler serves the executor server's operator endpoints
// (NewAdminHandler): /readyz passes until Drain. It has no configuration
// file, so no /reload. A non-empty token is asked of every request but the
// probes' reads.
func (s *ExecutorServer) AdminHandler(token string) http.Handler {
	return NewAdminHandler(AdminEndpoints{Registry: s.reg, Token: func() string { return token }, NotReady: func() string {
		if s.draining.Load() {
			return "draining"
		}
		return ""
	}})
}

var _ protocol.PolicyExecutor = (*ExecutorServer)(nil)
