package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminEndpoints are what one admin listener serves. A gateway and an
// executor server both build theirs with NewAdminHandler, so the routes,
// their texts and whatever guards them are the same for both.
type AdminEndpoints struct {
	// Registry is served at GET /metrics.
	Registry *prometheus.Registry
	// NotReady says why GET /readyz fails; "" when the process can serve.
	NotReady func() string
	// Reload re-reads the configuration at POST /reload; nil serves no
	// such route.
	Reload func() error
	// Token is the bearer token every request must carry, asked on each
	// request (so a reload that changes it takes effect at once); nil or
	// "" asks for none. AdminGuard applies it.
	Token func() string
}

// NewAdminHandler serves the operator's endpoints, for a listener of their
// own: /metrics (Prometheus), /healthz (the process is up), /readyz (it
// can serve) and, where there is a configuration to re-read, POST /reload,
// all behind AdminGuard, the probes open without the token. A GET route answers HEAD too, and a route asked
// with another method answers 405 naming the ones it takes.
func NewAdminHandler(a AdminEndpoints) http.Handler {
	token := a.Token
	if token == nil {
		token = func() string { return "" }
	}
	r := chi.NewRouter()
	r.Use(AdminGuard(token, "/healthz", "/readyz"), middleware.GetHead)
	allow := map[string]string{}
	handle := func(method, path string, h http.Handler) {
		r.Method(method, path, h)
		allow[path] = map[string]string{http.MethodGet: "GET, HEAD", http.MethodPost: "POST"}[method]
	}
	handle(http.MethodGet, "/metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{}))
	handle(http.MethodGet, "/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	if a.Reload != nil {
		handle(http.MethodPost, "/reload", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if err := a.Reload(); err != nil {
				http.Error(w, err.Error(), http.StatusUnprocessableEntity)
				return
			}
			fmt.Fprintln(w, "reloaded")
		}))
	}
	handle(http.MethodGet, "/readyz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if reason := a.NotReady(); reason != "" {
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	}))
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		methods, ok := allow[req.URL.Path]
		if !ok {
			http.NotFound(w, req) // a method chi does not know, on no route
			return
		}
		w.Header().Set("Allow", methods)
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
	})
	return r
}

// AdminHandler serves the gateway's operator endpoints (NewAdminHandler):
// /readyz passes unless notReady says why not; admin.tokenEnv's token
// guards them all.
func (g *Gateway) AdminHandler() http.Handler {
	return NewAdminHandler(AdminEndpoints{Registry: g.metrics.reg, NotReady: g.notReady, Reload: g.reloadFromFile,
		Token: func() string { return g.state.Load().adminToken }})
}

// notReady says why the replica cannot serve: it is draining, a group
// whose readiness is required has no usable member, or no group has one.
// A group that is down but optional leaves the replica serving the tenants
// of the others.
func (g *Gateway) notReady() string {
	if g.draining.Load() {
		return "draining"
	}
	any := false
	for _, name := range slices.Sorted(maps.Keys(g.groups)) {
		grp := g.groups[name]
		usable := grp.usable()
		any = any || usable
		if !usable && grp.required {
			return fmt.Sprintf("backend %s has no healthy member, and its readiness is required", name)
		}
	}
	if !any {
		return "no backend group has a healthy member"
	}
	return ""
}

// Drain readies the gateway to stop: readiness fails at once, new
// executions are turned away (QUEUE_OVERFLOW, retryable elsewhere), the
// executions in flight finish until ctx ends, and then every retained
// execution this replica pinned is closed on its backend. It returns
// ctx's error when executions were still running at its end.
func (g *Gateway) Drain(ctx context.Context) error {
	g.draining.Store(true)
	g.log.Info("draining: new executions are refused, waiting for those in flight")
	err := g.executionsEnd(ctx)
	if err != nil {
		g.log.Warn("drain timeout: executions still in flight", "count", g.executionsInFlight())
	}
	closed := g.handles.pins.closeAll()
	g.log.Info("drained", "handles_closed", closed)
	return err
}

// executionsEnd returns once no tenant has an execution in flight, woken
// by each tenant's last one ending, or with ctx's error.
func (g *Gateway) executionsEnd(ctx context.Context) error {
	for g.executionsInFlight() > 0 {
		g.mu.Lock()
		tenants := slices.Collect(maps.Values(g.tenants))
		g.mu.Unlock()
		for _, t := range tenants {
			if !waitClosed(ctx, t.unanswered.idle()) {
				return ctx.Err()
			}
		}
	}
	return nil
}

func (g *Gateway) executionsInFlight() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := int64(0)
	for _, t := range g.tenants {
		n += t.unanswered.Load()
	}
	return n
}
