package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func mustHash(t testing.TB, key string) string {
	t.Helper()
	h, err := HashAPIKey(key)
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
		"no prefix":      {{Name: "n", Tenant: "t", Hash: strings.TrimPrefix(good, "sha256:")}},
		"short hex":      {{Name: "n", Tenant: "t", Hash: "sha256:abcd"}},
		"not hex":        {{Name: "n", Tenant: "t", Hash: "sha256:" + strings.Repeat("z", 64)}},
		"duplicate hash": {{Name: "a", Tenant: "t", Hash: good}, {Name: "b", Tenant: "u", Hash: good}},
	}
	for name, keys := range cases {
		if _, err := NewAPIKeys(keys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
