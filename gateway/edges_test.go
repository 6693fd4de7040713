package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestSameOriginComparesTheScheme: a page on the gateway's host is of the
// same origin only under the listener's own scheme; the same host under
// another scheme is a foreign origin.
func TestSameOriginComparesTheScheme(t *testing.T) {
	e := start(t, nil)
	host := strings.TrimPrefix(e.url, "http://")
	for origin, want := range map[string]int{
		"http://" + host:  101,
		"https://" + host: 403,
		"ws://" + host:    403,
	} {
		h := http.Header{"Authorization": {"Bearer " + e.keys["acme"]}, "Origin": {origin}}
		if got := e.upgrade(t, "/v1/executor", h); got != want {
			t.Errorf("Origin %s: status %d, want %d", origin, got, want)
		}
	}
}
