// Package executorserver is what `gateway serve --executor-server` serves:
// one local backend that a gateway's remote group uses as a member, its
// tenants kept apart as a local group keeps them, reached only with a
// member key.
package executorserver

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/internal/serving"
	"github.com/supolka/codemode-gateway/protocol"
)

// Backend is the backend label of an executor server's metrics and log
// lines: it serves its one embedded local backend.
const Backend = "local"

// Server is the executor `gateway serve --executor-server` serves: its
// local backend, with each execution logged and counted the way a gateway
// logs and counts its own, and an admin listener of its own.
type Server struct {
	exec       PooledExecutor
	tenants    *MemberTenants
	log        *slog.Logger
	reg        *prometheus.Registry
	executions *prometheus.CounterVec
	wall       *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
	usage      serving.UsageMetrics
	// draining is set by Drain: readiness fails and new executions are
	// refused with the retryable ExecutorDrainingError.
	draining atomic.Bool
	// runs and calls count the executions and the calls on retained ones
	// in flight, which a drain waits for.
	runs, calls serving.InFlight
}

// PooledExecutor is what an executor server serves: an executor that takes
// policy beside each request and reports its worker pool, as the local
// backend does.
type PooledExecutor interface {
	protocol.PolicyExecutor
	serving.PoolReporter
	Options() local.Options
}

// New observes exec, whose Options.Shares is tenants.Share and
// Options.NativeOf tenants.Native;
// closing the server closes exec. version is the build's, for
// codemode_build_info.
func New(exec PooledExecutor, tenants *MemberTenants, log *slog.Logger, version string) *Server {
	o := exec.Options()
	tenants.mu.Lock()
	tenants.memoryMB, tenants.maxWorkers, tenants.own = o.MemoryLimitMB, o.MaxWorkers, o.Native
	tenants.mu.Unlock()
	s := &Server{exec: exec, tenants: tenants, log: log, reg: prometheus.NewRegistry(),
		executions: serving.ExecutionsCounter("tenant", "backend", "outcome"),
		wall:       serving.WallHistogram("tenant", "backend"),
		inFlight:   serving.InFlightGauge(),
	}
	pools := func(yield func(string, serving.PoolReporter) bool) { yield(Backend, exec) }
	s.reg.MustRegister(s.executions, s.wall, s.inFlight, serving.NewPoolCollector(pools))
	s.reg.MustRegister(serving.ProcessCollectors(version)...)
	s.usage = serving.NewUsageMetrics(func(c prometheus.Collector) { s.reg.MustRegister(c) })
	return s
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (s *Server) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return s.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor: the ExecutorApi server
// passes the hook that releases the stubs it kept, and the tenant's
// session its tenant (tenantExecutor), which labels the metrics.
func (s *Server) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
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
		s.usage.ObserveRetained(tenant, u)
		if after != nil {
			after(u)
		}
	}
	start := time.Now()
	res, err := s.exec.ExecuteWith(ctx, req, p)
	wall := time.Since(start)
	oc := serving.Outcome(res, err)
	s.executions.WithLabelValues(tenant, Backend, oc).Inc()
	s.wall.WithLabelValues(tenant, Backend).Observe(wall.Seconds())
	if err == nil && res.Usage != nil {
		s.usage.Observe(tenant, res.Usage)
	}
	serving.LogExecution(ctx, s.log, Backend, oc, wall, err == nil && res.ExecutionID != "")
	return res, err
}

// InvokeHandle implements protocol.Executor.
func (s *Server) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	s.calls.Add(1)
	defer s.calls.Add(-1)
	return s.exec.InvokeHandle(ctx, id, handle, req)
}

// CloseHandles implements protocol.Executor.
func (s *Server) CloseHandles(ctx context.Context, id string) error {
	s.calls.Add(1)
	defer s.calls.Add(-1)
	return s.exec.CloseHandles(ctx, id)
}

// Close implements protocol.Executor: it closes the local backend.
func (s *Server) Close() error { return s.exec.Close() }

// drainPoll is how often a drain asks the local backend whether retained
// executions are left: it closes them on its own (closeHandles, the idle
// bound, a crash) and tells no one.
const drainPoll = 50 * time.Millisecond

// Drain readies the server to shut down: from now on readiness fails and
// new executions are refused with the retryable ExecutorDrainingError,
// while the executions in flight, the retained executions and the calls on
// them go on. It returns once none is left, or with ctx's error at the
// drain bound; closing the server then ends what remains.
func (s *Server) Drain(ctx context.Context) error {
	s.draining.Store(true)
	s.log.Info("draining: new executions are refused, waiting for those in flight and the retained ones")
	for {
		if !serving.WaitClosed(ctx, s.runs.Idle()) || !serving.WaitClosed(ctx, s.calls.Idle()) {
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
func (s *Server) drainEnded(ctx context.Context) error {
	s.log.Warn("drain bound reached: what is left is closed", "executions", s.runs.Load(), "retained", s.exec.Stats().Retained)
	return ctx.Err()
}

// AdminHandler serves the executor server's operator endpoints
// (NewAdminHandler): /readyz passes until Drain. It has no configuration
// file, so no /reload. A non-empty token is asked of every request but the
// probes' reads.
func (s *Server) AdminHandler(token string) http.Handler {
	return serving.NewAdminHandler(serving.AdminEndpoints{Registry: s.reg, Token: func() string { return token }, NotReady: func() string {
		if s.draining.Load() {
			return "draining"
		}
		return ""
	}})
}

var _ protocol.PolicyExecutor = (*Server)(nil)
