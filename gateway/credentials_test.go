package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
)

// These are the problems of the credentials that take the authenticator's
// code to find: CheckCredentials reports them, given to config.Load as
// gateway serve, check-config and a reload give it, each at its line and
// key, beside validation's own.

// good is config's valid file of 13 lines; the jwt sections below start
// at 14.
var good = func() string {
	b, err := os.ReadFile(filepath.Join("config", "testdata", "good.yaml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// A jwt section needs both an issuer and an audience.
func TestAJWTSectionNeedsAnAudience(t *testing.T) {
	src := good + `jwt:
  issuer: https://issuer.example
  audience: gw
  hmacSecretEnv: GW_SECRET
`
	env := func(k string) string {
		if k == "GW_SECRET" {
			return "0123456789abcdef0123456789abcdef"
		}
		return ""
	}
	check := gateway.CheckCredentials
	if _, err := config.Parse("c.yaml", []byte(src), env, check); err != nil {
		t.Fatal(err)
	}
	_, err := config.Parse("c.yaml", []byte(strings.Replace(src, "  audience: gw\n", "", 1)), env, check)
	want := "c.yaml:14: jwt: a JWT verifier needs both an issuer and an audience, so that a token minted for another service is refused"
	if err == nil || err.Error() != want {
		t.Fatalf("a jwt section without audience gave %v, want %s", err, want)
	}
}

func TestJWKSFileIsRelativeToTheConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	src := good + "jwt:\n  issuer: i\n  audience: a\n  jwksFile: keys.json\n"
	path := filepath.Join(dir, "gw.yaml")
	os.WriteFile(path, []byte(src), 0o600)
	_, err := config.LoadWith(path, noEnv, gateway.CheckCredentials)
	want := path + ":17: jwt.jwksFile: " + filepath.Join(dir, "keys.json") + ": it holds no signing key"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want the JWKS file (read relative to the config) to be refused for holding no key:\n%s", err, want)
	}
}

// Every problem of the jwt section is reported, each at its own key: a bad
// public key does not hide a broken JWKS file or a short secret.
func TestJWTProblemsEachAtTheirKey(t *testing.T) {
	dir := t.TempDir()
	src := good + `jwt:
  issuer: i
  audience: a
  hmacSecretEnv: GW_SECRET
  publicKeys:
    - "not a key"
    - "nor this"
  jwksFile: absent.json
`
	path := filepath.Join(dir, "gw.yaml")
	os.WriteFile(path, []byte(src), 0o600)
	env := func(k string) string {
		if k == "GW_SECRET" {
			return "short"
		}
		return ""
	}
	_, err := config.LoadWith(path, env, gateway.CheckCredentials)
	want := path + ":17: jwt.hmacSecretEnv: environment variable GW_SECRET: the HS256 secret must be at least 32 bytes\n" +
		path + ":19: jwt.publicKeys[0]: not a PEM-encoded RSA or P-256 EC public key\n" +
		path + ":20: jwt.publicKeys[1]: not a PEM-encoded RSA or P-256 EC public key\n" +
		path + ":21: jwt.jwksFile: open " + filepath.Join(dir, "absent.json") + ": no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	// An unset secret variable does not hide the rest either, and is not
	// also reported as a section with no key.
	_, err = config.LoadWith(path, noEnv, gateway.CheckCredentials)
	want = path + ":17: jwt.hmacSecretEnv: environment variable GW_SECRET is not set; it must hold the HS256 secret\n" +
		path + ":19: jwt.publicKeys[0]: not a PEM-encoded RSA or P-256 EC public key\n" +
		path + ":20: jwt.publicKeys[1]: not a PEM-encoded RSA or P-256 EC public key\n" +
		path + ":21: jwt.jwksFile: open " + filepath.Join(dir, "absent.json") + ": no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("with the secret unset, got\n%v\nwant\n%s", err, want)
	}
	// The only key named, unset: that alone is said.
	os.WriteFile(path, []byte(good+"jwt:\n  issuer: i\n  audience: a\n  hmacSecretEnv: GW_SECRET\n"), 0o600)
	_, err = config.LoadWith(path, noEnv, gateway.CheckCredentials)
	want = path + ":17: jwt.hmacSecretEnv: environment variable GW_SECRET is not set; it must hold the HS256 secret"
	if err == nil || err.Error() != want {
		t.Fatalf("with the only key unset, got\n%v\nwant\n%s", err, want)
	}
}

