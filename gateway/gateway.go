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
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/connlimit"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol/capnweb"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// Options are the parts of a gateway that are not configuration.
type Options struct {
	// Logger receives one line per connection; slog.Default() when nil.
	Logger *slog.Logger
	// Getenv reads secrets named by the configuration; os.Getenv when nil.
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
}

// GoingAwayReason is the close reason an executor session reads when the
// gateway stops (code 1001): the client reconnects, to another replica
// behind the load balancer.
const GoingAwayReason = "The gateway is shutting down; connect again to continue."

// New builds the gateway of cfg: it starts the backend groups and builds
// the routes. cfg must come from config.Load or config.Parse.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	g := &Gateway{log: opts.Logger, getenv: opts.Getenv, configPath: opts.ConfigPath, version: opts.Version, override: opts.Override, groups: map[string]*group{}, tenants: map[string]*tenant{},
		sessions: map[*capnweb.Session]struct{}{}, now: time.Now}
	var idKey []byte
	if env := cfg.ExecutionIDs.KeyEnv; env != "" {
		idKey = []byte(opts.Getenv(env))
	}
	g.handles = &handleRoutes{pins: newPins(cfg.Pins.Size), ids: newIDCodec(idKey), members: map[string]*member{}}
	g.base, g.cancel = context.WithCancel(context.Background())
	var err error
	if g.tracing, err = startTracing(cfg.Tracing, opts.Getenv, opts.Version); err != nil {
		g.Close()
		return nil, err
	}
	g.wire = capnweb.NewMemoryBudget(int64(cfg.Limits.WireMemoryMB) << 20)
	for _, b := range cfg.Backends {
		nameOf := func(url string) string { return g.handles.ids.memberName(b.Name, url) }
		grp, err := newGroup(b, opts.Getenv, g.log, g.shareOf, nameOf)
		if err != nil {
			g.Close()
			return nil, err
		}
		g.groups[b.Name] = grp
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
	return g, nil
}

// state is what one configuration serves: its credentials, tenants and
// routes. Connections keep the tenant they authenticated as.
type state struct {
	cfg     *config.Config
	tenants map[string]*tenant
	router  chi.Router
	// adminToken is the bearer token of the admin listener; empty: none.
	adminToken string
	// shares are the tenants' shares of their local groups.
	shares map[string]local.Share
}

// shareOf is a tenant's share of its local group as the current
// configuration says; local groups ask on every placement, so a reload
// takes effect at once.
func (g *Gateway) shareOf(tenant string) local.Share {
	if st := g.state.Load(); st != nil {
		return st.shares[tenant]
	}
	return local.Share{}
}

// build makes the state of cfg, reusing the tenants that already exist so
// that their open connections, counters and retained executions carry over.
func (g *Gateway) build(cfg *config.Config) (*state, error) {
	st := &state{cfg: cfg, tenants: map[string]*tenant{}, shares: map[string]local.Share{}}
	for _, tc := range cfg.Tenants {
		st.shares[tc.Name] = local.Share{Weight: tc.Policy.Weight, CPUSlots: tc.Policy.CPUSlots}
	}
	if env := cfg.Admin.TokenEnv; env != "" {
		st.adminToken = g.getenv(env)
	}
	for _, tc := range cfg.Tenants {
		if g.groups[tc.Backend] == nil {
			return nil, fmt.Errorf("tenant %s: backend %s is not running; backends change only on a restart", tc.Name, tc.Backend)
		}
	}
	var err error
	if st.router, err = g.routes(st); err != nil {
		return nil, err
	}
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
// id key) changes only on a restart, so a cfg that changes it is refused
// and the running configuration stays.
func (g *Gateway) Reload(cfg *config.Config) error {
	cur := g.state.Load().cfg
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
			return fmt.Errorf("%s changed, which takes a restart; the running configuration stays", c.what)
		}
	}
	st, err := g.build(cfg)
	if err != nil {
		return err
	}
	g.applyMembers(cfg)
	g.state.Store(st)
	g.log.Info("configuration reloaded", "tenants", len(cfg.Tenants), "routes", len(cfg.Routes), "configDigest", cfg.Digest)
	return nil
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

// pathRoutes are the routes of one path, told apart by subprotocol.
type pathRoutes struct {
	byProto map[string]*route
	deflt   *route // the route with no subprotocols, if any
	offers  []string
}

type route struct {
	cfg      config.Route
	tenants  map[string]bool // nil: every tenant
	upstream *httputil.ReverseProxy
}

