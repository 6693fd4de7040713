package gateway_test

import (
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A tenant left off a route and a token naming a tenant the configuration
// lacks get the same 403, but the operator's log tells them apart.
func TestRefusedTenantsAreLoggedByCause(t *testing.T) {
	e := start(t, nil)
	if got := e.upgrade(t, "/v1/acme-only", http.Header{"Authorization": {"Bearer " + e.keys["globex"]}}); got != 403 {
		t.Fatalf("globex on acme's route: status %d, want 403", got)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://issuer.example", "aud": "gateway", "tenant": "umbrella", "sub": "svc", "exp": time.Now().Add(time.Hour).Unix(),
	})
	signed, _ := tok.SignedString([]byte(jwtSecret))
	if got := e.upgrade(t, "/v1/executor", http.Header{"Authorization": {"Bearer " + signed}}); got != 403 {
		t.Fatalf("a token for an unconfigured tenant: status %d, want 403", got)
	}
	for _, line := range []string{
		`(?m)^time=\S+ level=INFO msg="tenant refused on route" path=/v1/acme-only tenant=globex$`,
		`(?m)^time=\S+ level=INFO msg="credential names no configured tenant" path=/v1/executor tenant=umbrella$`,
	} {
		if n := len(regexp.MustCompile(line).FindAllString(e.logs.String(), -1)); n != 1 {
			t.Errorf("%d lines match %s, want 1, in:\n%s", n, line, e.logs.String())
		}
	}
}
