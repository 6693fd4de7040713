package gateway_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
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

// A token's tenant claim is as long as its issuer made it; the 403 and the
// log line echo it cut to a bounded length, as ids are (protocol.Echo).
func TestALongTenantClaimIsEchoedCut(t *testing.T) {
	e := start(t, nil)
	claim := strings.Repeat("u", 10_000)
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://issuer.example", "aud": "gateway", "tenant": claim, "sub": "svc", "exp": time.Now().Add(time.Hour).Unix(),
	})
	signed, _ := tok.SignedString([]byte(jwtSecret))
	req, _ := http.NewRequest("GET", e.url+"/v1/executor", nil)
	req.Header.Set("Authorization", "Bearer "+signed)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cut := strings.Repeat("u", 64) + "… (10000 bytes)"
	if want := `tenant "` + cut + `" may not use this route` + "\n"; resp.StatusCode != 403 || string(body) != want {
		t.Fatalf("status %d, body %q; want 403, %q", resp.StatusCode, body, want)
	}
	line := `(?m)^time=\S+ level=INFO msg="credential names no configured tenant" path=/v1/executor tenant="` + regexp.QuoteMeta(cut) + `"$`
	if n := len(regexp.MustCompile(line).FindAllString(e.logs.String(), -1)); n != 1 {
		t.Errorf("%d lines match %s, want 1, in:\n%s", n, line, e.logs.String())
	}
}