func (g *Gateway) routes(st *state) (chi.Router, error) {
	r := chi.NewRouter()
	byPath := map[string]*pathRoutes{}
	var order []string
	for _, rc := range st.cfg.Routes {
		pr := byPath[rc.Path]
		if pr == nil {
			pr = &pathRoutes{byProto: map[string]*route{}}
			byPath[rc.Path] = pr
			order = append(order, rc.Path)
		}
		rt := &route{cfg: rc}
		if len(rc.Tenants) > 0 {
			rt.tenants = map[string]bool{}
			for _, t := range rc.Tenants {
				rt.tenants[t] = true
			}
		}
		if rc.Kind == "proxy" {
			up, err := url.Parse(rc.Upstream)
			if err != nil {
				return nil, fmt.Errorf("route %s: upstream: %w", rc.Path, err)
			}
			rt.upstream = newProxy(up)
		}
		if len(rc.Subprotocols) == 0 {
			pr.deflt = rt
		}
		for _, p := range rc.Subprotocols {
			pr.byProto[p] = rt
			pr.offers = append(pr.offers, p)
		}
	}
	for _, p := range order {
		pr := byPath[p]
		r.Handle(p, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { g.serve(w, req, st, pr) }))
	}
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "no route serves this path", http.StatusNotFound)
	})
	return r, nil
}

// pick chooses the route for a request: the first subprotocol the client
// offers that a route of the path answers, else the path's default route
// when the client offers none. Credential entries never count.
func (pr *pathRoutes) pick(req *http.Request) (*route, string, error) {
	var offered []string
	for _, p := range auth.OfferedSubprotocols(req) {
		if !auth.IsCredentialSubprotocol(p) {
			offered = append(offered, p)
		}
	}
	for _, p := range offered {
		if rt := pr.byProto[p]; rt != nil {
			return rt, p, nil
		}
	}
	// A proxy route leaves subprotocols to its upstream; an executor route
	// without any serves only clients that offer none, since it would
	// answer with none.
	if pr.deflt != nil && (len(offered) == 0 || req.Header.Get("Upgrade") == "" || pr.deflt.cfg.Kind == "proxy") {
		return pr.deflt, "", nil
	}
	if len(pr.offers) == 0 {
		return nil, "", fmt.Errorf("this path serves WebSocket upgrades that offer no subprotocol; the request offered %s", strings.Join(offered, ", "))
	}
	return nil, "", fmt.Errorf("no route on this path answers the offered subprotocols (%s); offer one of: %s", strings.Join(offered, ", "), strings.Join(pr.offers, ", "))
}

