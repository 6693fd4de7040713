package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/connlimit"
	"github.com/supolka/codemode-gateway/internal/serving"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// A request on a configured path passes these steps, each a chi
// middleware that either refuses it (with its status, text, metric and
// log line) or hands it on with what it learned in the request's context:
//
//	closeUnlessAdmitted → chooseRoute → authenticate → authorize →
//	checkOrigin → admitConnection → serveRoute
//
// Nothing before admitConnection keeps the connection open after its
// answer: a client without a credential holds no idle connection.

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

// chosenRoute is the route a request goes to and the subprotocol it
// answers with ("" for none).
type chosenRoute struct {
	*route
	proto string
}

// contextKey[T] carries the request's T: its chosenRoute, its
// auth.Identity, its *tenant.
type contextKey[T any] struct{}

func withValue[T any](r *http.Request, v T) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), contextKey[T]{}, v))
}

func valueOf[T any](r *http.Request) T {
	v, _ := r.Context().Value(contextKey[T]{}).(T)
	return v
}

func (g *Gateway) routes(st *state) chi.Router {
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
			rt.upstream = newProxy(rc.UpstreamURL)
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
		r.With(closeUnlessAdmitted, chooseRoute(byPath[p]), g.authenticate(st), g.authorize(st), g.checkOrigin, g.admitConnection).
			Handle(p, g.serveRoute(st))
	}
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "no route serves this path", http.StatusNotFound)
	})
	return r
}

// closeUnlessAdmitted closes the connection after a refusal's answer;
// admitConnection lifts it.
func closeUnlessAdmitted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		next.ServeHTTP(w, r)
	})
}

// chooseRoute picks the path's route for the request (pick), or answers
// 400 saying what the path serves.
func chooseRoute(pr *pathRoutes) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rt, proto, err := pr.pick(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			next.ServeHTTP(w, withValue(r, chosenRoute{rt, proto}))
		})
	}
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

// authenticate takes the bearer credential off the request and proves the
// identity it carries under st's keys, or answers 401.
func (g *Gateway) authenticate(st *state) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			cred, err := auth.FromRequest(r)
			var id auth.Identity
			if err == nil {
				id, err = st.authn.Authenticate(r.Context(), cred.Token)
			}
			if err != nil {
				tenant := st.knownTenant(auth.TenantOf(err))
				g.metrics.authFailures.WithLabelValues(tenant, "unauthenticated").Inc()
				g.log.Info("authentication failed", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", authReason(err), "tenant", tenant)
				w.Header().Set("WWW-Authenticate", `Bearer realm="codemode-gateway"`)
				http.Error(w, "a valid bearer credential is required: Authorization: Bearer <key>, or a WebSocket subprotocol entry "+auth.SubprotocolPrefix+"<key>", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, withValue(r, id))
		})
	}
}

// unknownTenant is the tenant label of an auth failure no configured
// tenant can be held to.
const unknownTenant = "unknown"

// knownTenant is name when it is a tenant of st's configuration, else
// unknownTenant: a label never carries a name the configuration lacks.
func (st *state) knownTenant(name string) string {
	if st.tenants[name] == nil {
		return unknownTenant
	}
	return name
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

// authorize finds the identity's tenant in st, or answers 403 when there
// is none or the route is not one of its routes.
func (g *Gateway) authorize(st *state) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id, rt := valueOf[auth.Identity](r), valueOf[chosenRoute](r)
			t := st.tenants[id.Tenant]
			if t == nil || (rt.tenants != nil && !rt.tenants[id.Tenant]) {
				g.metrics.authFailures.WithLabelValues(st.knownTenant(id.Tenant), "forbidden").Inc()
				msg := "tenant refused on route"
				if t == nil {
					// Only a token can name a tenant the configuration lacks:
					// the issuer and this file disagree, not the routes.
					msg = "credential names no configured tenant"
				}
				// A token's claim is as long as its issuer made it: cut it
				// where it is echoed.
				name := protocol.Echo(id.Tenant)
				g.log.Info(msg, "path", r.URL.Path, "tenant", name)
				http.Error(w, fmt.Sprintf("tenant %q may not use this route", name), http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, withValue(r, t))
		})
	}
}

