package kinds

import (
	"context"
	"crypto/tls"
	"errors"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/executorserver"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/upstream"
	"github.com/supolka/codemode-gateway/protocol"
)

// Remote makes the member of a remote group's entry m: an executor server,
// reached by one session per tenant.
func Remote(b config.Backend, m config.RemoteMember, env upstream.Env) (protocol.PolicyExecutor, error) {
	h := http.Header{}
	if m.Key != "" {
		h.Set("Authorization", "Bearer "+m.Key)
	}
	// No retries inside a member: execute moves a refused run to the next
	// member at once, and the tenant's client retries what none took.
	opts := remote.Options{Header: h, DialTimeout: b.Remote.DialTimeout.Std(), Retry: remote.Retry{Attempts: 1}}
	if m.ServerName != "" {
		opts.HTTPClient = serverNameClient(m.ServerName)
	}
	return newMemberSessions(m.URL, opts, func(tenant string) executorserver.MemberPolicy { return memberPolicy(env.Policy(tenant), b.Remote) }), nil
}

// serverNameClient dials a wss:// member at its address and checks its
// certificate against name.
func serverNameClient(name string) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{ServerName: name, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t}
}

// memberSessions are a remote member's sessions: one per tenant, each
// naming its tenant and the tenant's settings in the upgrade's headers
// (executorserver.TenantHeader), beside the member key. A session whose
// tenant's settings a reload changed is replaced by one that sends the new
// ones; the old one stays open for what runs on it until the member closes.
// Handles live on the member per tenant, so any session of the tenant
// reaches them.
type memberSessions struct {
	url  string
	opts remote.Options
	// policyOf is a tenant's settings as the current configuration says.
	policyOf func(tenant string) executorserver.MemberPolicy
	// health is a session that names no tenant, for health checks.
	health *remote.Executor

	mu       sync.Mutex
	byTenant map[string]tenantSession
	replaced []*remote.Executor
	closed   bool
}

type tenantSession struct {
	policy executorserver.MemberPolicy // the settings it sent (executorserver.TenantPolicyHeader)
	exec   *remote.Executor
	// probed: a probe had the member's answer on this session.
	probed *atomic.Bool
}

func newMemberSessions(url string, opts remote.Options, policyOf func(string) executorserver.MemberPolicy) *memberSessions {
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
	if ok && cur.policy.Equal(policy) {
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
	h.Set(executorserver.TenantHeader, tenant)
	h.Set(executorserver.TenantPolicyHeader, policy.Header())
	opts := s.opts
	opts.Header = h
	ts := tenantSession{policy: policy, exec: remote.New(s.url, opts), probed: &atomic.Bool{}}
	s.byTenant[tenant] = ts
	return ts
}

// Probe implements upstream.Prober: it opens tenant's session, unless a
// probe already had the member's answer on it.
func (s *memberSessions) Probe(ctx context.Context, tenant string) (refusal string, refused bool) {
	ts := s.session(tenant)
	if ts.probed.Load() {
		return "", false
	}
	err := ts.exec.Ping(ctx)
	re, refused := upstream.SettingsRefused(err)
	if (err == nil || refused) && ts.probed.Swap(true) {
		return "", false // another probe had the same answer
	}
	if !refused {
		return "", false
	}
	return re.Text, true
}

// Reprobe implements upstream.Prober.
func (s *memberSessions) Reprobe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ts := range s.byTenant {
		ts.probed.Store(false)
	}
}

// For implements upstream.Tenanted: tenant's session, which reaches its
// retained executions.
func (s *memberSessions) For(tenant string) protocol.Executor { return s.of(tenant) }

// Ping implements upstream.Health on the session that names no tenant.
func (s *memberSessions) Ping(ctx context.Context) error { return s.health.Ping(ctx) }

// Draining implements upstream.Health: the member refused an execution as
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
// handles: the gateway calls them on For(tenant).
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

// memberPolicy is the part of a tenant's policy its remote members apply,
// with its group's native section when both allow native fetch (r is the
// group's remote section).
func memberPolicy(p config.Policy, r *config.RemoteBackend) executorserver.MemberPolicy {
	mp := executorserver.MemberPolicy{MemoryMB: p.MemoryMB, Weight: p.Weight, CPUSlots: p.CPUSlots}
	if r == nil || !r.NativeOutbound || !p.NativeOutbound {
		return mp
	}
	n := r.Native
	mp.NativeOutbound = true
	mp.Native = &executorserver.MemberNative{Deny: cidrs(n.DenyRanges), Allow: cidrs(n.AllowRanges), MaxResponseBytes: n.MaxResponseBytes, MaxRedirects: n.MaxRedirects}
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