func (g *Gateway) serve(w http.ResponseWriter, req *http.Request, st *state, pr *pathRoutes) {
	start := time.Now()
	// A refused request's connection closes after the answer: a client
	// without a credential holds no idle connection.
	w.Header().Set("Connection", "close")
	rt, proto, err := pr.pick(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cred, err := auth.FromRequest(req)
	var id auth.Identity
	if err == nil {
		id, err = st.cfg.Authenticator.Authenticate(req.Context(), cred.Token)
	}
	if err != nil {
		g.metrics.authFailures.WithLabelValues("unauthenticated").Inc()
		g.log.Info("authentication failed", "path", req.URL.Path, "remote", req.RemoteAddr, "reason", authReason(err))
		w.Header().Set("WWW-Authenticate", `Bearer realm="codemode-gateway"`)
		http.Error(w, "a valid bearer credential is required: Authorization: Bearer <key>, or a WebSocket subprotocol entry "+auth.SubprotocolPrefix+"<key>", http.StatusUnauthorized)
		return
	}
	t := st.tenants[id.Tenant]
	if t == nil || (rt.tenants != nil && !rt.tenants[id.Tenant]) {
		g.metrics.authFailures.WithLabelValues("forbidden").Inc()
		g.log.Info("tenant refused on route", "path", req.URL.Path, "tenant", id.Tenant)
		http.Error(w, fmt.Sprintf("tenant %q may not use this route", id.Tenant), http.StatusForbidden)
		return
	}
	if !originAllowed(req, rt.cfg.Origins) {
		g.metrics.authFailures.WithLabelValues("forbidden").Inc()
		g.log.Info("origin refused on route", "route", rt.cfg.Path, "kind", rt.cfg.Kind, "subprotocol", proto, "path", req.URL.Path, "origin", req.Header.Get("Origin"), "tenant", id.Tenant)
		http.Error(w, "this origin may not use this route", http.StatusForbidden)
		return
	}
	maxConns := t.settings.Load().policy.MaxConnections
	if n := t.connections.Add(1); n > int64(maxConns) {
		t.connections.Add(-1)
		g.metrics.authFailures.WithLabelValues("too_many_connections").Inc()
		refuseConnection(w, t, maxConns)
		return
	}
	defer t.connections.Add(-1)
	w.Header().Del("Connection")
	connlimit.Authenticated(req.Context())
	conns := g.metrics.connections.WithLabelValues(id.Tenant, rt.cfg.Kind)
	conns.Inc()
	defer conns.Dec()
	connID := requestID()
	log := t.log.With("connection", connID, "path", req.URL.Path, "kind", rt.cfg.Kind, "credential", id.Credential)

	switch rt.cfg.Kind {
	case "executor":
		opts := &websocket.AcceptOptions{InsecureSkipVerify: true} // origins were checked above
		if proto != "" {
			opts.Subprotocols = []string{proto}
		}
		base, span := g.tracing.StartConnection(withConnectionID(g.base, connID), req.Header,
			telemetry.Tenant.String(id.Tenant), telemetry.URLPath.String(req.URL.Path), telemetry.Subprotocol.String(proto))
		defer span.End()
		sess, err := capnweb.Accept(w, req, t.api.Target(), executorapi.SessionOptions(capnweb.Options{
			MaxMessageSize: rt.cfg.MaxMessageBytes,
			MaxExports:     st.cfg.Limits.MaxCallsPerConnection,
			Memory:         g.wire,
			BaseContext:    base,
			Accept:         opts,
		}))
		if err != nil {
			log.Info("upgrade failed", "error", err)
			return
		}
		if !g.track(sess) {
			sess.CloseWith(1001, GoingAwayReason)
		}
		<-sess.Done()
		g.untrack(sess)
		log.Info("connection closed", "durationMs", millis(time.Since(start)), "reason", sess.Err())
	case "proxy":
		req.Header.Set(tenantHeader, id.Tenant)
		rt.upstream.ServeHTTP(w, req)
		log.Info("proxied", "durationMs", millis(time.Since(start)))
	}
}

// tenantHeader tells a proxied upstream which tenant the gateway
// authenticated; the caller's own credential is never forwarded.
const tenantHeader = "X-Codemode-Tenant"

func newProxy(up *url.URL) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.SetXForwarded()
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Set(tenantHeader, pr.In.Header.Get(tenantHeader))
			var kept []string
			for _, p := range auth.OfferedSubprotocols(pr.In) {
				if !auth.IsCredentialSubprotocol(p) {
					kept = append(kept, p)
				}
			}
			pr.Out.Header.Del("Sec-WebSocket-Protocol")
			if len(kept) > 0 {
				pr.Out.Header.Set("Sec-WebSocket-Protocol", strings.Join(kept, ", "))
			}
		},
	}
}

// originAllowed: a request without an Origin (not a browser) and a
// same-origin one pass; any other origin must match a pattern. Same origin
// means the same host and the same scheme: a page served over plain HTTP
// on the gateway's host is not the origin of its TLS listener. Behind a
// load balancer that terminates TLS the scheme is its X-Forwarded-Proto,
// a header no page can set on a WebSocket handshake.
func originAllowed(req *http.Request, patterns []config.OriginPattern) bool {
	o := req.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	scheme := "http"
	if req.TLS != nil {
		scheme = "https"
	} else if p := strings.ToLower(strings.TrimSpace(strings.Split(req.Header.Get("X-Forwarded-Proto"), ",")[0])); p == "https" {
		scheme = p
	}
	if strings.EqualFold(u.Host, req.Host) && strings.EqualFold(u.Scheme, scheme) {
		return true
	}
	return slices.ContainsFunc(patterns, func(p config.OriginPattern) bool { return p.Matches(u.Scheme, u.Host) })
}

// authReason is safe to log: it never holds the credential.
func authReason(err error) string {
	switch {
	case errors.Is(err, auth.ErrNoCredential):
		return "no credential"
	case errors.Is(err, auth.ErrUnrecognized):
		return "unrecognized credential"
	default:
		return strings.ReplaceAll(err.Error(), "\n", ": ")
	}
}

// ReloadFile re-reads the configuration file the gateway was started from
// (Options.ConfigPath) and reloads it. An invalid file is refused with a log
// line, and the running configuration stays.
func (g *Gateway) ReloadFile() error { return g.reloadFromFile() }

func (g *Gateway) reloadFromFile() error {
	if g.configPath == "" {
		return errors.New("this gateway was not started from a file")
	}
	cfg, err := config.LoadWith(g.configPath, g.getenv)
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
