package auth

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// minHMACSecret is the shortest HS256 secret accepted: RFC 7518 requires a
// key at least as long as the hash output.
const minHMACSecret = 32

// minRSABits is the smallest RSA modulus accepted for RS256.
const minRSABits = 2048

// DefaultTenantClaim is the claim a JWT names its tenant in when the
// configuration names none.
const DefaultTenantClaim = "tenant"

// JWTConfig configures a JWTVerifier. At least one key source must be set.
type JWTConfig struct {
	// Issuer is the required value of the iss claim.
	Issuer string
	// Audience is a value the aud claim must contain.
	Audience string
	// TenantClaim names the claim that carries the tenant; DefaultTenantClaim
	// when empty. The claim must be a non-empty string.
	TenantClaim string
	// HMACSecret enables HS256 with this secret (at least 32 bytes).
	HMACSecret []byte
	// PublicKeysPEM enables RS256 and ES256 with these PEM public keys.
	PublicKeysPEM []string
	// JWKSFile names a JSON Web Key Set file of RSA and P-256 EC keys.
	JWKSFile string
	// JWKS is the JWKS file's contents when the caller read it already;
	// JWKSFile then only names it in errors.
	JWKS []byte
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

type verifyKey struct {
	kid string
	alg string // "HS256", "RS256" or "ES256"
	key any
}

// JWTVerifier authenticates JWT bearer tokens. It accepts only HS256, RS256
// and ES256, requires exp, checks nbf, iss and aud, and takes the tenant from
// the configured claim.
type JWTVerifier struct {
	cfg  JWTConfig
	keys []verifyKey
}

// ErrNoJWTKey is the problem of a JWTConfig that names no key at all.
var ErrNoJWTKey = errors.New("a JWT verifier needs a key: an HS256 secret, PEM public keys or a JWKS file")

// A JWTConfigError is one thing wrong with a JWTConfig. NewJWTVerifier
// reports every one it finds, joined, so a bad public key does not hide a
// broken JWKS file.
type JWTConfigError struct {
	// Field is the part at fault, named after JWTConfig's fields:
	// "HMACSecret", "PublicKeysPEM", "JWKSFile", or empty for the
	// configuration as a whole (a missing issuer, no key at all).
	Field string
	// Index is the position in PublicKeysPEM of the key at fault.
	Index int
	Err   error
}

func (e *JWTConfigError) Error() string {
	switch e.Field {
	case "PublicKeysPEM":
		return fmt.Sprintf("auth: public key %d: %v", e.Index, e.Err)
	case "JWKSFile":
		return "auth: JWKS file: " + e.Err.Error()
	}
	return "auth: " + e.Err.Error()
}

func (e *JWTConfigError) Unwrap() error { return e.Err }

// NewJWTVerifier validates cfg and loads its keys. Its error joins a
// *JWTConfigError for each problem.
func NewJWTVerifier(cfg JWTConfig) (*JWTVerifier, error) {
	var errs []error
	fail := func(field string, index int, err error) {
		errs = append(errs, &JWTConfigError{Field: field, Index: index, Err: err})
	}
	if cfg.Issuer == "" || cfg.Audience == "" {
		fail("", 0, errors.New("a JWT verifier needs both an issuer and an audience, so that a token minted for another service is refused"))
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = DefaultTenantClaim
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &JWTVerifier{cfg: cfg}
	if cfg.HMACSecret != nil {
		if len(cfg.HMACSecret) < minHMACSecret {
			fail("HMACSecret", 0, fmt.Errorf("the HS256 secret must be at least %d bytes", minHMACSecret))
		} else {
			v.keys = append(v.keys, verifyKey{alg: "HS256", key: cfg.HMACSecret})
		}
	}
	for i, p := range cfg.PublicKeysPEM {
		k, err := publicKeyFromPEM([]byte(p))
		if err != nil {
			fail("PublicKeysPEM", i, err)
			continue
		}
		v.keys = append(v.keys, k)
	}
	if cfg.JWKSFile != "" || cfg.JWKS != nil {
		data, err := cfg.JWKS, error(nil)
		if data == nil {
			data, err = os.ReadFile(cfg.JWKSFile)
		}
		if err != nil {
			fail("JWKSFile", 0, err)
		} else if ks, err := parseJWKS(data); err != nil {
			fail("JWKSFile", 0, fmt.Errorf("%s: %w", cfg.JWKSFile, err))
		} else {
			v.keys = append(v.keys, ks...)
		}
	}
	if len(errs) == 0 && len(v.keys) == 0 {
		fail("", 0, ErrNoJWTKey)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return v, nil
}

func publicKeyFromPEM(p []byte) (verifyKey, error) {
	if k, err := jwt.ParseRSAPublicKeyFromPEM(p); err == nil {
		if k.N.BitLen() < minRSABits {
			return verifyKey{}, fmt.Errorf("an RSA key must have at least %d bits", minRSABits)
		}
		return verifyKey{alg: "RS256", key: k}, nil
	}
	if k, err := jwt.ParseECPublicKeyFromPEM(p); err == nil {
		if k.Curve != elliptic.P256() {
			return verifyKey{}, errors.New("an EC key must be on the P-256 curve (ES256)")
		}
		return verifyKey{alg: "ES256", key: k}, nil
	}
	return verifyKey{}, errors.New("not a PEM-encoded RSA or P-256 EC public key")
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func parseJWKS(data []byte) ([]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	var out []verifyKey
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue // an encryption key has no say in verification
		}
		vk, err := k.verifyKey()
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %w", i, k.Kid, err)
		}
		out = append(out, vk)
	}
	if len(out) == 0 {
		return nil, errors.New("it holds no signing key")
	}
	return out, nil
}

func (k jwk) verifyKey() (verifyKey, error) {
	b64 := func(field, s string) ([]byte, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("member %q is not base64url", field)
		}
		return b, nil
	}
	switch k.Kty {
	case "RSA":
		if k.Alg != "" && k.Alg != "RS256" {
			return verifyKey{}, fmt.Errorf("alg %q is not supported; RSA keys verify RS256", k.Alg)
		}
		n, errN := b64("n", k.N)
		e, errE := b64("e", k.E)
		if err := cmp.Or(errN, errE); err != nil {
			return verifyKey{}, err
		}
		if len(e) > 4 {
			return verifyKey{}, errors.New("the RSA exponent is too large")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < minRSABits {
			return verifyKey{}, fmt.Errorf("an RSA key must have at least %d bits", minRSABits)
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return verifyKey{}, errors.New("the RSA exponent is invalid")
		}
		return verifyKey{kid: k.Kid, alg: "RS256", key: pub}, nil
	case "EC":
		if k.Crv != "P-256" || (k.Alg != "" && k.Alg != "ES256") {
			return verifyKey{}, errors.New("only P-256 EC keys (ES256) are supported")
		}
		x, errX := b64("x", k.X)
		y, errY := b64("y", k.Y)
		if err := cmp.Or(errX, errY); err != nil {
			return verifyKey{}, err
		}
		if len(x) != 32 || len(y) != 32 {
			return verifyKey{}, errors.New("a P-256 coordinate must be 32 bytes")
		}
		point := append([]byte{4}, append(x, y...)...)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		if err != nil {
			return verifyKey{}, errors.New("the point is not on the P-256 curve")
		}
		return verifyKey{kid: k.Kid, alg: "ES256", key: pub}, nil
	default:
		return verifyKey{}, fmt.Errorf("key type %q is not supported (use RSA or EC P-256)", k.Kty)
	}
}

// Authenticate implements Authenticator. A token that is not shaped like a
// JWT is ErrUnrecognized.
func (v *JWTVerifier) Authenticate(_ context.Context, token string) (Identity, error) {
	if !looksLikeJWT(token) {
		return Identity{}, ErrUnrecognized
	}
	claims := jwt.MapClaims{}
	t, err := jwt.ParseWithClaims(token, claims, v.keyFor,
		jwt.WithValidMethods([]string{"HS256", "RS256", "ES256"}),
		jwt.WithExpirationRequired(),
		jwt.WithIssuer(v.cfg.Issuer),
		jwt.WithAudience(v.cfg.Audience),
		jwt.WithLeeway(v.cfg.Leeway),
		jwt.WithTimeFunc(v.cfg.Now),
	)
	tenant, _ := claims[v.cfg.TenantClaim].(string)
	if err != nil {
		invalid := errors.Join(ErrInvalid, jwtReason(err))
		if errors.Is(err, jwt.ErrTokenInvalidClaims) && tenant != "" {
			// Its signature verified, so a configured key vouches for the
			// tenant it names; only a claim failed (exp, nbf, iss, aud).
			return Identity{}, &claimsError{tenant: tenant, error: invalid}
		}
		return Identity{}, invalid
	}
	if tenant == "" {
		return Identity{}, errors.Join(ErrInvalid, fmt.Errorf("the token has no %q claim naming a tenant", v.cfg.TenantClaim))
	}
	return Identity{Tenant: tenant, Method: "jwt", Credential: jwtCredential(claims, t)}, nil
}

// maxCredentialName bounds what Identity.Credential takes from a token.
const maxCredentialName = 64

// jwtCredential names a verified token for the logs: its subject, else
// "kid " and the kid of the key that signed it, else "iss " and its
// issuer, cut to maxCredentialName bytes and "…".
func jwtCredential(claims jwt.MapClaims, t *jwt.Token) string {
	name := ""
	if sub, _ := claims["sub"].(string); sub != "" {
		name = sub
	} else if kid, _ := t.Header["kid"].(string); kid != "" {
		name = "kid " + kid
	} else if iss, _ := claims["iss"].(string); iss != "" {
		name = "iss " + iss
	}
	if len(name) > maxCredentialName {
		name = strings.ToValidUTF8(name[:maxCredentialName], "") + "…"
	}
	return name
}

// claimsError is an invalid token whose signature verified: the tenant it
// names is known, though the token does not authenticate.
type claimsError struct {
	tenant string
	error
}

func (e *claimsError) Unwrap() error { return e.error }

// TenantOf is the tenant an invalid credential belongs to when that much
// is proved: a JWT whose signature verified and whose claims failed (it
// expired, say). "" when nothing is proved, which is every other failure.
// The name comes from a token a configured key signed; the caller still
// checks it against its tenants before using it.
func TenantOf(err error) string {
	var ce *claimsError
	if errors.As(err, &ce) {
		return ce.tenant
	}
	return ""
}

// keyFor offers every configured key of the token's algorithm (and of its
// kid, when it names one); the parser accepts the first that verifies.
func (v *JWTVerifier) keyFor(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range v.keys {
		if k.alg != t.Method.Alg() || (kid != "" && k.kid != "" && k.kid != kid) {
			continue
		}
		set.Keys = append(set.Keys, k.key)
	}
	if len(set.Keys) == 0 {
		return nil, fmt.Errorf("no configured key verifies %s tokens", t.Method.Alg())
	}
	return set, nil
}

// jwtReasons are the reasons, safe to log and useful to an operator, for
// the parser's errors, the first that matches winning.
var jwtReasons = []struct {
	err    error
	reason string
}{
	{jwt.ErrTokenExpired, "the token has expired"},
	{jwt.ErrTokenNotValidYet, "the token is not valid yet (nbf)"},
	{jwt.ErrTokenRequiredClaimMissing, "the token lacks a required claim (exp)"},
	{jwt.ErrTokenInvalidIssuer, "the token's issuer is not the configured one"},
	{jwt.ErrTokenInvalidAudience, "the token's audience does not include the configured one"},
	{jwt.ErrTokenSignatureInvalid, "the token's signature does not verify"},
	{jwt.ErrTokenMalformed, "the token is malformed"},
	{jwt.ErrTokenUnverifiable, "the token cannot be verified with the configured keys"},
}

// jwtReason turns a parser error into its entry of jwtReasons.
func jwtReason(err error) error {
	for _, r := range jwtReasons {
		if errors.Is(err, r.err) {
			return errors.New(r.reason)
		}
	}
	return errors.New("the token is invalid")
}
