package executorserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// An executor server keeps its gateway's tenants apart as a local group
// does. The gateway opens one session per tenant to each member and names
// the tenant, and the tenant's settings, in two headers of the WebSocket
// upgrade. The member believes them because only its gateway can send them:
// the upgrade is refused unless it carries a member key (--key-hash), and
// tenants never reach members. A member without keys (loopback, or
// --insecure-no-auth) trusts every caller as its gateway, headers included.
const (
	// TenantHeader names the tenant a session's executions belong to.
	TenantHeader = "Codemode-Tenant"
	// TenantPolicyHeader holds the tenant's settings as a JSON object
	// (MemberPolicy), validated by the member before the upgrade.
	TenantPolicyHeader = "Codemode-Tenant-Policy"
)

// MemberPolicy is the part of a tenant's policy a member applies, with the
// meaning the keys have on a local group; zero leaves the member's default.
type MemberPolicy struct {
	// MemoryMB lowers the tenant's per-run memory limit.
	MemoryMB int `json:"memoryMB,omitempty"`
	// Weight is the tenant's weight in the member's fair share.
	Weight float64 `json:"weight,omitempty"`
	// CPUSlots is how many worker processes the tenant may hold.
	CPUSlots int `json:"cpuSlots,omitempty"`
	// NativeOutbound lets the tenant's programs fetch natively: the gateway
	// sets it when both the tenant's policy and its group allow it. Without
	// it the member vetoes native fetch for the tenant.
	NativeOutbound bool `json:"nativeOutbound,omitempty"`
	// Native is the group's native section, sent with NativeOutbound.
	Native *MemberNative `json:"native,omitempty"`
	// NativeDeny is the tenant policy's nativeDeny, sent with
	// NativeOutbound: ranges its fetches must not reach even inside
	// Native.Allow.
	NativeDeny []string `json:"nativeDeny,omitempty"`
}

// MemberNative is a group's native section (config.NativeFetch) as a
// member is told it: the same keys and meaning, ranges in CIDR notation
// and requestTimeout as a Go duration.
type MemberNative struct {
	Deny             []string `json:"deny,omitempty"`
	Allow            []string `json:"allow,omitempty"`
	MaxResponseBytes int64    `json:"maxResponseBytes,omitempty"`
	MaxRedirects     int      `json:"maxRedirects,omitempty"`
	RequestTimeout   string   `json:"requestTimeout,omitempty"`
}

// memberPolicyKeys and memberNativeKeys are the settings this build's
// members know. A newer gateway's setting this member cannot apply is
// refused, never ignored.
var (
	memberPolicyKeys = []string{"memoryMB", "weight", "cpuSlots", "nativeOutbound", "native", "nativeDeny"}
	memberNativeKeys = []string{"deny", "allow", "maxResponseBytes", "maxRedirects", "requestTimeout"}
)

// Header is p as TenantPolicyHeader carries it.
func (p MemberPolicy) Header() string {
	b, _ := json.Marshal(p) // numbers and strings: cannot fail
	return string(b)
}

// Equal: p and q are the same settings.
func (p MemberPolicy) Equal(q MemberPolicy) bool {
	if p.Native == nil || q.Native == nil {
		if p.Native != q.Native {
			return false
		}
	} else if a, b := *p.Native, *q.Native; !slices.Equal(a.Deny, b.Deny) || !slices.Equal(a.Allow, b.Allow) ||
		a.MaxResponseBytes != b.MaxResponseBytes || a.MaxRedirects != b.MaxRedirects || a.RequestTimeout != b.RequestTimeout {
		return false
	}
	return p.MemoryMB == q.MemoryMB && p.Weight == q.Weight && p.CPUSlots == q.CPUSlots &&
		p.NativeOutbound == q.NativeOutbound && slices.Equal(p.NativeDeny, q.NativeDeny)
}

// memberTenant is a tenant's settings on a member, with what they say of
// native fetch parsed.
type memberTenant struct {
	MemberPolicy
	native local.NativeOptions // Vetoed unless NativeOutbound
	deny   []netip.Prefix      // NativeDeny
}

// MemberTenants are the tenants an executor server has been told of, with
// their settings: the latest session's win. Its Share is the local
// backend's Options.Shares.
type MemberTenants struct {
	mu     sync.Mutex
	byName map[string]memberTenant
	// limits are the member's own bounds a setting must stay within, from
	// its local backend (New).
	memoryMB, maxWorkers int
	// own are the member's native settings (its flags), which sessions
	// that name no tenant fetch under; own.Vetoed forbids native fetch
	// to every tenant.
	own local.NativeOptions
}

// NewMemberTenants is an empty table.
func NewMemberTenants() *MemberTenants {
	return &MemberTenants{byName: map[string]memberTenant{}}
}

// Share is tenant's share of the member's worker processes. The tenant of
// a session that names none (an older gateway, the Go client) is one
// tenant that may use every worker, as before tenancy.
func (m *MemberTenants) Share(tenant string) local.Share {
	if tenant == "" {
		return local.Share{CPUSlots: math.MaxInt}
	}
	m.mu.Lock()
	p := m.byName[tenant]
	m.mu.Unlock()
	return local.Share{Weight: p.Weight, CPUSlots: p.CPUSlots}
}

