package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/upstream"
	"github.com/supolka/codemode-gateway/internal/serving"
	"github.com/supolka/codemode-gateway/protocol"
)

// member is one executor of a backend group, its upstream: what a kind
// made (upstream.Kind), with what the gateway keeps of it.
type member struct {
	// name identifies the member in executionIds: the group's name for a
	// local group, the group and a tag of the URL for a remote member.
	name string
	// label names it in logs: the group, and for a remote member its
	// place in the group's list when it joined.
	label string
	exec  protocol.PolicyExecutor
	// health checks a member in another process between executions; nil
	// for one in this process, which is always healthy. A member with a
	// health check is an executor server, whose address a tenant must
	// never read.
	health upstream.Health
	// pool reports the counters of a member's worker pool in this
	// process; nil for one in another process.
	pool     serving.PoolReporter
	inFlight serving.InFlight
	healthy  atomic.Bool
	log      *slog.Logger
	// entry is a listed or discovered member's entry in the
	// configuration, which a reload compares; zero for a group that is
	// one member.
	entry config.RemoteMember

	// handleCalls are the calls on its retained executions in flight,
	// which keep a removed member open (retire).
	handleCalls serving.InFlight
}

// newMember keeps exec, which a kind made, as a member of a group.
func newMember(name, label string, exec protocol.PolicyExecutor, log *slog.Logger, entry config.RemoteMember) *member {
	m := &member{name: name, label: label, exec: exec, log: log, entry: entry}
	m.health, _ = exec.(upstream.Health)
	m.pool, _ = exec.(serving.PoolReporter)
	return m
}

// execFor is the executor that reaches tenant's retained executions on m.
func (m *member) execFor(tenant string) protocol.Executor {
	if s, ok := m.exec.(upstream.Tenanted); ok {
		return s.For(tenant)
	}
	return m.exec
}

// draining reports whether m is a remote member whose server is draining.
func (m *member) draining() bool { return m.health != nil && m.health.Draining() }

// takesRuns: m passes its health check and is not draining.
func (m *member) takesRuns() bool { return m.healthy.Load() && !m.draining() }

// The texts a tenant reads when a remote member's connection failed: the
// fault's own text names the executor server's URL and the addresses
// under it, which stay in the operator's log. A member that could not be
// reached reads as a retryable refusal instead (forTenant's unreachable).
const (
	refusedText = "The executor servers behind this gateway refused this tenant's settings, so the call did not start. The gateway's operator has the details in its log."
	brokenText  = "The connection to the executor server behind this gateway broke during the call, so its outcome is unknown. The gateway's operator has the details in its log."
)

// forTenant is err as a tenant may read it: a remote member's connection
// fault gets a text without addresses; the original goes to the log with
// the member's URL. A member that refused the tenant's settings keeps
// CONNECTION_REJECTED, which no retry fixes; one that could not be reached
// reads unreachable, a retryable QUEUE_OVERFLOW, since nothing of the call
// started (protocol.NoExecutorError for an execution, which another
// member may take; protocol.HandlesUnreachableError for a call on a
// retained execution, whose handles live on that member alone). A broken
// connection keeps CONNECTION_BROKEN: the call's outcome is unknown.
func (m *member) forTenant(err, unreachable error) error {
	if err == nil || m.health == nil {
		return err
	}
	var out error
	switch protocol.CodeOf(err) {
	case protocol.CodeConnectionRejected:
		out = unreachable
		if _, ok := upstream.SettingsRefused(err); ok {
			out = protocol.NewFault(protocol.CodeConnectionRejected, refusedText)
		}
	case protocol.CodeConnectionBroken:
		out = protocol.NewFault(protocol.CodeConnectionBroken, brokenText)
	default:
		return err
	}
	m.log.Warn("executor server call failed; the tenant was told without its address", "error", err)
	return out
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
	// remote makes the members of a remote group (listed or
	// discovered); nil for a group that is one member.
	remote *remoteMaker
	// tenants are the tenants the current configuration puts on the group
	// (probeTenants); none until the gateway has a configuration.
	tenants func() []string
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
	// make is the group's kind, told of its configuration and gateway.
	make func(rm config.RemoteMember) (protocol.PolicyExecutor, error)
}

func (r *remoteMaker) member(rm config.RemoteMember, index int) (*member, error) {
	ex, err := r.make(rm)
	if err != nil {
		return nil, err
	}
	return newMember(r.nameOf(rm.URL), fmt.Sprintf("%s/%d", r.group, index), ex,
		r.log.With("backend", r.group, "member", index, "url", rm.URL), rm), nil
}

