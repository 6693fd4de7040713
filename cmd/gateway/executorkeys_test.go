package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/gateway"
)

// A malformed --key-hash stops the executor server before it starts
// anything, naming the flag's place and what a hash looks like.
func TestExecutorServerRefusesAMalformedKeyHash(t *testing.T) {
	const good = "sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb"
	for hash, want := range map[string]string{
		"sha256:abcd": "gateway serve: auth: API key \"key-2\": the hash must be \"sha256:\" followed by 64 hex digits\n",
		"md5:abcd":    "gateway serve: auth: API key \"key-2\": the hash must start with \"sha256:\" (make one with `gateway hash-key`)\n",
	} {
		code, _, errOut := runCmd("serve", "--executor-server", "--listen", "127.0.0.1:0", "--key-hash", good, "--key-hash", hash)
		if code != 2 || errOut != want {
			t.Errorf("--key-hash %s: %d %q, want 2 %q", hash, code, errOut, want)
		}
	}
	code, _, errOut := runCmd("serve", "--executor-server", "--listen", "127.0.0.1:0", "--key-hash", good, "--key-hash", good)
	if want := "gateway serve: auth: API keys \"key-1\" and \"key-2\" have the same hash\n"; code != 2 || errOut != want {
		t.Errorf("the same --key-hash twice: %d %q, want 2 %q", code, errOut, want)
	}
}

// Only a caller presenting a member key may name a tenant: one that names
// a tenant without it is refused before any upgrade, told why, and the
// key alone lets the tenant through.
func TestExecutorServerTrustsTheTenantHeaderOnlyWithAMemberKey(t *testing.T) {
	const key = "a-member-key-for-this-test-0123456789"
	hash, err := auth.HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := executorKeys([]string{hash})
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	h := requireKey(keys, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Get(gateway.TenantHeader) }))
	for _, c := range []struct {
		auth, tenant string
		code         int
		body         string
	}{
		{"", "alpha", 401, unkeyedTenantText + "\n"},
		{"Bearer not-the-key", "alpha", 401, unkeyedTenantText + "\n"},
		{"", "", 401, "a valid bearer credential is required\n"},
		{"Bearer " + key, "alpha", 200, ""},
	} {
		seen = ""
		req := httptest.NewRequest("GET", "/", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.tenant != "" {
			req.Header.Set(gateway.TenantHeader, c.tenant)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != c.code || rec.Body.String() != c.body {
			t.Errorf("auth %q tenant %q: %d %q, want %d %q", c.auth, c.tenant, rec.Code, rec.Body.String(), c.code, c.body)
		}
		if want := map[bool]string{true: c.tenant}[c.code == 200]; seen != want {
			t.Errorf("auth %q: the handler saw tenant %q, want %q", c.auth, seen, want)
		}
	}
}