// Native is tenant's native settings: the local backend's
// Options.NativeOf. A session that names no tenant fetches under the
// member's own; a tenant whose settings do not allow native fetch (or one
// the member was never told of) has none.
func (m *MemberTenants) Native(tenant string) local.NativeOptions {
	m.mu.Lock()
	defer m.mu.Unlock()
	if tenant == "" {
		return m.own
	}
	t, ok := m.byName[tenant]
	if !ok {
		return local.NativeOptions{Vetoed: true}
	}
	return t.native
}

func (m *MemberTenants) of(tenant string) memberTenant {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byName[tenant]
}

func (m *MemberTenants) set(tenant string, p memberTenant) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byName[tenant] = p
}

// parse reads and validates a TenantPolicyHeader value against the
// member's bounds; its error says which setting this member cannot honour.
func (m *MemberTenants) parse(v string) (memberTenant, error) {
	p, err := m.parsePolicy(v)
	if err != nil {
		return memberTenant{}, err
	}
	return m.parseNative(p)
}

func (m *MemberTenants) parsePolicy(v string) (MemberPolicy, error) {
	var p MemberPolicy
	if v == "" {
		return p, nil
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(v), &keys); err != nil {
		return p, fmt.Errorf("%s is not a JSON object of tenant settings", TenantPolicyHeader)
	}
	var unknown []string
	for k := range keys {
		if !slices.Contains(memberPolicyKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if raw, ok := keys["native"]; ok {
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) == nil {
			for k := range sub {
				if !slices.Contains(memberNativeKeys, k) {
					unknown = append(unknown, "native."+k)
				}
			}
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return p, fmt.Errorf("this executor server does not know the setting %q; upgrade it, or leave the setting out", unknown[0])
	}
	d := json.NewDecoder(bytes.NewReader([]byte(v)))
	if err := d.Decode(&p); err != nil {
		return p, fmt.Errorf("%s: %v", TenantPolicyHeader, err)
	}
	switch {
	case p.MemoryMB < 0 || p.MemoryMB > 0 && p.MemoryMB < 16:
		return p, fmt.Errorf("memoryMB %d is too small for a JavaScript runtime; use at least 16", p.MemoryMB)
	case p.MemoryMB > m.memoryMB:
		return p, fmt.Errorf("memoryMB %d is above this executor server's memory limit of %d MB (--memory-mb); a tenant can only lower it", p.MemoryMB, m.memoryMB)
	case math.IsNaN(p.Weight) || p.Weight < 0 || p.Weight > 1000:
		return p, fmt.Errorf("weight %g is not a weight: use a number above 0 and at most 1000", p.Weight)
	case p.CPUSlots < 0:
		return p, fmt.Errorf("cpuSlots %d must not be negative", p.CPUSlots)
	case p.CPUSlots > m.maxWorkers:
		return p, fmt.Errorf("cpuSlots %d is more worker processes than this executor server may ever start (--max-workers %d)", p.CPUSlots, m.maxWorkers)
	}
	return p, nil
}

// parseNative checks what p says of native fetch against the member's own
// flags and parses it.
func (m *MemberTenants) parseNative(p MemberPolicy) (memberTenant, error) {
	t := memberTenant{MemberPolicy: p, native: local.NativeOptions{Vetoed: true}}
	if !p.NativeOutbound {
		if p.Native != nil || len(p.NativeDeny) > 0 {
			return t, errors.New("native and nativeDeny bound native fetch, which only nativeOutbound allows; send them with it")
		}
		return t, nil
	}
	if m.own.Vetoed {
		return t, errors.New("nativeOutbound is forbidden on this executor server (--disable-native-fetch): its worker processes have no sockets")
	}
	var n MemberNative
	if p.Native != nil {
		n = *p.Native
	}
	var err error
	t.native = local.NativeOptions{MaxResponseBytes: n.MaxResponseBytes, MaxRedirects: n.MaxRedirects}
	if t.native.Deny, err = prefixes("native.deny", n.Deny); err != nil {
		return t, err
	}
	if t.native.Allow, err = prefixes("native.allow", n.Allow); err != nil {
		return t, err
	}
	if t.deny, err = prefixes("nativeDeny", p.NativeDeny); err != nil {
		return t, err
	}
	if n.MaxResponseBytes < 0 {
		return t, fmt.Errorf("native.maxResponseBytes %d must not be negative", n.MaxResponseBytes)
	}
	if n.RequestTimeout != "" {
		d, err := time.ParseDuration(n.RequestTimeout)
		if err != nil {
			return t, fmt.Errorf("native.requestTimeout %q is not a duration such as 30s", n.RequestTimeout)
		}
		if d < 0 {
			return t, fmt.Errorf("native.requestTimeout %s must not be negative", n.RequestTimeout)
		}
		t.native.RequestTimeout = d
	}
	return t, nil
}

// prefixes parses the CIDR ranges of the setting key.
func prefixes(key string, list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		r, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q is not a CIDR range such as 10.0.0.0/8", key, s)
		}
		out = append(out, r)
	}
	return out, nil
}

