package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

// member is one executor of a backend group: the local pool, or one remote
// executor server.
type member struct {
	// name identifies the member in executionIds: the group's name for a
	// local group, the group and a tag of the URL for a remote member.
	name string
	// label names it in logs: the group, and for a remote member its
	// place in the group's list when it joined.
	label string
	exec  protocol.PolicyExecutor
	// health checks a remote member between executions; nil for the local
	// pool, which is always healthy.
	health healthChecker
	// pool reports the local pool's counters; nil for a remote member.
	pool     poolReporter
	inFlight inFlightCount
	healthy  atomic.Bool
	log      *slog.Logger
	// remote: the member is an executor server, whose address a tenant
	// must never read.
	remote bool
	// config is a remote member's entry in the configuration, which a
	// reload compares.
	config config.RemoteMember

	// handleCalls are the calls on its retained executions in flight,
	// which keep a removed member open (retire).
	handleCalls inFlightCount
}

// healthChecker is a member whose health the gateway checks: a remote
// executor server (remote.Executor).
type healthChecker interface {
	Ping(ctx context.Context) error
	// Draining: the server refused an execution as draining on the
	// session it serves now; it takes no new executions, and keeps
	// serving the handles pinned to it until it closes that session.
	Draining() bool
}

// draining reports whether m is a remote member whose server is draining.
func (m *member) draining() bool { return m.health != nil && m.health.Draining() }

// takesRuns: m passes its health check and is not draining.
func (m *member) takesRuns() bool { return m.healthy.Load() && !m.draining() }

// poolReporter is a member with a worker pool whose counters the metrics
// report: the local backend (local.Executor).
type poolReporter interface {
	Stats() local.Stats
}

// The texts a tenant reads when a remote member's connection failed: the
// fault's own text names the executor server's URL and the addresses
// under it, which stay in the operator's log. An execution no member could
// take reads protocol.NoExecutorError instead (group.execute);
// unreachableText is left to calls on a retained execution, whose handles
// live on that one member.
const (
	unreachableText = "The executor server behind this gateway could not be reached, so the call did not start. The gateway's operator has the details in its log."
	refusedText     = "The executor servers behind this gateway refused this tenant's settings, so the call did not start. The gateway's operator has the details in its log."
	brokenText      = "The connection to the executor server behind this gateway broke during the call, so its outcome is unknown. The gateway's operator has the details in its log."
)

// forTenant is err as a tenant may read it: a remote member's connection
// fault keeps its code and gets a text without addresses; the original
// goes to the log with the member's URL.
func (m *member) forTenant(err error) error {
	if err == nil || !m.remote {
		return err
	}
	var text string
	switch protocol.CodeOf(err) {
	case protocol.CodeConnectionRejected:
		text = unreachableText
		if _, ok := settingsRefused(err); ok {
			text = refusedText
		}
	case protocol.CodeConnectionBroken:
		text = brokenText
	default:
		return err
	}
	m.log.Warn("executor server call failed; the tenant was told without its address", "error", err)
	return protocol.NewFault(protocol.CodeOf(err), text)
}

