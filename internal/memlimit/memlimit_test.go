package memlimit

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strconv"
	"testing"
)

// keepLimit restores the process's limit after a test that sets it.
func keepLimit(t *testing.T) {
	was := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(was) })
}

func noEnv(string) string { return "" }

// TestSetIsBasePlusWire: the limit set is the base measured plus the
// wire's bound, and it is the process's limit now.
func TestSetIsBasePlusWire(t *testing.T) {
	keepLimit(t)
	const wire = 64 << 20
	l := Set(wire, 0, noEnv)
	if !l.Ours || l.Operator || l.Base <= 0 || l.Bytes != l.Base+wire {
		t.Fatalf("Set gave %+v, want a base of ours plus %d", l, wire)
	}
	if now := debug.SetMemoryLimit(-1); now != l.Bytes {
		t.Errorf("the process's limit is %d, Set said %d", now, l.Bytes)
	}
}

// TestSetLeavesOutWhatTheWireHolds: what the wire budget holds when the
// base is measured is covered by the bound, not counted twice; a base
// never goes below zero.
func TestSetLeavesOutWhatTheWireHolds(t *testing.T) {
	keepLimit(t)
	const wire = 64 << 20
	l := Set(wire, 1<<40, noEnv)
	if !l.Ours || l.Base != 0 || l.Bytes != wire {
		t.Fatalf("Set with more held than the process has gave %+v, want a base of 0 and a limit of %d", l, wire)
	}
	if now := debug.SetMemoryLimit(-1); now != wire {
		t.Errorf("the process's limit is %d, want %d", now, wire)
	}
}

// TestOperatorLimitStays: with GOMEMLIMIT set, Set changes nothing and
// says whose the limit is.
func TestOperatorLimitStays(t *testing.T) {
	keepLimit(t)
	const theirs = 300 << 20
	debug.SetMemoryLimit(theirs)
	env := func(k string) string {
		if k == Env {
			return strconv.Itoa(theirs)
		}
		return ""
	}
	l := Set(64<<20, 0, env)
	if want := (Limit{Bytes: theirs, Operator: true}); l != want {
		t.Fatalf("Set under %s gave %+v, want %+v", Env, l, want)
	}
	if now := debug.SetMemoryLimit(-1); now != theirs {
		t.Errorf("the process's limit is %d, want the operator's %d", now, theirs)
	}
	var buf bytes.Buffer
	l.Log(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})))
	if got, want := buf.String(), "level=INFO msg=\"memory limit\" limitBytes=314572800 source=GOMEMLIMIT\n"; got != want {
		t.Errorf("the log line is %q, want %q", got, want)
	}
}

// TestNoBoundNoLimit: without a wire bound there is nothing to set.
func TestNoBoundNoLimit(t *testing.T) {
	keepLimit(t)
	const before = 500 << 20
	debug.SetMemoryLimit(before)
	if l := Set(0, 0, noEnv); l != (Limit{Bytes: before}) {
		t.Fatalf("Set without a bound gave %+v, want the limit left at %d", l, before)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
