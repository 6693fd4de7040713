package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/supolka/codemode-gateway/internal/bearer"
)

// hashPrefix names the hash function of a stored API key hash; the
// gateway's configuration reads hashes too, hence internal/bearer.
const hashPrefix = bearer.HashPrefix

// minKeyLength is the shortest API key accepted when hashing: a key must
// carry enough entropy that a fast hash of it cannot be brute-forced, which
// is why a plain SHA-256 (not a password hash) is the right tool here.
const minKeyLength = 24

// HashAPIKey returns the form an API key is stored in: "sha256:" and the
// hex digest of the key. Only the hash goes into configuration.
func HashAPIKey(key string) (string, error) {
	if len(key) < minKeyLength {
		return "", fmt.Errorf("auth: an API key must be at least %d characters, so that its hash cannot be reversed by brute force", minKeyLength)
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:]), nil
}

// NewAPIKey returns a fresh random API key (32 random bytes, base64url).
func NewAPIKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "cmk_" + base64.RawURLEncoding.EncodeToString(b)
}

// KeyHash is a stored API key's SHA-256 digest, as the gateway's
// configuration parses it.
type KeyHash = bearer.KeyHash

// ParseKeyHash reads a hash as HashAPIKey writes it: "sha256:" and 64 hex
// digits.
func ParseKeyHash(s string) (KeyHash, error) {
	if !strings.HasPrefix(s, hashPrefix) {
		return KeyHash{}, fmt.Errorf("the hash must start with %q (make one with `gateway hash-key`)", hashPrefix)
	}
	h, ok := bearer.ParseKeyHash(s)
	if !ok {
		return KeyHash{}, fmt.Errorf("the hash must be %q followed by 64 hex digits", hashPrefix)
	}
	return h, nil
}

// APIKey is one configured key: its stored hash, its name and its tenant.
type APIKey struct {
	Name   string
	Tenant string
	Hash   KeyHash
}

// APIKeys authenticates API keys against their stored hashes.
type APIKeys struct {
	keys []APIKey
}

// NewAPIKeys checks the configured keys: every key named and owned by a
// tenant, no hash configured twice.
func NewAPIKeys(keys []APIKey) (*APIKeys, error) {
	seen := map[KeyHash]string{}
	for i, k := range keys {
		if k.Name == "" || k.Tenant == "" {
			return nil, fmt.Errorf("auth: API key %d needs a name and a tenant", i)
		}
		if other, dup := seen[k.Hash]; dup {
			return nil, fmt.Errorf("auth: API keys %q and %q have the same hash", other, k.Name)
		}
		seen[k.Hash] = k.Name
	}
	return &APIKeys{keys: slices.Clone(keys)}, nil
}

// Authenticate implements Authenticator. A token shaped like a JWT (three
// dot-separated parts) is left to the JWT verifier. Every stored hash is
// compared, in constant time, whatever matches, so timing reveals neither
// which key matched nor how many there are before it.
func (a *APIKeys) Authenticate(_ context.Context, token string) (Identity, error) {
	if looksLikeJWT(token) {
		return Identity{}, ErrUnrecognized
	}
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].Hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Identity{}, errors.Join(ErrInvalid, errors.New("unknown API key"))
	}
	k := a.keys[match]
	return Identity{Tenant: k.Tenant, Method: "api-key", Credential: k.Name}, nil
}

func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2
}
