package gateway_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestSameOriginComparesTheScheme: a page on the gateway's host is of the
// same origin only under the listener's own scheme; the same host under
// another scheme is a foreign origin.
func TestSameOriginComparesTheScheme(t *testing.T) {
	e := start(t, nil)
	host := strings.TrimPrefix(e.url, "http://")
	for _, c := range []struct {
		origin, forwarded string
		want              int
	}{
		{"http://" + host, "", 101},
		{"https://" + host, "", 403},
		{"ws://" + host, "", 403},
		// Behind a load balancer that terminates TLS.
		{"https://" + host, "https", 101},
		{"http://" + host, "https", 403},
	} {
		h := http.Header{"Authorization": {"Bearer " + e.keys["acme"]}, "Origin": {c.origin}}
		if c.forwarded != "" {
			h.Set("X-Forwarded-Proto", c.forwarded)
		}
		if got := e.upgrade(t, "/v1/executor", h); got != c.want {
			t.Errorf("Origin %s, X-Forwarded-Proto %q: status %d, want %d", c.origin, c.forwarded, got, c.want)
		}
	}
}

// greedyClient connects as tenant and pushes calls it never pulls, each
// carrying pad bytes, until the gateway ends the connection; it returns
// the last frame it read.
func greedyClient(t *testing.T, e *env, tenant string, calls, pad int) string {
	t.Helper()
	ctx := testCtx(t)
	conn, _, err := websocket.Dial(ctx, wsURL(e.url)+"/v1/executor", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + e.keys[tenant]}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	push := []byte(`["push",["pipeline",0,["protocolVersion"],["` + strings.Repeat("x", pad) + `"]]]`)
	go func() {
		for i := 0; i < calls; i++ {
			if conn.Write(ctx, websocket.MessageText, push) != nil {
				return
			}
		}
	}()
	var last string
	for {
		_, m, err := conn.Read(ctx)
		if err != nil {
			return last
		}
		last = string(m)
	}
}

// TestOutstandingCallsAreBoundedPerConnection: a client that pushes calls
// and never pulls them is aborted at limits.maxCallsPerConnection; another
// connection of the same tenant keeps running programs.
func TestOutstandingCallsAreBoundedPerConnection(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "pins:\n", "limits:\n  maxCallsPerConnection: 16\npins:\n", 1)
	})
	other := e.mustDial(t, "/v1/executor", "acme")
	last := greedyClient(t, e, "acme", 100, 0)
	if want := `["abort",["error","Error","` + capnweb.OutstandingCallsText(16) + `"]]`; last != want {
		t.Fatalf("the greedy client's last frame: %s, want %s", last, want)
	}
	res, err := other.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 6 * 7"})
	if err != nil || res.ResultJSON != "42" {
		t.Fatalf("the other connection: %+v, %v", res, err)
	}
}

// TestWireMemoryIsBoundedAcrossConnections: past limits.wireMemoryMB the
// connection that holds the most is aborted with the budget text; another
// connection keeps running programs.
func TestWireMemoryIsBoundedAcrossConnections(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "pins:\n", "limits:\n  wireMemoryMB: 4\npins:\n", 1)
	})
	other := e.mustDial(t, "/v1/executor", "acme")
	last := greedyClient(t, e, "acme", 200, 64<<10)
	text := regexp.QuoteMeta(capnweb.MemoryBudgetText(4<<20, 999999999))
	want := regexp.MustCompile(`^\["abort",\["error","Error","` + strings.Replace(text, "999999999", `[0-9]+`, 1) + `"\]\]$`)
	if !want.MatchString(last) {
		t.Fatalf("the greedy client's last frame: %.300s", last)
	}
	res, err := other.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 6 * 7"})
	if err != nil || res.ResultJSON != "42" {
		t.Fatalf("the other connection: %+v, %v", res, err)
	}
}
