package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

// mustHash is key's hash as the configuration stores it, read back.
func mustHash(t testing.TB, key string) KeyHash {
	t.Helper()
	s, err := HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseKeyHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHashAPIKey(t *testing.T) {
	// SHA-256 of "0123456789abcdefghijklmn", computed independently with sha256sum.
	const key = "0123456789abcdefghijklmn"
	const want = "sha256:d5ea2aa9223ac1fa43ccec70b30962690fcfc6686857f99a0c4b2963cf8bee4b"
	got, err := HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("HashAPIKey = %q, want %q", got, want)
	}
	if _, err := HashAPIKey("short"); err == nil {
		t.Fatal("a short key was accepted")
	}
	if a, b := NewAPIKey(), NewAPIKey(); a == b || len(a) < minKeyLength {
		t.Fatalf("NewAPIKey gave %q and %q", a, b)
	}
}

func TestAPIKeysAuthenticate(t *testing.T) {
	k1, k2 := NewAPIKey(), NewAPIKey()
	keys, err := NewAPIKeys([]APIKey{
		{Name: "demo", Tenant: "acme", Hash: mustHash(t, k1)},
		{Name: "ci", Tenant: "globex", Hash: mustHash(t, k2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for key, want := range map[string]Identity{
		k1: {Tenant: "acme", Method: "api-key", Credential: "demo"},
		k2: {Tenant: "globex", Method: "api-key", Credential: "ci"},
	} {
		got, err := keys.Authenticate(ctx, key)
		if err != nil || got != want {
			t.Fatalf("Authenticate = %+v, %v; want %+v", got, err, want)
		}
	}
	_, err = keys.Authenticate(ctx, k1+"x")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a wrong key gave %v, want ErrInvalid", err)
	}
	if strings.Contains(err.Error(), k1) {
		t.Fatal("the error leaks the key")
	}
	if _, err := keys.Authenticate(ctx, "a.b.c"); !errors.Is(err, ErrUnrecognized) {
		t.Fatalf("a JWT-shaped token gave %v, want ErrUnrecognized", err)
	}
}

func TestNewAPIKeysRejectsBadConfig(t *testing.T) {
	good := mustHash(t, NewAPIKey())
	cases := map[string][]APIKey{
		"no name":        {{Tenant: "t", Hash: good}},
		"no tenant":      {{Name: "n", Hash: good}},
		"duplicate hash": {{Name: "a", Tenant: "t", Hash: good}, {Name: "b", Tenant: "u", Hash: good}},
	}
	for name, keys := range cases {
		if _, err := NewAPIKeys(keys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// ParseKeyHash reads what HashAPIKey writes, and says what is wrong with
// anything else.
func TestParseKeyHash(t *testing.T) {
	const key = "0123456789abcdefghijklmn" // as in TestHashAPIKey
	stored, _ := HashAPIKey(key)
	h, err := ParseKeyHash(stored)
	if err != nil || h != KeyHash(sha256.Sum256([]byte(key))) {
		t.Fatalf("ParseKeyHash(%q) = %x, %v", stored, h, err)
	}
	if upper, err := ParseKeyHash("sha256:" + strings.ToUpper(strings.TrimPrefix(stored, "sha256:"))); err != nil || upper != h {
		t.Fatalf("upper-case hex: %x, %v", upper, err)
	}
	const noPrefix = "the hash must start with \"sha256:\" (make one with `gateway hash-key`)"
	const notHex = "the hash must be \"sha256:\" followed by 64 hex digits"
	for in, want := range map[string]string{
		strings.TrimPrefix(stored, "sha256:"): noPrefix,
		"md5:abcd":                            noPrefix,
		"sha256:abcd":                         notHex,
		"sha256:" + strings.Repeat("z", 64):   notHex,
		stored + "00":                         notHex,
	} {
		if _, err := ParseKeyHash(in); err == nil || err.Error() != want {
			t.Errorf("ParseKeyHash(%q): %v, want %q", in, err, want)
		}
	}
}
