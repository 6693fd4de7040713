// Package memlimit holds the process's soft memory limit
// (debug.SetMemoryLimit) at its own base plus the bound of its wire budget,
// so that the collector and the scavenger give memory back before the
// resident size runs past that bound, rather than when the collector's
// pacing (twice the live heap) gets round to it.
package memlimit

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Env is the variable by which an operator sets the limit themselves; when
// it is set, their limit stays.
const Env = "GOMEMLIMIT"

// Limit is what Set did.
type Limit struct {
	// Bytes is the process's soft memory limit now.
	Bytes int64
	// Base is what the process held of its own when it was set; 0 when
	// the operator's limit stays.
	Base int64
	// Operator says the limit is the operator's (Env), left as it was.
	Operator bool
	// Ours says Set set it.
	Ours bool
}

// Set sets the soft memory limit to the process's base plus wire (the
// wire budget's bound, in bytes), unless getenv(Env) is set, and says what
// the limit is. The base is measured, not guessed: what the Go runtime
// holds after a collection, less held (what the wire budget counts as held
// now, which the bound already covers).
func Set(wire, held int64, getenv func(string) string) Limit {
	if getenv(Env) != "" || wire <= 0 {
		return Limit{Bytes: debug.SetMemoryLimit(-1), Operator: getenv(Env) != ""}
	}
	runtime.GC()
	base := max(inUse()-held, 0)
	debug.SetMemoryLimit(base + wire)
	return Limit{Bytes: base + wire, Base: base, Ours: true}
}

// Log says what the limit is, in one line: whose it is, and for ours the
// base measured. Nothing when neither set one (no bound, no Env).
func (l Limit) Log(log *slog.Logger) {
	switch {
	case l.Operator:
		log.Info("memory limit", "limitBytes", l.Bytes, "source", Env)
	case l.Ours:
		log.Info("memory limit", "limitBytes", l.Bytes, "baseBytes", l.Base, "source", "wire memory bound")
	}
}

// inUse is the memory the Go runtime holds as its limit counts it:
// everything it mapped, less what it returned to the operating system.
func inUse() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64() - s[1].Value.Uint64())
}
