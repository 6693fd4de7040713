package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var testNow = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func baseClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss":    "https://issuer.example",
		"aud":    "codemode-gateway",
		"sub":    "app-1",
		"tenant": "acme",
		"exp":    testNow.Add(time.Hour).Unix(),
		"nbf":    testNow.Add(-time.Minute).Unix(),
	}
}

func baseConfig() JWTConfig {
	return JWTConfig{Issuer: "https://issuer.example", Audience: "codemode-gateway", Now: func() time.Time { return testNow }}
}

func sign(t testing.TB, m jwt.SigningMethod, key any, claims jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pemOf(t testing.TB, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

var (
	rsaKey, _ = rsa.GenerateKey(rand.Reader, 2048)
	ecKey, _  = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	hmacKey   = []byte("0123456789abcdef0123456789abcdef")
)

func TestJWTAlgorithms(t *testing.T) {
	cfg := baseConfig()
	cfg.HMACSecret = hmacKey
	cfg.PublicKeysPEM = []string{pemOf(t, &rsaKey.PublicKey), pemOf(t, &ecKey.PublicKey)}
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{Tenant: "acme", Method: "jwt", Credential: "app-1"}
	for name, tok := range map[string]string{
		"HS256": sign(t, jwt.SigningMethodHS256, hmacKey, baseClaims(), ""),
		"RS256": sign(t, jwt.SigningMethodRS256, rsaKey, baseClaims(), ""),
		"ES256": sign(t, jwt.SigningMethodES256, ecKey, baseClaims(), ""),
	} {
		got, err := v.Authenticate(context.Background(), tok)
		if err != nil || got != want {
			t.Errorf("%s: got %+v, %v; want %+v", name, got, err, want)
		}
	}
}

func TestJWTRejections(t *testing.T) {
	cfg := baseConfig()
	cfg.HMACSecret = hmacKey
	cfg.PublicKeysPEM = []string{pemOf(t, &rsaKey.PublicKey)}
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	with := func(k string, val any) jwt.MapClaims {
		c := baseClaims()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsaPEM := pemOf(t, &rsaKey.PublicKey)
	cases := map[string]struct {
		token  string
		reason string
	}{
		"expired":          {sign(t, jwt.SigningMethodHS256, hmacKey, with("exp", testNow.Add(-time.Hour).Unix()), ""), "expired"},
		"no exp":           {sign(t, jwt.SigningMethodHS256, hmacKey, with("exp", nil), ""), "required claim"},
		"not yet valid":    {sign(t, jwt.SigningMethodHS256, hmacKey, with("nbf", testNow.Add(time.Hour).Unix()), ""), "not valid yet"},
		"wrong issuer":     {sign(t, jwt.SigningMethodHS256, hmacKey, with("iss", "https://evil.example"), ""), "issuer"},
		"wrong audience":   {sign(t, jwt.SigningMethodHS256, hmacKey, with("aud", "other"), ""), "audience"},
		"no tenant":        {sign(t, jwt.SigningMethodHS256, hmacKey, with("tenant", nil), ""), "tenant"},
		"tenant not text":  {sign(t, jwt.SigningMethodHS256, hmacKey, with("tenant", 7), ""), "tenant"},
		"wrong hmac":       {sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), baseClaims(), ""), "signature"},
		"wrong rsa key":    {sign(t, jwt.SigningMethodRS256, otherRSA, baseClaims(), ""), "verif"},
		"unsupported alg":  {sign(t, jwt.SigningMethodHS384, hmacKey, baseClaims(), ""), "verif"},
		"alg none":         {sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, baseClaims(), ""), "verif"},
		"malformed":        {"a.b.c", "malformed"},
		"key confusion":    {sign(t, jwt.SigningMethodHS256, []byte(rsaPEM), baseClaims(), ""), "signature"},
		"tampered payload": {tamper(sign(t, jwt.SigningMethodRS256, rsaKey, baseClaims(), "")), "signature"},
	}
	for name, c := range cases {
		_, err := v.Authenticate(context.Background(), c.token)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: err = %q, want it to mention %q", name, err, c.reason)
		}
		if strings.Contains(err.Error(), c.token) {
			t.Errorf("%s: the error leaks the token", name)
		}
	}
	if _, err := v.Authenticate(context.Background(), "plain-api-key"); !errors.Is(err, ErrUnrecognized) {
		t.Errorf("a non-JWT token gave %v, want ErrUnrecognized", err)
	}
}

// tamper swaps the tenant in a signed token's payload, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), `"acme"`, `"evil"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func TestJWTLeewayAndTenantClaim(t *testing.T) {
	cfg := baseConfig()
	cfg.HMACSecret = hmacKey
	cfg.TenantClaim = "org"
	cfg.Leeway = 2 * time.Minute
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := baseClaims()
	c["org"] = "initech"
	c["exp"] = testNow.Add(-time.Minute).Unix() // inside the leeway
	got, err := v.Authenticate(context.Background(), sign(t, jwt.SigningMethodHS256, hmacKey, c, ""))
	if err != nil || got.Tenant != "initech" {
		t.Fatalf("got %+v, %v; want tenant initech", got, err)
	}
}

