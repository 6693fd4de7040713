package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/internal/testutil"
)

// serveOrigins serves one tenant's executor route with originKey (one
// line of the route's keys), returning the tenant's key, the server and
// its log.
func serveOrigins(t *testing.T, originKey string) (string, *httptest.Server, *testutil.Buffer) {
	t.Helper()
	key := auth.NewAPIKey()
	hash, _ := auth.HashAPIKey(key)
	logs := &testutil.Buffer{}
	_, hs, _ := serveConfig(t, fmt.Sprintf(`listen: 127.0.0.1:0
backends: [{name: local, type: local, local: {maxWorkers: 1}}]
tenants:
  - {name: acme, backend: local, keys: [{name: k, hash: %s}]}
routes:
  - path: /v1/executor
    kind: executor
    %s
`, hash, originKey), logs)
	return key, hs, logs
}

// allowedOrigins takes full origins (scheme compared) beside host patterns
// (any scheme), and every refused origin is logged with its route.
func TestAllowedOriginsAsBrowsersSendThem(t *testing.T) {
	key, hs, logs := serveOrigins(t, `allowedOrigins: ["http://127.0.0.1:8000", "*.example.com", "HTTPS://Upper.Example.ORG"]`)
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"http://127.0.0.1:8000", 101},
		{"https://127.0.0.1:8000", 403}, // the scheme is compared
		{"http://127.0.0.1:8001", 403},
		{"https://app.example.com", 101}, // a host pattern takes any scheme
		{"http://app.example.com", 101},
		{"https://upper.example.org", 101}, // case never matters
		{"http://upper.example.org", 403},
		{"https://evil.test", 403},
	} {
		header := http.Header{"Authorization": {"Bearer " + key}, "Origin": {c.origin}}
		if got := upgradeStatus(t, hs.URL+"/v1/executor", header); got != c.want {
			t.Errorf("Origin %s: %d, want %d", c.origin, got, c.want)
		}
	}
	refused := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg="origin refused on route" route=/v1/executor kind=executor subprotocol="" path=/v1/executor origin=(\S+) tenant=acme$`)
	var got []string
	for _, m := range refused.FindAllStringSubmatch(logs.String(), -1) {
		got = append(got, m[1])
	}
	if want := []string{"https://127.0.0.1:8000", "http://127.0.0.1:8001", "http://upper.example.org", "https://evil.test"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("logged refusals %v, want %v, in:\n%s", got, want, logs.String())
	}
}

// allowAnyOrigin lets a page of any origin connect, but never the opaque
// origin "null" of a file:// or sandboxed page.
func TestAllowAnyOriginLetsEveryOriginButNull(t *testing.T) {
	key, hs, _ := serveOrigins(t, "allowAnyOrigin: true")
	for origin, want := range map[string]int{"https://evil.test": 101, "http://127.0.0.1:8000": 101, "https://[::1]:8443": 101, "null": 403} {
		header := http.Header{"Authorization": {"Bearer " + key}, "Origin": {origin}}
		if got := upgradeStatus(t, hs.URL+"/v1/executor", header); got != want {
			t.Errorf("Origin %s: %d, want %d", origin, got, want)
		}
	}
}
