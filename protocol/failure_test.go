package protocol

import (
	"encoding/json"
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

// The result message carries a failed run's kind as its failure member (an
// extension); a reader ignores a kind it does not know, and a member
// without an error.
func TestFailureOnTheWire(t *testing.T) {
	b, err := ResultMessageOf(&ExecuteResult{Error: "boom", HasError: true, Failure: FailureTimeout}).MarshalJSON()
	if want := `{"error":"boom","logs":[],"failure":"timeout"}`; err != nil || string(b) != want {
		t.Fatalf("wrote %s, %v; want %s", b, err, want)
	}
	for _, c := range []struct {
		message string
		want    FailureKind
	}{
		{`{"error":"boom","logs":[],"failure":"timeout"}`, FailureTimeout},
		{`{"error":"boom","logs":[],"failure":"memory"}`, FailureMemory},
		{`{"error":"boom","logs":[],"failure":"Timeout"}`, FailureNone},
		{`{"error":"boom","logs":[],"failure":"bored"}`, FailureNone},
		{`{"error":"boom","logs":[]}`, FailureNone},
		{`{"resultJson":"1","logs":[],"failure":"timeout"}`, FailureNone},
	} {
		var m ExecuteResultMessage
		if err := json.Unmarshal([]byte(c.message), &m); err != nil {
			t.Fatal(err)
		}
		if got := m.Result().Failure; got != c.want {
			t.Errorf("%s read as failure %q, want %q", c.message, got, c.want)
		}
	}
	for _, r := range []*ExecuteResult{
		{ResultJSON: "1", Failure: FailureTimeout},
		{Error: "boom", HasError: true, Failure: "bored"},
		{Error: "boom", HasError: true},
	} {
		if m := ResultMessageOf(r); m.Failure != FailureNone {
			t.Errorf("%+v sent failure %q", r, m.Failure)
		}
	}
}
