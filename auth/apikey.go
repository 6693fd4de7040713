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
	"strings"
)

// hashPrefix names the hash function of a stored API key hash, so a later
// scheme can be added without ambiguity.
const hashPrefix = "sha256:"

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

// APIKey is one configured key: its stored hash, its name and its tenant.
type APIKey struct {
	Name   string
	Tenant string
	// Hash is what HashAPIKey returned for the key.
	Hash string
}

type storedKey struct {
	name, tenant string
	sum          [sha256.Size]byte
}

// APIKeys authenticates API keys against their stored hashes.
type APIKeys struct {
	keys []storedKey
}

// NewAPIKeys validates the configured keys: every hash well formed, every
// key named and owned by a tenant, no hash configured twice.
func NewAPIKeys(keys []APIKey) (*APIKeys, error) {
	a := &APIKeys{}
	seen := map[[sha256.Size]byte]string{}
	for i, k := range keys {
		if k.Name == "" || k.Tenant == "" {
			return nil, fmt.Errorf("auth: API key %d needs a name and a tenant", i)
		}
		hexSum, ok := strings.CutPrefix(k.Hash, hashPrefix)
		if !ok {
			return nil, fmt.Errorf("auth: API key %q: the hash must start with %q (make one with `gateway hash-key`)", k.Name, hashPrefix)
		}
		raw, err := hex.DecodeString(hexSum)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("auth: API key %q: the hash must be %q followed by 64 hex digits", k.Name, hashPrefix)
		}
		var sum [sha256.Size]byte
		copy(sum[:], raw)
		if other, dup := seen[sum]; dup {
			return nil, fmt.Errorf("auth: API keys %q and %q have the same hash", other, k.Name)
		}
		seen[sum] = k.Name
		a.keys = append(a.keys, storedKey{name: k.Name, tenant: k.Tenant, sum: sum})
	}
	return a, nil
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
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return Identity{}, errors.Join(ErrInvalid, errors.New("unknown API key"))
	}
	k := a.keys[match]
	return Identity{Tenant: k.tenant, Method: "api-key", Credential: k.name}, nil
}

func looksLikeJWT(token string) bool {
	return strings.Count(token, ".") == 2
}
