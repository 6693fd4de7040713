package executorapi

import (
	"context"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// A handler's throw whose text reads exactly like the timeout text closes
// nothing: the server keeps what it holds for the execution, and the
// client, whether the server lends lifetimes or not, does not report the
// handles closed; they serve on. A bound that did close them is heard.
func TestThrownBoundTextEndsNoHandles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	text := protocol.NewExecutionTimeoutError(300).Error()
	for _, hide := range []bool{false, true} {
		e := startLifetimeEnv(t, ctx, hide)
		id, heard := e.retain(t, ctx, protocol.Outbound{})
		kept := e.srv.Kept()
		_, err := e.client.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "reject:" + text})
		if err == nil || Message(err) != text || EndsHandles(err) {
			t.Fatalf("extensions hidden %v: a thrown timeout text gave %v (ends handles %v)", hide, err, EndsHandles(err))
		}
		expectSilence(t, heard, "after a thrown timeout text")
		if n := e.srv.Kept(); n != kept {
			t.Fatalf("extensions hidden %v: the server keeps stubs of %d executions after a thrown text, want %d", hide, n, kept)
		}
		resp, err := e.client.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "POST", URL: "https://x/", Body: []byte("hi")})
		if err != nil || string(resp.Body) != "echo:hi" {
			t.Fatalf("extensions hidden %v: after the thrown text: %+v, %v", hide, resp, err)
		}
		if hide {
			continue
		}
		_, err = e.client.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "spin"})
		if err == nil || Message(err) != text {
			t.Fatalf("a handler past its bound gave %v", err)
		}
		expectHeard(t, heard, id, "a bound closed the handles")
	}
}

// EndsHandles reads types: HANDLES_CLOSED and the typed run bounds an
// executor in this process returns, never a text.
func TestEndsHandlesReadsTypes(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"HANDLES_CLOSED", protocol.NewHandlesClosedError("x"), true},
		{"the timeout bound", protocol.NewExecutionTimeoutError(300), true},
		{"the memory bound", protocol.NewMemoryLimitError(64), true},
		{"the timeout text", errorText(protocol.NewExecutionTimeoutError(300).Error()), false},
		{"the memory text", errorText(protocol.NewMemoryLimitError(64).Error()), false},
	} {
		if got := EndsHandles(c.err); got != c.want {
			t.Errorf("%s: EndsHandles = %v, want %v", c.name, got, c.want)
		}
	}
}

// errorText is an error that is only its text, as a handler's throw is.
type errorText string

func (e errorText) Error() string { return string(e) }

// A failed run's kind crosses the wire as the result's failure member: the
// executor's kind arrives, a text alone arrives as no kind, and a member
// this client cannot read is ignored.
func TestFailureKindCrossesTheWire(t *testing.T) {
	rec := executortest.NewRecorder()
	ctx, client := connect(t, NewServer(rec, ServerOptions{}))
	text := protocol.NewExecutionTimeoutError(300).Error()
	for _, c := range []struct {
		code string
		want protocol.FailureKind
	}{
		{"failure:timeout:" + text, protocol.FailureTimeout},
		{"failure:memory:" + text, protocol.FailureMemory},
		{"failure:thrown:" + text, protocol.FailureThrown},
		{"error:" + text, protocol.FailureNone},
	} {
		res, err := client.Execute(ctx, &protocol.ExecuteRequest{Code: c.code})
		if err != nil || res.Error != text || res.Failure != c.want {
			t.Errorf("%s: %+v, %v; want failure %q", c.code, res, err, c.want)
		}
	}
	for _, v := range []any{"bored", "Timeout", 3.0, true} {
		res, err := resultFromWire(map[string]any{"error": "boom", "logs": []any{}, "failure": v})
		if err != nil || res.Error != "boom" || res.Failure != protocol.FailureNone {
			t.Errorf("failure %v: %+v, %v; want it ignored", v, res, err)
		}
	}
	if res, err := resultFromWire(map[string]any{"resultJson": "1", "logs": []any{}, "failure": "timeout"}); err != nil || res.Failure != protocol.FailureNone {
		t.Errorf("a failure beside no error: %+v, %v; want it ignored", res, err)
	}
}
