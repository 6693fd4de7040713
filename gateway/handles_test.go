package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// The tests of retained executions through the gateway: pins route handles
// to the member that holds them and for their tenant only, bounds evict
// them, signed ids route across replicas, and a close the member makes by
// itself reaches the pin and the caller.

func TestPinsRouteHandlesForTheirTenantOnly(t *testing.T) {
	e := start(t, nil)
	first := e.mustDial(t, "/v1/executor", "globex")
	res, err := first.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("retain gave %+v, %v", res, err)
	}
	id := res.ExecutionID
	// A second connection of the same tenant reaches the handles.
	second := e.mustDial(t, "/v1/executor", "globex")
	resp, err := second.InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/", Body: []byte("x")})
	if err != nil || string(resp.Body) != "echo:x" {
		t.Fatalf("invoke from a second connection gave %+v, %v", resp, err)
	}
	// Another tenant on the same backend meets exactly what an unknown id
	// meets.
	other := e.mustDial(t, "/v1/executor", "initech")
	_, errOther := other.InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
	_, errUnknown := other.InvokeHandle(testCtx(t), "unknown-id", "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
	want := protocol.NewHandlesClosedError(id).Error()
	if protocol.CodeOf(errOther) != protocol.CodeHandlesClosed || errOther.Error() != want {
		t.Fatalf("another tenant's invoke gave %v, want %q", errOther, want)
	}
	if protocol.CodeOf(errUnknown) != protocol.CodeHandlesClosed {
		t.Fatalf("an unknown id gave %v", errUnknown)
	}
	if err := other.CloseHandles(testCtx(t), id); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("another tenant closed the handles: %v", err)
	}
	if e.far.Held() != 1 {
		t.Fatal("another tenant's attempts reached the backend")
	}
	if err := second.CloseHandles(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if _, err := first.InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"}); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("invoke after close gave %v", err)
	}
	// The pin table's misses are counted by the tenant that called.
	for series, want := range map[string]string{
		`codemode_pin_misses_total{tenant="initech"}`: "3",
		`codemode_pin_misses_total{tenant="globex"}`:  "1",
		`codemode_pin_hits_total`:                     "2",
	} {
		if got := e.metric(t, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
}

func TestHandleBoundsEvictAndClose(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "globex") // maxHandles 2
	var ids []string
	for i := 0; i < 3; i++ {
		res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ExecutionID)
	}
	// The third grant pushed out the tenant's least recently used one, and
	// the gateway closed it on the backend.
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(e.far.Closed()) == 1 && e.far.Held() == 2 }, "the oldest handles to be closed, closed %v", e.far.Closed())
	if _, err := ex.InvokeHandle(testCtx(t), ids[0], "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"}); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("an evicted id gave %v", err)
	}
	for _, id := range ids[1:] {
		if _, err := ex.InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"}); err != nil {
			t.Fatalf("a pinned id gave %v", err)
		}
	}
	// The table's own size (3) evicts across tenants.
	ex2 := e.mustDial(t, "/v1/executor", "initech")
	for i := 0; i < 2; i++ {
		if _, err := ex2.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return len(e.far.Closed()) == 2 }, "the table to evict one more, closed %v", e.far.Closed())
}

// TestExecutionIDsRouteAcrossReplicas: a second gateway that shares the id
// key, and never saw the grant, routes the id; an altered id, or a replica
// with another key, meets HANDLES_CLOSED.
func TestExecutionIDsRouteAcrossReplicas(t *testing.T) {
	withKey := func(key string) func(string) string {
		return func(y string) string { return y + "executionIds:\n  keyEnv: " + key + "\n" }
	}
	t.Setenv("TEST_ID_KEY", strings.Repeat("k", 32))
	t.Setenv("OTHER_ID_KEY", strings.Repeat("o", 32))
	a := start(t, withKey("TEST_ID_KEY"))
	res, err := a.mustDial(t, "/v1/executor", "globex").Execute(testCtx(t), &protocol.ExecuteRequest{Code: "retain", RetainHandles: true})
	if err != nil {
		t.Fatal(err)
	}
	id := res.ExecutionID
	if !strings.HasPrefix(id, "x2.") {
		t.Fatalf("the client saw %q, not a gateway id", id)
	}
	// Replica b: same key, same backend member, same tenant keys.
	b := startReplica(t, a, withKey("TEST_ID_KEY"))
	bGlobex := b.mustDial(t, "/v1/executor", "globex")
	resp, err := bGlobex.InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/", Body: []byte("r")})
	if err != nil || string(resp.Body) != "echo:r" {
		t.Fatalf("the replica that never saw the grant gave %+v, %v", resp, err)
	}
	// Another tenant on the replica, an altered id, and a replica with
	// another key: all HANDLES_CLOSED.
	altered := id[:len(id)-2] + "AA"
	if altered == id {
		altered = id[:len(id)-2] + "BB"
	}
	c := startReplica(t, a, withKey("OTHER_ID_KEY"))
	for name, try := range map[string]func() error{
		"another tenant": func() error {
			_, err := b.mustDial(t, "/v1/executor", "initech").InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
			return err
		},
		"altered id": func() error {
			_, err := bGlobex.InvokeHandle(testCtx(t), altered, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
			return err
		},
		"other key": func() error {
			_, err := c.mustDial(t, "/v1/executor", "globex").InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
			return err
		},
	} {
		if err := try(); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
			t.Errorf("%s: %v, want HANDLES_CLOSED", name, err)
		}
	}
	// Texts name the client's id, never the backend's.
	_, err = bGlobex.InvokeHandle(testCtx(t), id, "websocket", protocol.OutboundRequest{Method: "GET", URL: "/"})
	var plain *capnweb.Error
	if !errors.As(err, &plain) || plain.Message != protocol.NewHandleNotFoundError(id, "websocket", []string{"fetch"}).Error() {
		t.Fatalf("an unknown handle name gave %v, want the text to name %q", err, id)
	}
	if err := bGlobex.CloseHandles(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	_, err = a.mustDial(t, "/v1/executor", "globex").InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != protocol.NewHandlesClosedError(id).Error() {
		t.Fatalf("after the replica closed them: %v", err)
	}
}

// TestPinDroppedWhenTheBackendClosesTheHandles: a local backend that closes
// a retained execution at its idle bound tells the gateway, and the pin
// goes at once.
func TestPinDroppedWhenTheBackendClosesTheHandles(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "local: {poolSize: 1, queue: 8}", "local: {poolSize: 1, queue: 8, handlesIdleTimeout: 1s}", 1)
	})
	ex := e.mustDial(t, "/v1/executor", "acme")
	res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => (req) => new Response('ok')", RetainHandles: true})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	pins := func() string { return e.metric(t, "codemode_pins") }
	if got := pins(); got != "1" {
		t.Fatalf("codemode_pins = %s after a grant, want 1", got)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return pins() == "0" }, "the pin to go at the idle bound (codemode_pins %s)", pins())
}

