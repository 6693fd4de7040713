package kinds

import (
	"fmt"
	"runtime"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/upstream"
	"github.com/supolka/codemode-gateway/protocol"
)

// Local makes a local group's one member: its worker pool, which places
// each tenant's runs by the weight and cpuSlots of its policy.
func Local(b config.Backend, _ config.RemoteMember, env upstream.Env) (protocol.PolicyExecutor, error) {
	s := b.Local.Settings(runtime.NumCPU())
	ex, err := local.New(local.Options{
		MinWorkers:         s.MinWorkers,
		MaxWorkers:         s.MaxWorkers,
		RunsPerWorker:      s.RunsPerWorker,
		WorkerMemoryMB:     s.WorkerMemoryMB,
		QueueBound:         s.Queue,
		QueueTimeout:       s.QueueTimeout,
		WorkerIdleTimeout:  s.WorkerIdleTimeout,
		Shares:             func(tenant string) local.Share { return share(env.Policy(tenant)) },
		MemoryLimitMB:      s.MemoryMB,
		DefaultTimeoutMs:   b.Local.DefaultTimeoutMs,
		HandlesIdleTimeout: b.Local.HandlesIdleTimeout.Std(),
		Logger:             env.Logger.With("backend", b.Name),
		Native:             nativeOptions(b.Local),
		WorkerUser:         b.Local.WorkerUser,
		NoSeccomp:          b.Local.DisableSeccomp,
	})
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", b.Name, err)
	}
	return ex, nil
}

// share is a tenant's share of its local group.
func share(p config.Policy) local.Share {
	return local.Share{Weight: p.Weight, CPUSlots: p.CPUSlots}
}

// nativeOptions are the local backend's native fetch settings, with the
// ranges validation parsed.
func nativeOptions(l *config.LocalBackend) local.NativeOptions {
	return local.NativeOptions{
		Vetoed:           !l.NativeOutbound,
		Deny:             l.Native.DenyRanges,
		Allow:            l.Native.AllowRanges,
		MaxResponseBytes: l.Native.MaxResponseBytes,
		MaxRedirects:     l.Native.MaxRedirects,
		RequestTimeout:   l.Native.RequestTimeout.Std(),
	}
}
