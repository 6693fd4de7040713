// Package gateway is the edge gateway: a chi router that authenticates
// tenant applications, routes by path and WebSocket subprotocol, serves the
// executor contract's ExecutorApi from each tenant's backend group under the
// tenant's policy, pins every granted executionId to the backend that holds
// its handles, and reverse-proxies the routes of other wires.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/upstream"
	"github.com/supolka/codemode-gateway/internal/memlimit"
	"github.com/supolka/codemode-gateway/internal/telemetry"
)

// Options are the parts of a gateway that are not configuration.
type Options struct {
	// Logger receives one line per connection; slog.Default() when nil.
	Logger *slog.Logger
	// Getenv reads the secrets a configuration re-read from ConfigPath
	// names; os.Getenv when nil. A configuration given to New or Reload
	// carries the values its validation read.
	Getenv config.Getenv
	// ConfigPath is the file the configuration came from, re-read by
	// ReloadFile and the admin listener's POST /reload.
	ConfigPath string
	// Override changes each configuration read from ConfigPath the way the
	// command line changed the first (a listen address given as a flag).
	Override func(*config.Config)
	// Version is the build's version, for codemode_build_info and the
	// spans' service.version.
	Version string
	// Resolver finds the members of remote groups with remote.discover;
	// net.DefaultResolver when nil.
	Resolver Resolver
	// Kinds make the members of the backend groups, by the type each
	// names (gateway/kinds has local and remote); a group whose type has
	// no kind here fails New.
	Kinds upstream.Kinds
	// MemoryLimit has the gateway hold the process's soft memory limit at
	// what it holds of its own plus limits.wireMemoryMB, measured at New
	// and at each reload, unless GOMEMLIMIT is set (internal/memlimit):
	// for the one gateway a process serves.
	MemoryLimit bool
}

// Gateway serves one configuration at a time: Reload swaps in another.
type Gateway struct {
	log        *slog.Logger
	getenv     config.Getenv
	configPath string
	version    string // the build's, from Options
	override   func(*config.Config)
	groups     map[string]*group // fixed at start
	handles    *handleRoutes
	metrics    *metrics
	tracing    *telemetry.Tracing // nil: tracing is off
	state      atomic.Pointer[state]
	// now is the clock of tenant rate limits, budgets and refusal logs.
	now func() time.Time

	mu      sync.Mutex         // guards tenants and reloads
	tenants map[string]*tenant // every tenant ever configured, by name

	// draining is set by Drain: readiness fails and new executions are
	// turned away while the ones in flight finish.
	draining atomic.Bool

	base   context.Context // parent of every session; cancelled by Close
	cancel context.CancelFunc

	sessMu   sync.Mutex
	sessions map[*capnweb.Session]struct{} // open executor sessions

	// wire bounds what every executor session holds for its client
	// (limits.wireMemoryMB; a restart changes it).
	wire *capnweb.MemoryBudget
	// memoryLimit says the gateway holds the process's memory limit
	// (Options.MemoryLimit).
	memoryLimit bool
}

// GoingAwayReason is the close reason an executor session reads when the
// gateway stops (code 1001): the client reconnects, to another replica
// behind the load balancer.
const GoingAwayReason = "The gateway is shutting down; connect again to continue."

// New builds the gateway of cfg: it starts the backend groups and builds
// the routes. cfg must come from config.Load or config.Parse, given
// CheckCredentials so that the problems of its credentials are said at
// their lines; New refuses them too, without.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	g := &Gateway{log: opts.Logger, getenv: opts.Getenv, configPath: opts.ConfigPath, version: opts.Version, override: opts.Override, groups: map[string]*group{}, tenants: map[string]*tenant{},
		sessions: map[*capnweb.Session]struct{}{}, now: time.Now}
	g.handles = &handleRoutes{pins: newPins(cfg.Pins.Size), ids: newIDCodec(cfg.ExecutionIDs.Key), members: map[string]*member{}}
	g.base, g.cancel = context.WithCancel(context.Background())
	var err error
	if g.tracing, err = startTracing(cfg.Tracing, opts.Version, g.log); err != nil {
		g.Close()
		return nil, err
	}
	g.wire = capnweb.NewMemoryBudget(int64(cfg.Limits.WireMemoryMB) << 20)
	for _, b := range cfg.Backends {
		nameOf := func(url string) string { return g.handles.ids.memberName(b.Name, url) }
		tenants := func() []string { return g.tenantsOn(b.Name) }
		grp, err := newGroup(b, opts.Kinds, upstream.Env{Logger: g.log, Policy: g.policyOf}, nameOf, tenants)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.groups[b.Name] = grp
		if b.Remote != nil && b.Remote.Discover != nil {
			r := opts.Resolver
			if r == nil {
				r = net.DefaultResolver
			}
			g.startDiscovery(grp, b.Remote.Discover, r)
		}
		for _, m := range grp.current() {
			g.handles.addMember(m)
		}
	}
	g.metrics = newMetrics(g)
	st, err := g.build(cfg)
	if err != nil {
		g.Close()
		return nil, err
	}
	g.state.Store(st)
	g.probeMembers()
	g.memoryLimit = opts.MemoryLimit
	g.setMemoryLimit(cfg)
	return g, nil
}