// group is a named backend group.
type group struct {
	name string
	// mu guards members and retired. members is replaced whole, never
	// changed in place, so a reader ranges over the slice it was given.
	mu      sync.Mutex
	members []*member
	// retired are the members a reload removed: they take no new
	// executions and are closed once their executions and pinned handles
	// are done.
	retired map[*member]struct{}
	// nativeOutbound: the group's operator allows native fetch.
	nativeOutbound bool
	// defaultTimeoutMs is the run bound the group gives a request that
	// sets none.
	defaultTimeoutMs int64
	// required: the replica is not ready while no member is usable.
	required bool
	// remote makes the members of a remote group; nil for a local one.
	remote *remoteMaker
	// tenants are the tenants the current configuration puts on the group
	// (probeTenants); unset until the gateway has a configuration.
	tenants atomic.Pointer[func() []string]
	// discovery finds a remote group's members in DNS; nil when they are
	// listed (or the group is local).
	discovery *discovery
	ctx       context.Context // ends when the group closes
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

// remoteMaker makes a remote group's members, at start and on a reload.
type remoteMaker struct {
	group       string
	log         *slog.Logger
	dialTimeout time.Duration
	// nameOf names a member from its URL, the same on every replica that
	// shares the executionId key (the name is part of the ids), and
	// without showing the URL to the tenant who holds an id.
	nameOf func(url string) string
	// policyOf is what a member is told of a tenant's policy.
	policyOf func(tenant string) MemberPolicy
}

func (r *remoteMaker) member(rm config.RemoteMember, index int) *member {
	h := http.Header{}
	if rm.Key != "" {
		h.Set("Authorization", "Bearer "+rm.Key)
	}
	// No retries inside a member: execute moves a refused run to the next
	// member at once, and the tenant's client retries what none took.
	opts := remote.Options{Header: h, DialTimeout: r.dialTimeout, Retry: remote.Retry{Attempts: 1}}
	if rm.ServerName != "" {
		opts.HTTPClient = serverNameClient(rm.ServerName)
	}
	ex := newMemberSessions(rm.URL, opts, r.policyOf)
	return &member{
		name:   r.nameOf(rm.URL),
		label:  fmt.Sprintf("%s/%d", r.group, index),
		exec:   ex,
		health: ex,
		log:    r.log.With("backend", r.group, "member", index, "url", rm.URL),
		remote: true,
		config: rm,
	}
}

func newGroup(b config.Backend, log *slog.Logger, shares func(tenant string) local.Share, policyOf func(tenant string) MemberPolicy, nameOf func(url string) string) (*group, error) {
	g := &group{name: b.Name, defaultTimeoutMs: protocol.DefaultTimeout, required: b.Readiness == config.ReadinessRequired, retired: map[*member]struct{}{}}
	g.ctx, g.stop = context.WithCancel(context.Background())
	switch b.Type {
	case "local":
		s := b.Local.Settings(runtime.NumCPU())
		ex, err := local.New(local.Options{
			MinWorkers:         s.MinWorkers,
			MaxWorkers:         s.MaxWorkers,
			RunsPerWorker:      s.RunsPerWorker,
			WorkerMemoryMB:     s.WorkerMemoryMB,
			QueueBound:         s.Queue,
			QueueTimeout:       s.QueueTimeout,
			WorkerIdleTimeout:  s.WorkerIdleTimeout,
			Shares:             shares,
			MemoryLimitMB:      s.MemoryMB,
			DefaultTimeoutMs:   b.Local.DefaultTimeoutMs,
			HandlesIdleTimeout: b.Local.HandlesIdleTimeout.Std(),
			Logger:             log.With("backend", b.Name),
			Native:             nativeOptions(b.Local),
			WorkerUser:         b.Local.WorkerUser,
			NoSeccomp:          b.Local.DisableSeccomp,
		})
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", b.Name, err)
		}
		m := &member{name: b.Name, label: b.Name, exec: ex, pool: ex, log: log.With("backend", b.Name)}
		m.healthy.Store(true)
		g.members = []*member{m}
		g.nativeOutbound = b.Local.NativeOutbound
		if b.Local.DefaultTimeoutMs > 0 {
			g.defaultTimeoutMs = b.Local.DefaultTimeoutMs
		}
	case "remote":
		g.remote = &remoteMaker{group: b.Name, log: log, dialTimeout: b.Remote.DialTimeout.Std(), nameOf: nameOf, policyOf: policyOf}
		for i, rm := range b.Remote.Members {
			g.members = append(g.members, g.remote.member(rm, i))
		}
		// The members apply the group's native settings (memberPolicy).
		g.nativeOutbound = b.Remote.NativeOutbound
		g.checkHealth(g.ctx, b.Remote.DialTimeout.Std())
		g.wg.Add(1)
		go g.healthLoop(g.ctx, b.Remote.HealthInterval.Std(), b.Remote.DialTimeout.Std())
	}
	return g, nil
}

// current is the group's members as they are now.
func (g *group) current() []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members
}

