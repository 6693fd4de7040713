package serving

import (
	"fmt"
	"net/http"

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