// setMemoryLimit measures the process's base and sets its soft memory
// limit to it plus the wire budget's bound, so that what connections hold
// comes back to the system before the resident size runs past the bound
// (see internal/memlimit); an operator's GOMEMLIMIT stays. At New, and at
// each reload: a reload may change what the gateway holds of its own.
func (g *Gateway) setMemoryLimit(cfg *config.Config) {
	if !g.memoryLimit {
		return
	}
	memlimit.Set(int64(cfg.Limits.WireMemoryMB)<<20, g.wire.Held(), g.getenv).Log(g.log)
}

// tenantsOn are the tenants the current configuration puts on group.
func (g *Gateway) tenantsOn(group string) []string {
	st := g.state.Load()
	if st == nil {
		return nil
	}
	var out []string
	for _, tc := range st.cfg.Tenants {
		if tc.Backend == group {
			out = append(out, tc.Name)
		}
	}
	return out
}

// probeMembers opens every tenant's session to every member of its remote
// group (one a probe answered before is left as it is), so that a member
// that cannot honour a tenant's settings says so now: at start, and at a
// reload that changed a tenant's settings.
func (g *Gateway) probeMembers() {
	for _, grp := range g.groups {
		grp.probeTenants(grp.current())
	}
}

// state is what one configuration serves: its credentials, tenants and
// routes. Connections keep the tenant they authenticated as.
type state struct {
	cfg     *config.Config
	authn   auth.Authenticator
	tenants map[string]*tenant
	router  chi.Router
	// adminToken is the bearer token of the admin listener; empty: none.
	adminToken string
	// policies are the tenants' policies, which their groups' members
	// ask for (policyOf).
	policies map[string]config.Policy
}

// policyOf is a tenant's policy as the current configuration says: a local
// group asks on every placement (its share of the workers), a remote
// member's session at connect time (what it is told of the tenant, and a
// session whose tenant's settings a reload changed is replaced), so a
// reload takes effect at once.
func (g *Gateway) policyOf(tenant string) config.Policy {
	if st := g.state.Load(); st != nil {
		return st.policies[tenant]
	}
	return config.Policy{}
}

// build makes the state of cfg, reusing the tenants that already exist so
// that their open connections, counters and retained executions carry over.
func (g *Gateway) build(cfg *config.Config) (*state, error) {
	st := &state{cfg: cfg, tenants: map[string]*tenant{}, policies: map[string]config.Policy{}}
	for _, tc := range cfg.Tenants {
		st.policies[tc.Name] = tc.Policy
	}
	st.adminToken = cfg.Admin.Token
	var err error
	if st.authn, err = buildAuthenticator(cfg.Credentials); err != nil {
		return nil, err
	}
	for _, tc := range cfg.Tenants {
		if g.groups[tc.Backend] == nil {
			return nil, fmt.Errorf("tenant %s: backend %s is not running; backends change only on a restart", tc.Name, tc.Backend)
		}
	}
	st.router = g.routes(st)
	// Only now, with nothing left to fail, touch the live tenants. The
	// router reads st.tenants when a request arrives, after this.
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, tc := range cfg.Tenants {
		t := g.tenants[tc.Name]
		if t != nil {
			t.configure(tc, g.groups[tc.Backend])
		} else {
			t = newTenant(tc, g.groups[tc.Backend], g)
			g.tenants[tc.Name] = t
		}
		st.tenants[tc.Name] = t
	}
	return st, nil
}