// nativeOptions are the local backend's native fetch settings, with the
// ranges validation parsed.
func nativeOptions(l *config.LocalBackend) local.NativeOptions {
	return local.NativeOptions{
		Vetoed:           !l.NativeOutbound,
		Deny:             l.Native.DenyRanges,
		Allow:            l.Native.AllowRanges,
		MaxResponseBytes: l.Native.MaxResponseBytes,
		MaxRedirects:     l.Native.MaxRedirects,
		RequestTimeout:   l.Native.RequestTimeout.Std(),
	}
}

// healthLoop pings every remote member each interval: an unhealthy member
// gets no new executions until a ping succeeds again.
func (g *group) healthLoop(ctx context.Context, every, timeout time.Duration) {
	defer g.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.checkHealth(ctx, timeout)
		}
	}
}

func (g *group) checkHealth(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, m := range g.current() {
		if m.health == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := m.health.Ping(pctx)
			was := m.healthy.Swap(err == nil)
			switch {
			case err != nil && was:
				m.log.Warn("executor server ejected: health check failed", "error", err)
			case err == nil && !was:
				m.log.Info("executor server admitted: health check passed")
				g.admitted(m)
			}
		}()
	}
	wg.Wait()
}

// usable: some member passes its health check and is not draining.
func (g *group) usable() bool {
	for _, m := range g.current() {
		if m.takesRuns() {
			return true
		}
	}
	return false
}

// candidates lists the healthy members that are not draining, fewest
// executions in flight first. When there is none every member is listed,
// draining ones last, so that a request is still tried (a member may be
// back before its health check says so) and a draining refusal is what
// the tenant reads when that is why.
func (g *group) candidates() []*member {
	var out []*member
	members := g.current()
	for _, m := range members {
		if m.takesRuns() {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		// None takes runs: try each, those draining last (asked once
		// each: a member may start draining meanwhile).
		var draining []*member
		for _, m := range members {
			if m.draining() {
				draining = append(draining, m)
			} else {
				out = append(out, m)
			}
		}
		return append(out, draining...)
	}
	// Insertion sort: groups are small.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].inFlight.Load() < out[j-1].inFlight.Load(); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// execute runs req under p on the least loaded member. A run that could
// not start there (the queue is full, the server is draining, or it
// refused the connection) is tried on the next; a run that started is
// never replayed. When no member could be reached, or the group has none
// (its name resolves to nothing), the tenant reads the retryable
// NoExecutorError: the condition heals by itself, unlike a refused
// credential.
func (g *group) execute(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, *member, error) {
	var lastErr error = protocol.NewNoExecutorError()
	for _, m := range g.candidates() {
		m.inFlight.Add(1)
		res, err := m.exec.ExecuteWith(ctx, req, p)
		m.inFlight.Add(-1)
		if re, ok := settingsRefused(err); ok {
			// The member is healthy; it cannot honour this tenant's
			// settings. Another member (another version) may.
			m.log.Error(settingsRefusedLog, "tenant", p.Tenant, "refusal", re.Text)
			lastErr = m.forTenant(err)
			continue
		}
		err = m.forTenant(err)
		switch protocol.CodeOf(err) {
		case protocol.CodeQueueOverflow:
			if protocol.IsExecutorDraining(err) {
				m.log.Info("executor server draining: it takes no new executions and keeps its pinned handles until it closes")
			}
			lastErr = err
			continue
		case protocol.CodeConnectionRejected:
			m.healthy.Store(false)
			lastErr = protocol.NewNoExecutorError()
			continue
		}
		return res, m, err
	}
	return nil, nil, lastErr
}

func (g *group) close() error {
	g.stop()
	g.wg.Wait()
	g.mu.Lock()
	all := slices.Concat(g.members, slices.Collect(maps.Keys(g.retired)))
	g.retired = map[*member]struct{}{}
	g.mu.Unlock()
	var errs []error
	for _, m := range all {
		errs = append(errs, m.exec.Close())
	}
	return errors.Join(errs...)
}