func writeJWKS(t *testing.T, keys ...map[string]string) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PublicKey) map[string]string {
	raw, _ := k.Bytes() // 0x04 || X || Y
	return map[string]string{"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(raw[1:33]), "y": b64(raw[33:])}
}

func TestJWKSFile(t *testing.T) {
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	cfg := baseConfig()
	cfg.JWKSFile = writeJWKS(t,
		rsaJWK("r1", &rsaKey.PublicKey),
		rsaJWK("r2", &otherRSA.PublicKey),
		ecJWK("e1", &ecKey.PublicKey),
		map[string]string{"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"}, // ignored: not a signing key
	)
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, tok := range map[string]string{
		"rsa by kid": sign(t, jwt.SigningMethodRS256, otherRSA, baseClaims(), "r2"),
		"rsa no kid": sign(t, jwt.SigningMethodRS256, rsaKey, baseClaims(), ""),
		"ec by kid":  sign(t, jwt.SigningMethodES256, ecKey, baseClaims(), "e1"),
		"ec no kid":  sign(t, jwt.SigningMethodES256, ecKey, baseClaims(), ""),
	} {
		if _, err := v.Authenticate(ctx, tok); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A kid naming another key must not verify with the right key's signature.
	if _, err := v.Authenticate(ctx, sign(t, jwt.SigningMethodRS256, rsaKey, baseClaims(), "r2")); !errors.Is(err, ErrInvalid) {
		t.Errorf("a token whose kid names another key verified: %v", err)
	}
}

// JWKS given as bytes is used as it is: the file JWKSFile names is not
// read, and only names the keys in errors.
func TestJWKSBytesAreNotReadAgain(t *testing.T) {
	cfg := baseConfig()
	path := writeJWKS(t, ecJWK("e1", &ecKey.PublicKey))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	cfg.JWKSFile, cfg.JWKS = path, data
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(context.Background(), sign(t, jwt.SigningMethodES256, ecKey, baseClaims(), "e1")); err != nil {
		t.Errorf("a token signed by the key of the bytes: %v", err)
	}
	cfg.JWKS = []byte("{")
	_, err = NewJWTVerifier(cfg)
	if want := "auth: JWKS file: " + path + ": not a JSON Web Key Set: unexpected end of JSON input"; err == nil || err.Error() != want {
		t.Errorf("bad bytes: %v, want %q", err, want)
	}
}

func TestNewJWTVerifierRejectsBadConfig(t *testing.T) {
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	cases := map[string]JWTConfig{
		"no issuer":     {Audience: "a", HMACSecret: hmacKey},
		"no audience":   {Issuer: "i", HMACSecret: hmacKey},
		"no keys":       {Issuer: "i", Audience: "a"},
		"short secret":  {Issuer: "i", Audience: "a", HMACSecret: []byte("short")},
		"small rsa":     {Issuer: "i", Audience: "a", PublicKeysPEM: []string{pemOf(t, &small.PublicKey)}},
		"p384":          {Issuer: "i", Audience: "a", PublicKeysPEM: []string{pemOf(t, &p384.PublicKey)}},
		"garbage pem":   {Issuer: "i", Audience: "a", PublicKeysPEM: []string{"not a key"}},
		"missing jwks":  {Issuer: "i", Audience: "a", JWKSFile: filepath.Join(t.TempDir(), "absent.json")},
		"jwks bad json": {Issuer: "i", Audience: "a", JWKSFile: writeFile(t, "{")},
		"jwks empty":    {Issuer: "i", Audience: "a", JWKSFile: writeFile(t, `{"keys":[]}`)},
		"jwks oct":      {Issuer: "i", Audience: "a", JWKSFile: writeFile(t, `{"keys":[{"kty":"oct","k":"AAAA"}]}`)},
		"jwks bad ec":   {Issuer: "i", Audience: "a", JWKSFile: writeFile(t, `{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`)},
		"jwks off-curve": {Issuer: "i", Audience: "a", JWKSFile: writeFile(t,
			`{"keys":[{"kty":"EC","crv":"P-256","x":"`+b64(make([]byte, 32))+`","y":"`+b64(append(make([]byte, 31), 1))+`"}]}`)},
	}
	for name, cfg := range cases {
		if _, err := NewJWTVerifier(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Every problem of a JWTConfig is reported, each as a *JWTConfigError
// naming its part.
func TestNewJWTVerifierReportsEveryProblem(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "absent.json")
	_, err := NewJWTVerifier(JWTConfig{Audience: "a", HMACSecret: []byte("short"), PublicKeysPEM: []string{pemOf(t, &rsaKey.PublicKey), "not a key"}, JWKSFile: absent})
	want := "auth: a JWT verifier needs both an issuer and an audience, so that a token minted for another service is refused\n" +
		"auth: the HS256 secret must be at least 32 bytes\n" +
		"auth: public key 1: not a PEM-encoded RSA or P-256 EC public key\n" +
		"auth: JWKS file: open " + absent + ": no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *JWTConfigError
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not a *JWTConfigError", e)
		}
		fields = append(fields, fmt.Sprintf("%s/%d", ce.Field, ce.Index))
	}
	if got := strings.Join(fields, " "); got != "/0 HMACSecret/0 PublicKeysPEM/1 JWKSFile/0" {
		t.Fatalf("fields %s", got)
	}
}

func writeFile(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzAuthenticate feeds arbitrary tokens to both authenticators: they must
// answer with an error or an identity, never panic, and never accept a token
// they did not sign.
func FuzzAuthenticate(f *testing.F) {
	f.Add("a.b.c")
	f.Add(sign(f, jwt.SigningMethodHS256, hmacKey, baseClaims(), ""))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("cmk_" + strings.Repeat("A", 43))
	cfg := baseConfig()
	cfg.HMACSecret = hmacKey
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		f.Fatal(err)
	}
	keys, err := NewAPIKeys([]APIKey{{Name: "k", Tenant: "t", Hash: mustHash(f, NewAPIKey())}})
	if err != nil {
		f.Fatal(err)
	}
	valid := sign(f, jwt.SigningMethodHS256, hmacKey, baseClaims(), "")
	f.Fuzz(func(t *testing.T, tok string) {
		chain := Chain{keys, v}
		id, err := chain.Authenticate(context.Background(), tok)
		if err == nil && tok != valid && id.Method == "api-key" {
			t.Fatalf("accepted a random API key %q", tok)
		}
	})
}

// FuzzParseJWKS: no JWKS document may panic the parser.
func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"` + b64(rsaKey.N.Bytes()) + `","e":"////////"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = parseJWKS(data)
	})
}

