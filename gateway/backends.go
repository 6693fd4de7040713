package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/local/webplatform"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

// member is one executor of a backend group: the local pool, or one remote
// executor server.
type member struct {
	name     string // group/index, for logs and metrics
	exec     protocol.Executor
	inFlight atomic.Int64
	healthy  atomic.Bool
	log      *slog.Logger
}

// group is a named backend group.
type group struct {
	name    string
	members []*member
	// nativeOutbound: the group's operator allows native fetch.
	nativeOutbound bool
	// defaultTimeoutMs is the run bound the group gives a request that
	// sets none.
	defaultTimeoutMs int64
	stop             context.CancelFunc
	wg               sync.WaitGroup
}

func newGroup(b config.Backend, getenv config.Getenv, log *slog.Logger, shares func(tenant string) local.Share) (*group, error) {
	g := &group{name: b.Name, defaultTimeoutMs: protocol.DefaultTimeout}
	switch b.Type {
	case "local":
		s := b.Local.Settings(runtime.NumCPU())
		ex, err := local.New(local.Options{
			MinWorkers:         s.MinWorkers,
			MaxWorkers:         s.MaxWorkers,
			RunsPerWorker:      s.RunsPerWorker,
			WorkerMemoryMB:     s.WorkerMemoryMB,
			QueueBound:         s.Queue,
			QueueTimeout:       s.QueueTimeout,
			WorkerIdleTimeout:  s.WorkerIdleTimeout,
			Shares:             shares,
			MemoryLimitMB:      s.MemoryMB,
			DefaultTimeoutMs:   b.Local.DefaultTimeoutMs,
			HandlesIdleTimeout: b.Local.HandlesIdleTimeout.Std(),
			Logger:             log.With("backend", b.Name),
			Native:             nativeOptions(b.Local),
			WorkerUser:         b.Local.WorkerUser,
			NoSeccomp:          b.Local.DisableSeccomp,
		})
		if err != nil {
			return nil, fmt.Errorf("backend %s: %w", b.Name, err)
		}
		m := &member{name: b.Name, exec: ex, log: log.With("backend", b.Name)}
		m.healthy.Store(true)
		g.members = []*member{m}
		g.nativeOutbound = b.Local.NativeOutbound
		if b.Local.DefaultTimeoutMs > 0 {
			g.defaultTimeoutMs = b.Local.DefaultTimeoutMs
		}
	case "remote":
		for i, rm := range b.Remote.Members {
			h := http.Header{}
			if rm.KeyEnv != "" {
				h.Set("Authorization", "Bearer "+getenv(rm.KeyEnv))
			}
			name := fmt.Sprintf("%s/%d", b.Name, i)
			m := &member{
				name: name,
				exec: remote.New(rm.URL, remote.Options{Header: h, DialTimeout: b.Remote.DialTimeout.Std()}),
				log:  log.With("backend", b.Name, "member", i, "url", rm.URL),
			}
			g.members = append(g.members, m)
		}
		// A remote server applies its own operator's outbound veto.
		g.nativeOutbound = true
		ctx, cancel := context.WithCancel(context.Background())
		g.stop = cancel
		g.checkHealth(ctx, b.Remote.DialTimeout.Std())
		g.wg.Add(1)
		go g.healthLoop(ctx, b.Remote.HealthInterval.Std(), b.Remote.DialTimeout.Std())
	}
	return g, nil
}

// nativeOptions are the local backend's native fetch settings; the config
// was validated, so every range parses.
func nativeOptions(l *config.LocalBackend) webplatform.NativeOptions {
	n := webplatform.NativeOptions{
		Vetoed:           !l.NativeOutbound,
		MaxResponseBytes: l.Native.MaxResponseBytes,
		MaxRedirects:     l.Native.MaxRedirects,
		RequestTimeout:   l.Native.RequestTimeout.Std(),
	}
	for _, c := range l.Native.Deny {
		n.Deny = append(n.Deny, netip.MustParsePrefix(c))
	}
	for _, c := range l.Native.Allow {
		n.Allow = append(n.Allow, netip.MustParsePrefix(c))
	}
	return n
}

// healthLoop pings every remote member each interval: an unhealthy member
// gets no new executions until a ping succeeds again.
func (g *group) healthLoop(ctx context.Context, every, timeout time.Duration) {
	defer g.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.checkHealth(ctx, timeout)
		}
	}
}

func (g *group) checkHealth(ctx context.Context, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, m := range g.members {
		r, ok := m.exec.(*remote.Executor)
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			err := r.Ping(pctx)
			was := m.healthy.Swap(err == nil)
			switch {
			case err != nil && was:
				m.log.Warn("executor server ejected: health check failed", "error", err)
			case err == nil && !was:
				m.log.Info("executor server admitted: health check passed")
			}
		}()
	}
	wg.Wait()
}

// candidates lists the healthy members, fewest executions in flight first.
// When none is healthy every member is listed, so that a request still
// learns why (its connection error) rather than a generic refusal.
func (g *group) candidates() []*member {
	var out []*member
	for _, m := range g.members {
		if m.healthy.Load() {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		out = append(out, g.members...)
	}
	// Insertion sort: groups are small.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].inFlight.Load() < out[j-1].inFlight.Load(); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// execute runs req on the least loaded member. A run that could not start
// there (the queue is full, or the server refused the connection) is tried
// on the next; a run that started is never replayed.
func (g *group) execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, *member, error) {
	var lastErr error
	for _, m := range g.candidates() {
		m.inFlight.Add(1)
		res, err := m.exec.Execute(ctx, req)
		m.inFlight.Add(-1)
		switch protocol.CodeOf(err) {
		case protocol.CodeQueueOverflow:
			lastErr = err
			continue
		case protocol.CodeConnectionRejected:
			m.healthy.Store(false)
			lastErr = err
			continue
		}
		return res, m, err
	}
	return nil, nil, lastErr
}

func (g *group) close() error {
	if g.stop != nil {
		g.stop()
		g.wg.Wait()
	}
	var errs []error
	for _, m := range g.members {
		errs = append(errs, m.exec.Close())
	}
	return errors.Join(errs...)
}
