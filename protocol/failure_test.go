package protocol

import (
	"errors"
	"fmt"
	"testing"
)

// FailureOf reads an error's type, never its text: the timeout text as a
// plain error is a thrown failure.
func TestFailureOf(t *testing.T) {
	timeout := NewExecutionTimeoutError(300)
	for _, c := range []struct {
		name string
		err  error
		want FailureKind
	}{
		{"nil", nil, FailureNone},
		{"the timeout bound", timeout, FailureTimeout},
		{"the timeout bound, wrapped", fmt.Errorf("invoke: %w", timeout), FailureTimeout},
		{"the memory bound", NewMemoryLimitError(64), FailureMemory},
		{"the payload bound", NewPayloadTooLargeError(PartRunAnswer, PayloadLimit+1, PayloadLimit), FailurePayload},
		{"the timeout text", errors.New(timeout.Error()), FailureThrown},
		{"the memory text", errors.New(NewMemoryLimitError(64).Error()), FailureThrown},
		{"a fault", NewHandlesClosedError("x"), FailureThrown},
	} {
		if got := FailureOf(c.err); got != c.want {
			t.Errorf("%s: FailureOf = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestFailureKindKnownAndEndsHandles(t *testing.T) {
	for _, c := range []struct {
		kind         FailureKind
		known, fatal bool
	}{
		{FailureNone, false, false},
		{FailureThrown, true, false},
		{FailureTimeout, true, true},
		{FailureMemory, true, true},
		{FailurePayload, true, false},
		{"Timeout", false, false},
	} {
		if c.kind.Known() != c.known || c.kind.EndsHandles() != c.fatal {
			t.Errorf("%q: Known %v, EndsHandles %v; want %v, %v", c.kind, c.kind.Known(), c.kind.EndsHandles(), c.known, c.fatal)
		}
	}
}
