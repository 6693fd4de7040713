package gateway_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// The outcome metric and the pin of a retained execution follow the kind a
// failure has, never its text: a program that throws the timeout text word
// for word is a user error, and a handler that throws it keeps its handles.
func TestFailureTextsDecideNothing(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "acme") // the local backend, under a 300 ms cap
	text := protocol.NewExecutionTimeoutError(300).Error()
	series := func(outcome string) string {
		return e.metric(t, `codemode_executions_total{backend="local",outcome="`+outcome+`",tenant="acme"}`)
	}
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: `async () => { throw new Error(` + strconv.Quote(text) + `) }`})
	if err != nil || res.Error != text {
		t.Fatalf("a thrown timeout text: %+v, %v", res, err)
	}
	if got, timeouts := series("user_error"), series("timeout"); got != "1" || timeouts != "absent" {
		t.Fatalf("a thrown timeout text counted user_error %s, timeout %s; want 1, absent", got, timeouts)
	}
	res, err = ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: `async () => { while (true) {} }`})
	if err != nil || res.Error != text {
		t.Fatalf("a spinning run: %+v, %v", res, err)
	}
	if got := series("timeout"); got != "1" {
		t.Fatalf("a spinning run counted timeout %s, want 1", got)
	}

	closed := make(chan string, 1)
	res, err = ex.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{
		Code:          `async () => (req) => { if (req.url.endsWith('/throw')) throw new Error(` + strconv.Quote(text) + `); return new Response('ok') }`,
		RetainHandles: true,
	}, protocol.Policy{HandlesClosed: func(id string) { closed <- id }})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	_, err = ex.InvokeHandle(testCtx(t), res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://x/throw"})
	if err == nil || err.Error() != "Error: "+text {
		t.Fatalf("a handler throwing the timeout text: %v", err)
	}
	if got := e.metric(t, "codemode_pins"); got != "1" {
		t.Fatalf("codemode_pins = %s after a thrown text, want 1", got)
	}
	resp, err := ex.InvokeHandle(testCtx(t), res.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://x/"})
	if err != nil || string(resp.Body) != "ok" {
		t.Fatalf("after the thrown text: %+v, %v", resp, err)
	}
	select {
	case id := <-closed:
		t.Fatalf("HandlesClosed(%q) after a thrown text", id)
	case <-time.After(100 * time.Millisecond):
	}
}

// A remote member's result brings its failure kind along (the result's
// failure member), the outcome follows it, and the gateway passes it on to
// its caller: the timeout text from a member that does not say what ended
// the run is a user error.
func TestRemoteOutcomeFollowsTheMembersKind(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "globex")
	text := protocol.NewExecutionTimeoutError(300).Error()
	for _, c := range []struct {
		code    string
		kind    protocol.FailureKind
		outcome string
	}{
		{"failure:timeout:" + text, protocol.FailureTimeout, "timeout"},
		{"failure:memory:" + text, protocol.FailureMemory, "memory"},
		{"failure:payload:" + text, protocol.FailurePayload, "payload"},
		{"error:" + text, protocol.FailureNone, "user_error"},
	} {
		res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: c.code})
		if err != nil || res.Error != text || res.Failure != c.kind {
			t.Fatalf("%s: %+v, %v; want failure %q", c.code, res, err, c.kind)
		}
		if got := e.metric(t, `codemode_executions_total{backend="far",outcome="`+c.outcome+`",tenant="globex"}`); got != "1" {
			t.Fatalf("%s: outcome %s counted %s, want 1", c.code, c.outcome, got)
		}
	}
}
