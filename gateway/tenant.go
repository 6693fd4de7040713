package gateway

import (
	"context"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/internal/serving"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

var _ protocol.PolicyExecutor = (*tenant)(nil)

// tenant is one application's view of the gateway: an Executor that applies
// its policy, runs on its backend group, and pins the executionIds it is
// granted. Its ExecutorApi server is shared by all its connections, so
// handles granted on one connection are reachable from the next.
type tenant struct {
	name string
	// settings change on a reload; each call reads them once.
	settings atomic.Pointer[tenantSettings]
	routes   *handleRoutes
	log      *slog.Logger
	m        *metrics
	// draining is the gateway's: once set, new executions are turned away.
	draining *atomic.Bool

	// running is what the concurrency bound counts: an execution leaves it
	// when the backend returns, before its answer is written, so a client
	// that sends its next call on the answer never finds its own last call
	// still counted. unanswered is what a drain waits on: an execution leaves
	// it once its answer is queued for the client.
	running     atomic.Int64
	unanswered  serving.InFlight
	connections atomic.Int64
	api         *executorapi.Server

	// now is the clock of the rate limiter, budgets and refusal log.
	now      func() time.Time
	refusals *refusalLog
	wall     wallAverage // estimates when an execution in flight ends
}

// tenantSettings are what a reload may change.
type tenantSettings struct {
	policy     config.Policy
	group      *group
	limiter    *rate.Limiter  // nil: no rate limit
	budget     *budget        // nil: no budget
	nativeDeny []netip.Prefix // the policy's nativeDeny, parsed
}

func newTenant(t config.Tenant, g *group, gw *Gateway) *tenant {
	tn := &tenant{name: t.Name, routes: gw.handles, log: gw.log.With("tenant", t.Name), m: gw.metrics, draining: &gw.draining,
		now: gw.now, refusals: newRefusalLog(refusalLogInterval)}
	// Every reason reads 0 from the start, so a rate over it is defined.
	for _, r := range allReasons {
		gw.metrics.refusals.WithLabelValues(t.Name, string(r))
	}
	tn.configure(t, g)
	tn.api = executorapi.NewServer(tn, executorapi.ServerOptions{Tracing: gw.tracing})
	return tn
}

// configure applies a tenant's configuration. The rate limiter starts full
// again only when the rate itself changed, and a budget's bucket only when
// its own bound changed.
func (t *tenant) configure(c config.Tenant, g *group) {
	s := &tenantSettings{policy: c.Policy, group: g, nativeDeny: c.Policy.NativeDenyRanges}
	old := t.settings.Load()
	switch {
	case c.Policy.Rate <= 0:
	case old != nil && old.limiter != nil && old.policy.Rate == c.Policy.Rate && old.policy.Burst == c.Policy.Burst:
		s.limiter = old.limiter
	default:
		s.limiter = rate.NewLimiter(rate.Limit(c.Policy.Rate), c.Policy.Burst)
	}
	var oldBudget *budget
	if old != nil {
		oldBudget = old.budget
	}
	s.budget = newBudget(c.Policy.Budget, oldBudget, t.now())
	t.settings.Store(s)
}

// admit holds one execution to the tenant's bounds: the rate, the
// concurrency cap and the budget, in that order. On success the execution
// is counted in flight and paid for, and release undoes the count; a
// refusal takes back what the earlier bounds took.
func (t *tenant) admit(set *tenantSettings) (release func(), _ *refusal) {
	now := t.now()
	var rsv *rate.Reservation
	if set.limiter != nil {
		rsv = set.limiter.ReserveN(now, 1)
		if wait := rsv.DelayFrom(now); !rsv.OK() || wait > 0 {
			rsv.CancelAt(now)
			if !rsv.OK() {
				wait = time.Second // unreachable: burst is at least one
			}
			return nil, &refusal{reason: reasonRate, retryAfter: wait,
				limit: protocol.RateBound(set.policy.Rate)}
		}
	}
	unreserve := func() {
		if rsv != nil {
			rsv.CancelAt(now)
		}
	}
	if n := t.running.Add(1); n > int64(set.policy.MaxConcurrent) {
		t.running.Add(-1)
		unreserve()
		return nil, &refusal{reason: reasonConcurrency, retryAfter: concurrencyRetry(t.wall.get(), n-1),
			limit: protocol.InFlightBound(set.policy.MaxConcurrent)}
	}
	if r := set.budget.admit(now); r != nil {
		t.running.Add(-1)
		unreserve()
		return nil, r
	}
	return func() { t.running.Add(-1) }, nil
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (t *tenant) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return t.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor: it admits the execution
// under the tenant's bounds and runs it on the tenant's group, under the
// tenant's policy on top of the caller's (policyFor). The caller's
// HandlesClosed (the ExecutorApi server's, which releases the stubs it
// kept) hears of a close under the id this gateway granted.
func (t *tenant) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, caller protocol.Policy) (*protocol.ExecuteResult, error) {
	if t.draining.Load() {
		t.refuse(refusal{reason: reasonDraining, limit: "a drain for a restart"})
		return nil, protocol.NewDrainingError()
	}
	set := t.settings.Load()
	release, ref := t.admit(set)
	if ref != nil {
		t.refuse(*ref)
		return nil, protocol.NewTenantLimitError(t.name, ref.limit, ref.retryAfter)
	}
	// Deferred in this order so that they run in the reverse: the bound's
	// slot is free before the gauge reads zero, and both before the answer.
	t.m.inFlight.WithLabelValues(t.name).Inc()
	defer t.m.inFlight.WithLabelValues(t.name).Dec()
	// Counted out of what a drain waits on once the answer is queued for the
	// client, not when the backend returns: a drain that closes the sessions
	// at zero then still delivers every result.
	t.unanswered.Add(1)
	defer whenAnswered(ctx, func() { t.unanswered.Add(-1) })
	defer release()

	r := *req // the caller's request is not ours to change
	p := set.policyFor(t.name, caller)
	// outer is the id this gateway granted, known once the backend answered
	// (granted closes then).
	var outer string
	if req.RetainHandles {
		granted := make(chan struct{})
		defer close(granted)
		// The pin goes when the backend closes the handles itself (the
		// idle bound, a crash), not only on the next call that finds them
		// gone, and the caller hears of it under the id it was given.
		p.HandlesClosed = func(string) {
			<-granted
			if outer == "" {
				return
			}
			t.routes.pins.drop(outer)
			if caller.HandlesClosed != nil {
				caller.HandlesClosed(outer)
			}
		}
		// What the retained execution uses after its result (invocations,
		// timers between them) is the tenant's too: its usage series and
		// its run-clock budget.
		p.Usage = func(u *protocol.Usage) {
			t.m.usage.ObserveRetained(t.name, u)
			t.settings.Load().budget.charge(t.now(), u.RunClock)
			if caller.Usage != nil {
				caller.Usage(u)
			}
		}
	}
	r.Timeout = set.capTimeout(req.Timeout)
	if r.Outbound.Mode() == protocol.OutboundNative && !(set.policy.NativeOutbound && set.group.nativeOutbound) {
		// The operator's veto: a request that asked the executor to fetch
		// for itself gets no network at all.
		r.Outbound = protocol.NoOutbound()
	}
	mode := r.Outbound.Mode()
	t.m.outbound.WithLabelValues(t.name, string(mode)).Inc()
	if mode == protocol.OutboundStub {
		r.Outbound = protocol.OutboundVia(t.m.observeOutbound(t.name, r.Outbound.Func()))
	}
	r.Dispatch = t.m.observeDispatch(t.name, r.Dispatch)

	start := time.Now()
	res, m, err := set.group.execute(ctx, &r, p)
	wall := time.Since(start)
	if protocol.CodeOf(err) == protocol.CodeQueueOverflow {
		// Every member turned it away: it never started, so it costs the
		// budget nothing and says nothing about how long runs take.
		set.budget.unadmit(t.now())
		t.refuse(backendRefusal(err))
	} else {
		t.wall.add(wall)
	}
	if err == nil {
		t.settings.Load().budget.charge(t.now(), runClockOf(res))
	}
	oc := serving.Outcome(res, err)
	t.m.executions.WithLabelValues(t.name, set.group.name, oc).Inc()
	t.m.wall.WithLabelValues(t.name, set.group.name).Observe(wall.Seconds())
	if err == nil && runClockOf(res) > 0 {
		t.m.runClock.WithLabelValues(t.name, set.group.name).Observe(runClockOf(res).Seconds())
	}
	if err == nil && res.Usage != nil {
		t.m.usage.Observe(t.name, res.Usage)
	}
	if err == nil && reportsQueueWait(m) {
		t.m.queueWait.WithLabelValues(t.name, set.group.name).Observe(res.QueueWait.Seconds())
		t.m.cpuWait.WithLabelValues(t.name, set.group.name).Observe(res.CPUWait.Seconds())
	}
	if err == nil && mode == protocol.OutboundNative && res.OutboundRequests > 0 {
		t.m.requests.WithLabelValues(t.name, "native").Add(float64(res.OutboundRequests))
	}
	member := ""
	if m != nil {
		member = m.label
	}
	if telemetry.Recording(ctx) {
		telemetry.Execution(ctx, telemetry.Tenant.String(t.name), telemetry.Backend.String(set.group.name), telemetry.Member.String(member), telemetry.Outcome.String(oc))
	}
	logged := member
	if logged == "" {
		logged = set.group.name // no member took it: the group it was for
	}
	serving.LogExecution(ctx, t.log, logged, oc, wall, err == nil && res.ExecutionID != "")
	if err != nil {
		return nil, err
	}
	if res.ExecutionID != "" {
		out := *res
		out.ExecutionID = t.routes.grant(m, t.name, res.ExecutionID, set.policy.MaxHandles)
		outer = out.ExecutionID
		return &out, nil
	}
	return res, nil
}

// runClockOf is the run clock res reports: a local backend's own field,
// or, from a remote member, the run clock of its usage (the wire carries
// no other).
func runClockOf(res *protocol.ExecuteResult) time.Duration {
	if res.RunClock == 0 && res.Usage != nil {
		return res.Usage.RunClock
	}
	return res.RunClock
}

// policyFor is the policy a member runs one of the tenant's executions
// under: the tenant's name, the lower of the caller's and the tenant's
// memory limits, and both their denied ranges. The hook is the caller's
// to set.
func (s *tenantSettings) policyFor(tenant string, caller protocol.Policy) protocol.Policy {
	p := protocol.Policy{Tenant: tenant, MemoryLimitMB: caller.MemoryLimitMB, NativeDeny: caller.NativeDeny}
	if m := s.policy.MemoryMB; m > 0 && (p.MemoryLimitMB == 0 || m < p.MemoryLimitMB) {
		p.MemoryLimitMB = m
	}
	if len(s.nativeDeny) > 0 {
		p.NativeDeny = append(append([]netip.Prefix(nil), caller.NativeDeny...), s.nativeDeny...)
	}
	return p
}

// capTimeout holds a request's timeout to the tenant's cap: absent stays
// absent when the backend's default is inside the cap (the backend applies
// it), a null timeout lifts to the cap, a number is held to it.
func (s *tenantSettings) capTimeout(to protocol.Timeout) protocol.Timeout {
	limit := float64(s.policy.TimeoutMs)
	switch {
	case to.IsZero():
		if d := float64(s.group.defaultTimeoutMs); d > limit {
			return protocol.TimeoutOf(limit)
		}
		return to
	case to.IsLifted():
		return protocol.TimeoutOf(limit)
	default:
		if ms, _ := to.Millis(); ms > limit {
			return protocol.TimeoutOf(limit)
		}
		return to
	}
}

// InvokeHandle implements protocol.Executor: it routes to the backend that
// holds the handles, for the tenant that was granted them only.
func (t *tenant) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	p, ok := t.routes.find(id, t.name)
	if !ok {
		return protocol.OutboundResponse{}, protocol.NewHandlesClosedError(id)
	}
	defer p.member.handleCall()()
	resp, err := p.member.execFor(t.name).InvokeHandle(ctx, p.inner, handle, req)
	err = p.member.forTenant(err, protocol.NewHandlesUnreachableError())
	if executorapi.EndsHandles(err) {
		t.routes.pins.drop(id)
	}
	return resp, outerID(err, p.inner, id)
}

// CloseHandles implements protocol.Executor.
func (t *tenant) CloseHandles(ctx context.Context, id string) error {
	p, ok := t.routes.find(id, t.name)
	if !ok {
		return protocol.NewHandlesClosedError(id)
	}
	defer p.member.handleCall()()
	err := p.member.forTenant(p.member.execFor(t.name).CloseHandles(ctx, p.inner), protocol.NewHandlesUnreachableError())
	if err == nil || protocol.CodeOf(err) == protocol.CodeHandlesClosed {
		t.routes.pins.drop(id)
	}
	return outerID(err, p.inner, id)
}

// Close implements protocol.Executor; the gateway closes the backends.
func (t *tenant) Close() error { return t.api.Close() }
