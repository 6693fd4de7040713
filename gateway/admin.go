package gateway

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/supolka/codemode-gateway/internal/serving"
)

// AdminEndpoints are what one admin listener serves (serving.AdminEndpoints).
type AdminEndpoints = serving.AdminEndpoints

// NewAdminHandler serves the operator's endpoints (serving.NewAdminHandler).
func NewAdminHandler(a AdminEndpoints) http.Handler { return serving.NewAdminHandler(a) }

// AdminGuard wraps an operator's listener (serving.AdminGuard).
func AdminGuard(token func() string, open ...string) func(http.Handler) http.Handler {
	return serving.AdminGuard(token, open...)
}

// Texts an admin listener answers a refused request with.
const (
	AdminTokenRequired  = serving.AdminTokenRequired
	AdminBrowserRefused = serving.AdminBrowserRefused
)

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
			if !serving.WaitClosed(ctx, t.unanswered.Idle()) {
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
