package sandbox

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// call is one tool call a fakeHost saw.
type call struct {
	Provider, Tool, Args string
}

// fakeHost answers tool calls with a function of the call, after an
// optional delay, and records every call.
type fakeHost struct {
	mu     sync.Mutex
	calls  []call
	delay  time.Duration
	answer func(c call) (string, error)
}

func (h *fakeHost) Dispatch(ctx context.Context, provider, tool, argsJSON string) (string, error) {
	c := call{provider, tool, argsJSON}
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if h.delay > 0 {
		select {
		case <-time.After(h.delay):
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	if h.answer == nil {
		return `{"result":null}`, nil
	}
	return h.answer(c)
}

func (h *fakeHost) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{}, context.Canceled
}

func (h *fakeHost) seen() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]call(nil), h.calls...)
}

// job is a Job with the defaults a test usually wants.
func job(code string) Job {
	return Job{Code: code, TimeoutMs: 5000, MemoryLimitMB: 128, OutboundMode: protocol.OutboundDisabled}
}

func runJob(t testing.TB, j Job, h Host) *protocol.ExecuteResult {
	t.Helper()
	return envelope(t)(Run(context.Background(), j, h))
}

// envelope returns a function that takes what a run returned and fails the
// test when the run ended with a fault instead of an envelope.
func envelope(t testing.TB) func(*protocol.ExecuteResult, error) *protocol.ExecuteResult {
	return func(res *protocol.ExecuteResult, err error) *protocol.ExecuteResult {
		t.Helper()
		if err != nil {
			t.Fatalf("the run failed with a fault: %v", err)
		}
		return res
	}
}

// runRetained is RunRetained, failing the test on a fault.
func runRetained(t testing.TB, ctx context.Context, j Job, h Host) (*protocol.ExecuteResult, *Retained) {
	t.Helper()
	res, kept, err := RunRetained(ctx, j, h)
	if err != nil {
		t.Fatalf("the run failed with a fault: %v", err)
	}
	return res, kept
}

// wantInternal requires the INTERNAL fault of a run the sandbox broke.
func wantInternal(t testing.TB, res *protocol.ExecuteResult, err error) {
	t.Helper()
	if res != nil || protocol.CodeOf(err) != protocol.CodeInternal || err.Error() != InternalErrorText {
		t.Fatalf("got %+v, %v; want no envelope and the INTERNAL fault", res, err)
	}
}

// result decodes the run's value, failing the test when the run failed.
func result(t testing.TB, r *protocol.ExecuteResult) any {
	t.Helper()
	if r.HasError {
		t.Fatalf("run failed: %q", r.Error)
	}
	if r.ResultJSON == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(r.ResultJSON), &v); err != nil {
		t.Fatalf("result %q is not JSON: %v", r.ResultJSON, err)
	}
	return v
}

func wantError(t testing.TB, r *protocol.ExecuteResult, text string) {
	t.Helper()
	if !r.HasError || r.Error != text {
		t.Fatalf("error = %q (hasError %v, result %q), want %q", r.Error, r.HasError, r.ResultJSON, text)
	}
	if r.ResultJSON != "" {
		t.Fatalf("a failed run carries a result: %q", r.ResultJSON)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