// A verified token's Credential names it for the logs: its subject, else
// its key's kid, else its issuer, cut at 64 bytes.
func TestJWTCredentialNamesTheToken(t *testing.T) {
	cfg := baseConfig()
	cfg.HMACSecret = hmacKey
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	noSub := baseClaims()
	delete(noSub, "sub")
	long := baseClaims()
	long["sub"] = strings.Repeat("s", 500)
	for name, c := range map[string]struct {
		claims jwt.MapClaims
		kid    string
		want   string
	}{
		"subject":        {baseClaims(), "k1", "app-1"},
		"kid":            {noSub, "k1", "kid k1"},
		"issuer":         {noSub, "", "iss https://issuer.example"},
		"a long subject": {long, "", strings.Repeat("s", 64) + "…"},
	} {
		id, err := v.Authenticate(context.Background(), sign(t, jwt.SigningMethodHS256, hmacKey, c.claims, c.kid))
		if err != nil || id.Credential != c.want {
			t.Errorf("%s: Credential %q (%v), want %q", name, id.Credential, err, c.want)
		}
	}
}

// TenantOf names the tenant of a token whose signature verified and whose
// claims failed, and nothing for a token no configured key signed.
func TestTenantOfAnInvalidToken(t *testing.T) {
	cfg := baseConfig()
	cfg.HMACSecret = hmacKey
	v, err := NewJWTVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	expired := baseClaims()
	expired["exp"] = testNow.Add(-time.Hour).Unix()
	noTenant := baseClaims()
	delete(noTenant, "tenant")
	for name, c := range map[string]struct {
		token string
		want  string
	}{
		"expired":            {sign(t, jwt.SigningMethodHS256, hmacKey, expired, ""), "acme"},
		"forged and expired": {sign(t, jwt.SigningMethodHS256, []byte("another secret of thirty-two bytes!"), expired, ""), ""},
		"no tenant":          {sign(t, jwt.SigningMethodHS256, hmacKey, noTenant, ""), ""},
		"malformed":          {"a.b.c", ""},
	} {
		_, err := v.Authenticate(context.Background(), c.token)
		if !errors.Is(err, ErrInvalid) || TenantOf(err) != c.want {
			t.Errorf("%s: TenantOf(%v) = %q, want %q", name, err, TenantOf(err), c.want)
		}
	}
	keys, err := NewAPIKeys([]APIKey{{Name: "k", Tenant: "acme", Hash: KeyHash{1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Authenticate(context.Background(), "cmk_not-a-configured-key-at-all"); TenantOf(err) != "" {
		t.Errorf("an unknown API key is attributed to %q", TenantOf(err))
	}
}
