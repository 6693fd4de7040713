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

	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
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
	gw, err := gateway.New(cfg, gateway.Options{})
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
