package sandbox

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// The kind of a failure is set where the sandbox knows what happened, never
// recovered from its text: a program that throws a bound's text word for
// word failed by throwing.
func TestFailureKindFollowsWhatEndedTheRun(t *testing.T) {
	timeoutText := protocol.NewExecutionTimeoutError(300).Error()
	memoryText := protocol.NewMemoryLimitError(128).Error()
	payloadText := protocol.NewPayloadTooLargeError(protocol.PartRunAnswer, protocol.PayloadLimit+8, protocol.PayloadLimit).Error()
	for _, c := range []struct {
		name, code string
		text       string
		kind       protocol.FailureKind
	}{
		{"success", `async () => 1`, "", protocol.FailureNone},
		{"the timeout bound", `async () => { while (true) {} }`, timeoutText, protocol.FailureTimeout},
		{"the timeout text thrown", `async () => { throw new Error(` + strconv.Quote(timeoutText) + `) }`, timeoutText, protocol.FailureThrown},
		{"the timeout text rejected from a timer", `async () => { setTimeout(() => { throw new Error(` + strconv.Quote(timeoutText) + `) }, 1); await new Promise(() => {}) }`, timeoutText, protocol.FailureThrown},
		{"the memory text thrown", `async () => { throw new Error(` + strconv.Quote(memoryText) + `) }`, memoryText, protocol.FailureThrown},
		{"the payload bound", `async () => 'x'.repeat(` + strconv.Itoa(protocol.PayloadLimit+2) + `)`, payloadText, protocol.FailurePayload},
		{"the payload text thrown", `async () => { throw new Error(` + strconv.Quote(payloadText) + `) }`, payloadText, protocol.FailureThrown},
		{"the call stack bound", `async () => { const f = () => f() + 1; return f() }`, StackOverflowText, protocol.FailureThrown},
		{"a syntax error", `async () => {`, "", protocol.FailureThrown},
	} {
		j := job(c.code)
		if c.kind == protocol.FailureTimeout {
			j.TimeoutMs = 300
		}
		res := runJob(t, j, &fakeHost{})
		if res.Failure != c.kind || (c.text != "" && res.Error != c.text) {
			t.Errorf("%s: failure %q with %q, want %q with %q", c.name, res.Failure, res.Error, c.kind, c.text)
		}
		if res.HasError != (c.kind != protocol.FailureNone) {
			t.Errorf("%s: hasError %v with failure %q", c.name, res.HasError, res.Failure)
		}
	}
}

// A run whose context ends takes its cause's kind: the memory watchdog's
// MemoryLimitError is the memory bound.
func TestFailureKindOfACancelIsItsCause(t *testing.T) {
	mem := protocol.NewMemoryLimitError(64)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := time.AfterFunc(50*time.Millisecond, func() { cancel(mem) })
	defer stop.Stop()
	res := envelope(t)(Run(ctx, job(`async () => { while (true) {} }`), &fakeHost{}))
	if res.Failure != protocol.FailureMemory || res.Error != mem.Error() {
		t.Fatalf("failure %q with %q, want the memory bound", res.Failure, res.Error)
	}
}

// A retained session's handler that throws a bound's text is rejected and
// serves on; only a bound that ended the session is reported as one.
func TestRetainedFailureKinds(t *testing.T) {
	timeoutText := protocol.NewExecutionTimeoutError(300).Error()
	j := job(`async () => (req) => {
		if (req.url.endsWith('/spin')) while (true) {}
		if (req.url.endsWith('/throw')) throw new Error(` + strconv.Quote(timeoutText) + `)
		return new Response('ok')
	}`)
	j.TimeoutMs = 300
	_, r := retain(t, j, nil)
	if inv := r.Invoke(get("/throw")); !inv.HasErr || inv.Ended || inv.Err != timeoutText || inv.Failure != protocol.FailureNone {
		t.Fatalf("a handler throwing the timeout text: %+v", inv)
	}
	if got := body(t, r, get("/")); got != "ok" {
		t.Fatalf("after the throw: %q", got)
	}
	if inv := r.Invoke(get("/spin")); !inv.Ended || inv.Err != timeoutText || inv.Failure != protocol.FailureTimeout {
		t.Fatalf("a spinning handler: %+v", inv)
	}
	if r.EndText() != timeoutText || r.EndFailure() != protocol.FailureTimeout {
		t.Fatalf("the session ended with %q (%q)", r.EndText(), r.EndFailure())
	}
}