// checkOrigin answers 403 to a browser's request from an origin the route
// does not allow (originAllowed).
func (g *Gateway) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := valueOf[chosenRoute](r)
		if !originAllowed(r, rt.cfg.Origins) {
			g.metrics.authFailures.WithLabelValues(valueOf[*tenant](r).name, "forbidden").Inc()
			g.log.Info("origin refused on route", "route", rt.cfg.Path, "kind", rt.cfg.Kind, "subprotocol", rt.proto, "path", r.URL.Path,
				"origin", r.Header.Get("Origin"), "tenant", valueOf[auth.Identity](r).Tenant)
			http.Error(w, "this origin may not use this route", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// originAllowed: a request without an Origin (not a browser) and a
// same-origin one pass; any other origin must match a pattern. Same origin
// means the same host and the same scheme: a page served over plain HTTP
// on the gateway's host is not the origin of its TLS listener. Behind a
// load balancer that terminates TLS the scheme is its X-Forwarded-Proto,
// a header no page can set on a WebSocket handshake.
//
// The WebSocket library's AcceptOptions.OriginPatterns does not do this:
// its same-origin test compares the host alone, whatever the scheme; it
// runs only inside websocket.Accept, so not for proxy routes, and answers
// its own 403 without the refusal's metric and log line; it reads an IPv6
// literal's brackets as a character class; and its "*" matches the empty
// host of an opaque origin ("null"), which this gateway always refuses.
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

// admitConnection holds one of the tenant's open connections for the
// request's length, or answers 429 past policy.maxConnections. An
// admitted connection counts as authenticated (connlimit) and stays open.
func (g *Gateway) admitConnection(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := valueOf[*tenant](r)
		maxConns := t.settings.Load().policy.MaxConnections
		if n := t.connections.Add(1); n > int64(maxConns) {
			t.connections.Add(-1)
			g.metrics.authFailures.WithLabelValues(t.name, "too_many_connections").Inc()
			refuseConnection(w, t, maxConns)
			return
		}
		defer t.connections.Add(-1)
		w.Header().Del("Connection")
		connlimit.Authenticated(r.Context())
		conns := g.metrics.connections.WithLabelValues(t.name, valueOf[chosenRoute](r).cfg.Kind)
		conns.Inc()
		defer conns.Dec()
		next.ServeHTTP(w, r)
	})
}

// serveRoute serves an admitted request: the ExecutorApi over a WebSocket
// on an executor route, the upstream on a proxy route.
func (g *Gateway) serveRoute(st *state) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		rt, id := valueOf[chosenRoute](req), valueOf[auth.Identity](req)
		connID := serving.RequestID()
		log := valueOf[*tenant](req).log.With("connection", connID, "path", req.URL.Path, "kind", rt.cfg.Kind, "credential", id.Credential)
		switch rt.cfg.Kind {
		case "executor":
			sess, err := g.serveSession(w, req, st, connID)
			if err != nil {
				log.Info("upgrade failed", "error", err)
				return
			}
			log.Info("connection closed", "durationMs", millis(time.Since(start)), "reason", sess.Err())
		case "proxy":
			req.Header.Set(tenantHeader, id.Tenant)
			rt.upstream.ServeHTTP(w, req)
			log.Info("proxied", "durationMs", millis(time.Since(start)))
		}
	})
}

// serveSession upgrades req to a capnweb session serving the tenant's
// ExecutorApi, traced as connection connID, and returns it once it ended.
func (g *Gateway) serveSession(w http.ResponseWriter, req *http.Request, st *state, connID string) (*capnweb.Session, error) {
	rt, t := valueOf[chosenRoute](req), valueOf[*tenant](req)
	// checkOrigin checked the origin already.
	opts := &websocket.AcceptOptions{InsecureSkipVerify: true}
	if rt.proto != "" {
		opts.Subprotocols = []string{rt.proto}
	}
	base, span := g.tracing.StartConnection(serving.WithConnectionID(g.base, connID), req.Header,
		telemetry.Tenant.String(t.name), telemetry.URLPath.String(req.URL.Path), telemetry.Subprotocol.String(rt.proto))
	defer span.End()
	sess, err := capnweb.Accept(w, req, t.api.Target(), executorapi.SessionOptions(capnweb.Options{
		MaxMessageSize: rt.cfg.MaxMessageBytes,
		MaxExports:     st.cfg.Limits.MaxCallsPerConnection,
		Memory:         g.wire,
		BaseContext:    base,
		Accept:         opts,
	}))
	if err != nil {
		return nil, err
	}
	if !g.track(sess) {
		sess.CloseWith(1001, GoingAwayReason)
	}
	<-sess.Done()
	g.untrack(sess)
	return sess, nil
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