// validTenantName: a tenant name a member accepts in TenantHeader.
func validTenantName(s string) bool {
	return len(s) <= 256 && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// MemberAPI serves ExecutorApi on an executor server, one ExecutorApi
// server per tenant, so that a session reaches only its own tenant's
// retained executions.
type MemberAPI struct {
	s    *Server
	opts executorapi.ServerOptions

	mu       sync.Mutex
	byTenant map[string]*executorapi.Server
}

// API is the ExecutorApi handler of s: put it behind the member-key check.
func (s *Server) API(opts executorapi.ServerOptions) *MemberAPI {
	return &MemberAPI{s: s, opts: opts, byTenant: map[string]*executorapi.Server{}}
}

// ServeHTTP reads the tenant headers, refuses settings this member cannot
// honour with 400 and a text saying which, and serves the session.
func (a *MemberAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant := r.Header.Get(TenantHeader)
	refuse := func(text string) {
		a.s.log.Warn("executor server refused a session", "tenant", tenant, "reason", text)
		w.Header().Set("Connection", "close")
		http.Error(w, text, http.StatusBadRequest)
	}
	raw := r.Header.Get(TenantPolicyHeader)
	if tenant == "" && raw != "" {
		refuse(fmt.Sprintf("%s needs %s: the settings are a tenant's", TenantPolicyHeader, TenantHeader))
		return
	}
	if !validTenantName(tenant) {
		refuse(fmt.Sprintf("%s must be a tenant name of at most 256 characters", TenantHeader))
		return
	}
	p, err := a.s.tenants.parse(raw)
	if err != nil {
		refuse(fmt.Sprintf("executor server refused tenant %q's settings: %v", tenant, err))
		return
	}
	if tenant != "" {
		a.s.tenants.set(tenant, p)
	}
	a.server(tenant).ServeHTTP(w, r)
}

func (a *MemberAPI) server(tenant string) *executorapi.Server {
	a.mu.Lock()
	defer a.mu.Unlock()
	srv := a.byTenant[tenant]
	if srv == nil {
		srv = executorapi.NewServer(&tenantExecutor{s: a.s, tenant: tenant, owned: map[string]struct{}{}}, a.opts)
		a.byTenant[tenant] = srv
	}
	return srv
}

// Close releases every tenant's kept stubs.
func (a *MemberAPI) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, srv := range a.byTenant {
		srv.Close()
	}
	return nil
}

// tenantExecutor is an executor server as one tenant's sessions see it:
// every execution runs as the tenant, under its memory limit, and only the
// tenant's own retained executions are reachable.
type tenantExecutor struct {
	s      *Server
	tenant string

	mu    sync.Mutex
	owned map[string]struct{} // the tenant's retained executions
}

func (t *tenantExecutor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return t.ExecuteWith(ctx, req, protocol.Policy{})
}

func (t *tenantExecutor) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	p.Tenant = t.tenant
	set := t.s.tenants.of(t.tenant)
	if m := set.MemoryMB; m > 0 && (p.MemoryLimitMB == 0 || m < p.MemoryLimitMB) {
		p.MemoryLimitMB = m
	}
	if len(set.deny) > 0 {
		p.NativeDeny = append(slices.Clone(p.NativeDeny), set.deny...)
	}
	// The id is the tenant's from its grant until its handles close, which
	// may (a crash) come before ExecuteWith returns: gone says so.
	var mu sync.Mutex
	gone := false
	closed := p.HandlesClosed
	p.HandlesClosed = func(id string) {
		mu.Lock()
		gone = true
		mu.Unlock()
		t.mu.Lock()
		delete(t.owned, id)
		t.mu.Unlock()
		if closed != nil {
			closed(id)
		}
	}
	res, err := t.s.ExecuteWith(ctx, req, p)
	if err == nil && res.ExecutionID != "" {
		mu.Lock()
		if !gone {
			t.mu.Lock()
			t.owned[res.ExecutionID] = struct{}{}
			t.mu.Unlock()
		}
		mu.Unlock()
	}
	return res, err
}

func (t *tenantExecutor) owns(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.owned[id]
	return ok
}

// InvokeHandle implements protocol.Executor: another tenant's id is as
// closed to this one as an id that never was.
func (t *tenantExecutor) InvokeHandle(ctx context.Context, id, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	if !t.owns(id) {
		return protocol.OutboundResponse{}, protocol.NewHandlesClosedError(id)
	}
	return t.s.InvokeHandle(ctx, id, handle, req)
}

// CloseHandles implements protocol.Executor.
func (t *tenantExecutor) CloseHandles(ctx context.Context, id string) error {
	if !t.owns(id) {
		return protocol.NewHandlesClosedError(id)
	}
	return t.s.CloseHandles(ctx, id)
}

// Close implements protocol.Executor: the server closes the backend.
func (t *tenantExecutor) Close() error { return nil }

var _ protocol.PolicyExecutor = (*tenantExecutor)(nil)