// newGroup starts group b with the kind its type names: one member made at
// once, or for a remote group a member per entry, listed or discovered.
func newGroup(b config.Backend, kinds upstream.Kinds, env upstream.Env, nameOf func(url string) string, tenants func() []string) (*group, error) {
	kind := kinds[b.Type]
	if kind == nil {
		return nil, fmt.Errorf("backend %s: this gateway runs no backend of type %q", b.Name, b.Type)
	}
	g := &group{name: b.Name, defaultTimeoutMs: protocol.DefaultTimeout, required: b.Readiness == config.ReadinessRequired, retired: map[*member]struct{}{}, tenants: tenants}
	g.ctx, g.stop = context.WithCancel(context.Background())
	log := env.Logger
	if b.Remote == nil {
		ex, err := kind(b, config.RemoteMember{}, env)
		if err != nil {
			return nil, err
		}
		m := newMember(b.Name, b.Name, ex, log.With("backend", b.Name), config.RemoteMember{})
		m.healthy.Store(true)
		g.members = []*member{m}
		if b.Local != nil {
			g.nativeOutbound = b.Local.NativeOutbound
			if b.Local.DefaultTimeoutMs > 0 {
				g.defaultTimeoutMs = b.Local.DefaultTimeoutMs
			}
		}
		return g, nil
	}
	g.remote = &remoteMaker{group: b.Name, log: log, dialTimeout: b.Remote.DialTimeout.Std(), nameOf: nameOf,
		make: func(rm config.RemoteMember) (protocol.PolicyExecutor, error) { return kind(b, rm, env) }}
	for i, rm := range b.Remote.Members {
		m, err := g.remote.member(rm, i)
		if err != nil {
			g.close()
			return nil, err
		}
		g.members = append(g.members, m)
	}
	// The members apply the group's native settings (memberPolicy).
	g.nativeOutbound = b.Remote.NativeOutbound
	g.checkHealth(g.ctx, b.Remote.DialTimeout.Std())
	g.wg.Add(1)
	go g.healthLoop(g.ctx, b.Remote.HealthInterval.Std(), b.Remote.DialTimeout.Std())
	return g, nil
}

// current is the group's members as they are now.
func (g *group) current() []*member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members
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
		if re, ok := upstream.SettingsRefused(err); ok {
			// The member is healthy; it cannot honour this tenant's
			// settings. Another member (another version) may.
			m.log.Error(settingsRefusedLog, "tenant", p.Tenant, "refusal", re.Text)
			lastErr = m.forTenant(err, nil)
			continue
		}
		if protocol.CodeOf(err) == protocol.CodeConnectionRejected {
			// Not reached: no new runs until a health check passes.
			m.healthy.Store(false)
		}
		err = m.forTenant(err, protocol.NewNoExecutorError())
		if protocol.CodeOf(err) == protocol.CodeQueueOverflow {
			if protocol.IsExecutorDraining(err) {
				m.log.Info("executor server draining: it takes no new executions and keeps its pinned handles until it closes")
			}
			lastErr = err
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

// settingsRefusedLog is the gateway's log line when a member refused a
// tenant's settings, at connect time or at a call.
const settingsRefusedLog = "executor server refused a tenant's settings; fix the tenant's policy or the member's flags"

// probeTenants opens the sessions of the group's tenants to each of
// members, so that a member that cannot honour a tenant's settings says so
// at once, logged at error level, rather than at the tenant's first call
// (which still fails with refusedText). A member that cannot be reached is
// the health checks' business.
func (g *group) probeTenants(members []*member) {
	tenants := g.tenants()
	for _, m := range members {
		s, ok := m.exec.(upstream.Prober)
		if !ok {
			continue
		}
		for _, tn := range tenants {
			go func() {
				ctx, cancel := context.WithTimeout(g.ctx, g.remote.dialTimeout)
				defer cancel()
				if refusal, ok := s.Probe(ctx, tn); ok {
					m.log.Error(settingsRefusedLog, "tenant", tn, "refusal", refusal)
				}
			}()
		}
	}
}

// admitted probes a member that passed its health check after failing (or
// before any): it joined the group, or came back, perhaps restarted with
// other flags.
func (g *group) admitted(m *member) {
	if s, ok := m.exec.(upstream.Prober); ok {
		s.Reprobe()
	}
	g.probeTenants([]*member{m})
}