// Reload serves cfg from now on: tenants, keys, JWT settings, policies and
// routes change without dropping open connections (they keep serving the
// tenant they authenticated as); a revoked key is refused on new
// connections. The members of a remote group change too (applyMembers).
// What else runs underneath (listeners, backend groups, the pin table, the
// id key) changes only on a restart, so a cfg that changes it is refused,
// naming all it changed, and the running configuration stays.
func (g *Gateway) Reload(cfg *config.Config) error {
	cur := g.state.Load().cfg
	var changed []string
	for _, c := range []struct {
		what     string
		old, new any
	}{
		{"listen", cur.Listen, cfg.Listen},
		{"whether the listener uses TLS", cur.TLS == nil, cfg.TLS == nil},
		{"admin.listen", cur.Admin.Listen, cfg.Admin.Listen},
		{"whether the admin listener uses TLS", cur.Admin.TLS == nil, cfg.Admin.TLS == nil},
		{"backends (other than the members of a remote group)", withoutMembers(cur.Backends), withoutMembers(cfg.Backends)},
		{"pins", cur.Pins, cfg.Pins},
		{"executionIds", cur.ExecutionIDs, cfg.ExecutionIDs},
		{"tracing", cur.Tracing, cfg.Tracing},
		{"limits.wireMemoryMB", cur.Limits.WireMemoryMB, cfg.Limits.WireMemoryMB},
	} {
		if !reflect.DeepEqual(c.old, c.new) {
			changed = append(changed, c.what)
		}
	}
	if len(changed) > 0 {
		// Callers say that the running configuration stays.
		return fmt.Errorf("%s changed, which takes a restart", listing(changed))
	}
	st, err := g.build(cfg)
	if err != nil {
		return err
	}
	g.applyMembers(cfg)
	g.state.Store(st)
	g.probeMembers()
	g.setMemoryLimit(cfg)
	g.log.Info("configuration reloaded", "tenants", len(cfg.Tenants), "routes", len(cfg.Routes), "configDigest", cfg.Digest)
	return nil
}

// listing joins names as a sentence does: "a", "a and b", "a, b and c".
func listing(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Handler is the gateway's HTTP handler; it serves the current state.
func (g *Gateway) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.state.Load().router.ServeHTTP(w, r)
	})
}

// track records an open executor session; false once the gateway closed.
func (g *Gateway) track(s *capnweb.Session) bool {
	g.sessMu.Lock()
	defer g.sessMu.Unlock()
	if g.sessions == nil {
		return false
	}
	g.sessions[s] = struct{}{}
	return true
}

func (g *Gateway) untrack(s *capnweb.Session) {
	g.sessMu.Lock()
	delete(g.sessions, s)
	g.sessMu.Unlock()
}

// Close ends every session, with code 1001 and GoingAwayReason so that
// clients know to reconnect, and stops every backend group.
func (g *Gateway) Close() error {
	g.sessMu.Lock()
	open := g.sessions
	g.sessions = nil
	g.sessMu.Unlock()
	var wg sync.WaitGroup
	for s := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.CloseWith(1001, GoingAwayReason)
		}()
	}
	wg.Wait()
	g.cancel()
	var errs []error
	g.mu.Lock()
	for _, t := range g.tenants {
		errs = append(errs, t.Close())
	}
	g.mu.Unlock()
	for _, grp := range g.groups {
		errs = append(errs, grp.close())
	}
	errs = append(errs, g.stopTracing())
	return errors.Join(errs...)
}

// ReloadFile re-reads the configuration file the gateway was started from
// (Options.ConfigPath) and reloads it. An invalid file is refused with a log
// line, and the running configuration stays.
func (g *Gateway) ReloadFile() error { return g.reloadFromFile() }

func (g *Gateway) reloadFromFile() error {
	if g.configPath == "" {
		return errors.New("this gateway was not started from a file")
	}
	cfg, err := config.LoadWith(g.configPath, g.getenv, CheckCredentials)
	if err == nil {
		if g.override != nil {
			g.override(cfg)
		}
		err = g.Reload(cfg)
	}
	if err != nil {
		g.log.Error("reload refused; the running configuration stays", "file", g.configPath, "error", strings.ReplaceAll(err.Error(), "\n", "; "))
		return err
	}
	return nil
}

// TLSConfig is the listener's TLS configuration, nil when it serves plain
// HTTP. Its certificate is the current configuration's, read from its
// files on every load, so a reload renews it.
func (g *Gateway) TLSConfig() *tls.Config {
	return g.tlsConfig(func(c *config.Config) *config.TLS { return c.TLS })
}

// AdminTLSConfig is the admin listener's TLS configuration, nil when it
// serves plain HTTP.
func (g *Gateway) AdminTLSConfig() *tls.Config {
	return g.tlsConfig(func(c *config.Config) *config.TLS { return c.Admin.TLS })
}

// tlsConfig serves the certificate of the current configuration's section
// of, nil when it has none (whether a listener has TLS takes a restart).
func (g *Gateway) tlsConfig(of func(*config.Config) *config.TLS) *tls.Config {
	if of(g.state.Load().cfg) == nil {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return of(g.state.Load().cfg).Certificate, nil
	}}
}