// A reload of a file whose jwt section the check refuses is refused with
// the problem at its line, and the running configuration stays: a token
// its verifier accepts still connects.
func TestReloadRefusesAJWTSectionItCannotBuild(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	env := func(k string) string {
		if k == "JWT_SECRET" {
			return secret
		}
		return ""
	}
	src := `listen: 127.0.0.1:0
backends: [{name: local, type: local, local: {maxWorkers: 1}}]
jwt: {issuer: https://issuer.test, audience: codemode, hmacSecretEnv: JWT_SECRET}
tenants: [{name: acme, backend: local}]
routes: [{path: /v1/executor, kind: executor}]
`
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	os.WriteFile(path, []byte(src), 0o600)
	cfg, err := config.LoadWith(path, env, gateway.CheckCredentials)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{Kinds: kinds.All(), ConfigPath: path, Getenv: env, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(gw.Handler())
	t.Cleanup(func() { hs.Close(); gw.Close() })
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": "https://issuer.test", "aud": "codemode", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	bearer := http.Header{"Authorization": {"Bearer " + signed}}
	if got := upgradeStatus(t, hs.URL+"/v1/executor", bearer); got != http.StatusSwitchingProtocols {
		t.Fatalf("the token before the reload: %d", got)
	}

	os.WriteFile(path, []byte(strings.Replace(src, "hmacSecretEnv: JWT_SECRET}", `hmacSecretEnv: JWT_SECRET, publicKeys: ["not a key"]}`, 1)), 0o600)
	err = gw.ReloadFile()
	want := path + ":3: jwt.publicKeys[0]: not a PEM-encoded RSA or P-256 EC public key"
	if err == nil || err.Error() != want {
		t.Fatalf("the reload gave %v, want %s", err, want)
	}
	if got := upgradeStatus(t, hs.URL+"/v1/executor", bearer); got != http.StatusSwitchingProtocols {
		t.Errorf("the token after the refused reload: %d, want the running configuration to accept it still", got)
	}
}

// New builds the authenticator of the configuration it is given, so one
// that did not pass CheckCredentials is refused there, saying why at its
// key; so is one whose key source validation could not read.
func TestNewRefusesCredentialsItCannotBuild(t *testing.T) {
	src := "listen: 127.0.0.1:0\nbackends: [{name: local, type: local, local: {maxWorkers: 1}}]\n" +
		"jwt: {issuer: i, audience: a, publicKeys: [\"not a key\"]}\n" +
		"tenants: [{name: acme, backend: local}]\nroutes: [{path: /v1/executor, kind: executor}]\n"
	cfg, err := config.Parse("c.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := "jwt.publicKeys[0]: not a PEM-encoded RSA or P-256 EC public key"
	if gw, err := gateway.New(cfg, gateway.Options{Kinds: kinds.All()}); err == nil || err.Error() != want {
		if gw != nil {
			gw.Close()
		}
		t.Fatalf("New gave %v, want %s", err, want)
	}
	cfg.Credentials.JWT = &config.JWTSettings{Issuer: "i", Audience: "a", HMACSecret: []byte(strings.Repeat("s", 32)), JWKSFile: "unread.json"}
	want = "jwt: a key source it names was not read: its variable is not set, or its file cannot be read"
	if gw, err := gateway.New(cfg, gateway.Options{Kinds: kinds.All()}); err == nil || err.Error() != want {
		if gw != nil {
			gw.Close()
		}
		t.Fatalf("New with a JWKS file unread gave %v, want %s", err, want)
	}
}