// TestRemoteMemberClosingHandlesReachesTheCaller: a remote member that
// closes a retained execution by itself (its idle bound) releases its
// duplicate of the gateway's outbound function; the gateway drops the pin
// and releases the caller's duplicated stub then, and the caller hears of
// it under the id it was given, without another call.
func TestRemoteMemberClosingHandlesReachesTheCaller(t *testing.T) {
	memberClosesHandlesByItself(t, protocol.OutboundVia(func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 200}, nil
	}))
}

// TestRemoteMemberClosingNativeHandlesReachesTheCaller: the same for an
// execution with no outbound function (native, which globex's policy
// makes disabled at the member): the member releases the handlesLifetime
// function the gateway lent it, and the gateway its caller's.
func TestRemoteMemberClosingNativeHandlesReachesTheCaller(t *testing.T) {
	memberClosesHandlesByItself(t, protocol.Outbound{})
}

// memberClosesHandlesByItself has the member expire a retained execution
// of globex made with outbound, and expects the caller to hear of it and
// the pin to go.
func memberClosesHandlesByItself(t *testing.T, outbound protocol.Outbound) {
	t.Helper()
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "globex")
	closed := make(chan string, 1)
	res, err := ex.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{
		Code:          "retain",
		RetainHandles: true,
		Outbound:      outbound,
	}, protocol.Policy{HandlesClosed: func(id string) { closed <- id }})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	pins := func() string { return e.metric(t, "codemode_pins") }
	if got := pins(); got != "1" {
		t.Fatalf("codemode_pins = %s after a grant, want 1", got)
	}
	select {
	case id := <-closed:
		t.Fatalf("HandlesClosed(%q) before anything closed", id)
	case <-time.After(100 * time.Millisecond):
	}
	if n := e.far.ExpireAll(); n != 1 {
		t.Fatalf("the member held %d executions, want 1", n)
	}
	select {
	case id := <-closed:
		if id != res.ExecutionID {
			t.Fatalf("HandlesClosed(%q), want the granted id %q", id, res.ExecutionID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the caller never heard that the member closed the handles")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return pins() == "0" }, "the pin to go when the member closed (codemode_pins %s)", pins())
}

// TestLongExecutionIDIsEchoedBounded: a 500 KB executionId meets
// HANDLES_CLOSED whose text names the id's first 64 bytes and its length,
// not the whole id.
func TestLongExecutionIDIsEchoedBounded(t *testing.T) {
	e := start(t, nil)
	ex := e.mustDial(t, "/v1/executor", "globex")
	long := "x2." + strings.Repeat("A", 500<<10)
	want := `Execution "` + long[:64] + `… (512003 bytes)" holds no handles: they were closed, expired at the idle bound, or never granted. Execute again with retainHandles to get a fresh executionId.`
	_, err := ex.InvokeHandle(testCtx(t), long, "fetch", protocol.OutboundRequest{Method: "GET", URL: "/"})
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != want {
		t.Fatalf("invoke with a 500 KB id: %.300v, want %q", err, want)
	}
	if err := ex.CloseHandles(testCtx(t), long); protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != want {
		t.Fatalf("close with a 500 KB id: %.300v, want %q", err, want)
	}
}
