package gateway

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

// memberSessions are a remote member's sessions: one per tenant, each
// naming its tenant and the tenant's settings in the upgrade's headers
// (TenantHeader), beside the member key. A session whose tenant's settings
// a reload changed is replaced by one that sends the new ones; the old one
// stays open for what runs on it until the member closes. Handles live on
// the member per tenant, so any session of the tenant reaches them.
type memberSessions struct {
	url  string
	opts remote.Options
	// policyOf is a tenant's settings as the current configuration says.
	policyOf func(tenant string) MemberPolicy
	// health is a session that names no tenant, for health checks.
	health *remote.Executor

	mu       sync.Mutex
	byTenant map[string]tenantSession
	replaced []*remote.Executor
	closed   bool
}

type tenantSession struct {
	policy MemberPolicy // the settings it sent (TenantPolicyHeader)
	exec   *remote.Executor
	// probed: a probe had the member's answer on this session.
	probed *atomic.Bool
}

func newMemberSessions(url string, opts remote.Options, policyOf func(string) MemberPolicy) *memberSessions {
	return &memberSessions{url: url, opts: opts, policyOf: policyOf, health: remote.New(url, opts), byTenant: map[string]tenantSession{}}
}

// of is tenant's session, made (it dials on first use) when there is none
// with the tenant's current settings.
func (s *memberSessions) of(tenant string) *remote.Executor {
	return s.session(tenant).exec
}

func (s *memberSessions) session(tenant string) tenantSession {
	policy := s.policyOf(tenant)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.byTenant[tenant]
	if ok && cur.policy.equal(policy) {
		return cur
	}
	if s.closed {
		// Closed: fails every call as the other sessions do.
		return tenantSession{exec: s.health, probed: &atomic.Bool{}}
	}
	if ok {
		s.replaced = append(s.replaced, cur.exec)
	}
	h := s.opts.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(TenantHeader, tenant)
	h.Set(TenantPolicyHeader, policy.header())
	opts := s.opts
	opts.Header = h
	ts := tenantSession{policy: policy, exec: remote.New(s.url, opts), probed: &atomic.Bool{}}
	s.byTenant[tenant] = ts
	return ts
}

// probe opens tenant's session, unless a probe already had the member's
// answer on it, and reports whether the member refused its settings.
func (s *memberSessions) probe(ctx context.Context, tenant string) (*capnweb.RefusedError, bool) {
	ts := s.session(tenant)
	if ts.probed.Load() {
		return nil, false
	}
	err := ts.exec.Ping(ctx)
	re, refused := settingsRefused(err)
	if (err == nil || refused) && ts.probed.Swap(true) {
		return nil, false // another probe had the same answer
	}
	return re, refused
}

// reprobe forgets the probes' answers: the member may have restarted with
// other flags.
func (s *memberSessions) reprobe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.byTenant {
		ts.probed.Store(false)
	}
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
	of := g.tenants.Load()
	if of == nil {
		return
	}
	tenants := (*of)()
	for _, m := range members {
		s, ok := m.exec.(*memberSessions)
		if !ok {
			continue
		}
		for _, tn := range tenants {
			go func() {
				ctx, cancel := context.WithTimeout(g.ctx, g.remote.dialTimeout)
				defer cancel()
				if re, ok := s.probe(ctx, tn); ok {
					m.log.Error(settingsRefusedLog, "tenant", tn, "refusal", re.Text)
				}
			}()
		}
	}
}

// admitted probes a member that passed its health check after failing (or
// before any): it joined the group, or came back, perhaps restarted with
// other flags.
func (g *group) admitted(m *member) {
	if s, ok := m.exec.(*memberSessions); ok {
		s.reprobe()
	}
	g.probeTenants([]*member{m})
}

// Ping implements healthChecker on the session that names no tenant.
func (s *memberSessions) Ping(ctx context.Context) error { return s.health.Ping(ctx) }

// Draining implements healthChecker: the member refused an execution as
// draining on one of its current sessions (a tenant's, most often: the
// health session runs none).
func (s *memberSessions) Draining() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.health.Draining() {
		return true
	}
	for _, ts := range s.byTenant {
		if ts.exec.Draining() {
			return true
		}
	}
	return false
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (s *memberSessions) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return s.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor on p.Tenant's session.
func (s *memberSessions) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	return s.of(p.Tenant).ExecuteWith(ctx, req, p)
}

// InvokeHandle and CloseHandles without a tenant reach no tenant's
// handles: the gateway calls them on member.execFor(tenant).
func (s *memberSessions) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return s.health.InvokeHandle(ctx, id, handle, req)
}

func (s *memberSessions) CloseHandles(ctx context.Context, id string) error {
	return s.health.CloseHandles(ctx, id)
}

// Close ends every session.
func (s *memberSessions) Close() error {
	s.mu.Lock()
	s.closed = true
	all := append(slices.Clone(s.replaced), s.health)
	for ts := range maps.Values(s.byTenant) {
		all = append(all, ts.exec)
	}
	s.mu.Unlock()
	var errs []error
	for _, e := range all {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// execFor is the executor that reaches tenant's retained executions on m.
func (m *member) execFor(tenant string) protocol.Executor {
	if s, ok := m.exec.(*memberSessions); ok {
		return s.of(tenant)
	}
	return m.exec
}

// memberPolicy is the part of a tenant's policy its remote members apply,
// with its group's native section when both allow native fetch (r is nil
// for a local group).
func memberPolicy(p config.Policy, r *config.RemoteBackend) MemberPolicy {
	mp := MemberPolicy{MemoryMB: p.MemoryMB, Weight: p.Weight, CPUSlots: p.CPUSlots}
	if r == nil || !r.NativeOutbound || !p.NativeOutbound {
		return mp
	}
	n := r.Native
	mp.NativeOutbound = true
	mp.Native = &MemberNative{Deny: cidrs(n.DenyRanges), Allow: cidrs(n.AllowRanges), MaxResponseBytes: n.MaxResponseBytes, MaxRedirects: n.MaxRedirects}
	if n.RequestTimeout > 0 {
		mp.Native.RequestTimeout = n.RequestTimeout.Std().String()
	}
	mp.NativeDeny = cidrs(p.NativeDenyRanges)
	return mp
}

// cidrs are ranges as a member reads them.
func cidrs(ranges []netip.Prefix) []string {
	var out []string
	for _, r := range ranges {
		out = append(out, r.String())
	}
	return out
}

// settingsRefused: the member refused the tenant's settings at connect
// time (MemberAPI), which says nothing about its health.
func settingsRefused(err error) (*capnweb.RefusedError, bool) {
	var re *capnweb.RefusedError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return re, true
	}
	return nil, false
}
