package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves the operator's endpoints, for a listener of their
// own: /metrics (Prometheus), /healthz (the process is up) and /readyz
// (not draining, and every backend group has a usable member), behind
// AdminGuard with admin.tokenEnv's token.
func (g *Gateway) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /reload", func(w http.ResponseWriter, _ *http.Request) {
		if err := g.reloadFromFile(); err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		fmt.Fprintln(w, "reloaded")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if reason := g.notReady(); reason != "" {
			http.Error(w, reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return AdminGuard(func() string { return g.state.Load().adminToken })(mux)
}

func (g *Gateway) notReady() string {
	if g.draining.Load() {
		return "draining"
	}
	for _, grp := range g.groups {
		usable := false
		for _, m := range grp.members {
			usable = usable || m.healthy.Load()
		}
		if !usable {
			return fmt.Sprintf("backend %s has no healthy member", grp.name)
		}
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
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		n := int64(0)
		g.mu.Lock()
		for _, t := range g.tenants {
			n += t.inFlight.Load()
		}
		g.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
			g.log.Warn("drain timeout: executions still in flight", "count", n)
			break wait
		case <-tick.C:
		}
	}
	closed := g.handles.pins.closeAll()
	g.log.Info("drained", "handles_closed", closed)
	return err
}
