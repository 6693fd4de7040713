package gateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
)

// The JWKS file is read once, by the configuration's validation: the
// gateway serves with the verifier it built, so a file gone by the time
// the gateway starts changes nothing, and its keys still authenticate.
func TestJWKSFileIsReadOnce(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	b64 := base64.RawURLEncoding.EncodeToString
	jwks := fmt.Sprintf(`{"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", "x": %q, "y": %q}]}`,
		b64(key.X.FillBytes(make([]byte, 32))), b64(key.Y.FillBytes(make([]byte, 32))))
	jwksPath := filepath.Join(dir, "keys.json")
	cfgPath := filepath.Join(dir, "gateway.yaml")
	os.WriteFile(jwksPath, []byte(jwks), 0o600)
	os.WriteFile(cfgPath, []byte(`listen: 127.0.0.1:0
backends: [{name: local, type: local, local: {maxWorkers: 1}}]
jwt: {issuer: https://issuer.test, audience: codemode, jwksFile: keys.json}
tenants: [{name: acme, backend: local}]
routes: [{path: /v1/executor, kind: executor}]
`), 0o600)
	cfg, err := config.LoadWith(cfgPath, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(jwksPath); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{Kinds: kinds.All()})
	if err != nil {
		t.Fatalf("the gateway read the JWKS file again: %v", err)
	}
	hs := httptest.NewServer(gw.Handler())
	t.Cleanup(func() { hs.Close(); gw.Close() })

	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		signer *ecdsa.PrivateKey
		want   int
	}{{key, http.StatusSwitchingProtocols}, {other, http.StatusUnauthorized}} {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
			"iss": "https://issuer.test", "aud": "codemode", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix(),
		})
		tok.Header["kid"] = "k1"
		signed, err := tok.SignedString(c.signer)
		if err != nil {
			t.Fatal(err)
		}
		if got := upgradeStatus(t, hs.URL+"/v1/executor", http.Header{"Authorization": {"Bearer " + signed}}); got != c.want {
			t.Errorf("a token signed by the %s key: %d, want %d", map[bool]string{true: "file's", false: "other"}[c.signer == key], got, c.want)
		}
	}
}

// Secrets are read from the environment once, by the configuration's
// validation; the gateway serves with the values it read: the admin
// token, the executionId key, a remote member's bearer key and the
// tracing headers.
func TestSecretsAreReadOnce(t *testing.T) {
	sawKey := make(chan string, 4)
	member := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case sawKey <- r.Header.Get("Authorization"):
		default:
		}
		http.Error(w, "not an executor server", http.StatusServiceUnavailable)
	}))
	t.Cleanup(member.Close)
	env := map[string]string{
		"ADMIN_TOKEN":  "admin-token-0123456789",
		"ID_KEY":       "0123456789abcdef0123456789abcdef",
		"MEMBER_KEY":   "member-key",
		"TRACE_HEADER": "trace-header-value",
	}
	reads := map[string]int{}
	hash, _ := auth.HashAPIKey(auth.NewAPIKey())
	yaml := `listen: 127.0.0.1:0
admin: {listen: "[::1]:0", tokenEnv: ADMIN_TOKEN}
executionIds: {keyEnv: ID_KEY}
tracing: {headers: [{name: X-Trace-Key, valueEnv: TRACE_HEADER}]}
backends:
  - {name: local, type: local, local: {maxWorkers: 1}}
  - {name: far, type: remote, remote: {members: [{url: "ws` + member.URL[len("http"):] + `", keyEnv: MEMBER_KEY}], dialTimeout: 2s}}
tenants: [{name: acme, backend: local, keys: [{name: k, hash: "` + hash + `"}]}]
routes: [{path: /v1/executor, kind: executor}]
`
	cfg, err := config.Parse("gateway.yaml", []byte(yaml), func(name string) string {
		reads[name]++
		return env[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ADMIN_TOKEN", "ID_KEY", "MEMBER_KEY", "TRACE_HEADER"} {
		if reads[name] != 1 {
			t.Errorf("validation read %s %d times, want once", name, reads[name])
		}
	}
	gw, err := gateway.New(cfg, gateway.Options{Kinds: kinds.All(), Getenv: func(name string) string {
		t.Errorf("the gateway read %s again", name)
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	if got := <-sawKey; got != "Bearer member-key" {
		t.Errorf("the remote member was sent Authorization %q, want the key validation read", got)
	}
	admin := httptest.NewServer(gw.AdminHandler())
	t.Cleanup(admin.Close)
	for token, want := range map[string]int{"": http.StatusUnauthorized, env["ADMIN_TOKEN"]: http.StatusOK, "wrong-token-0123456789": http.StatusUnauthorized} {
		req, _ := http.NewRequest("GET", admin.URL+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/metrics with token %q: %d, want %d", token, resp.StatusCode, want)
		}
	}
}
