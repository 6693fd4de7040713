package executorserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/supolka/codemode-gateway/auth"
)

// Only a caller presenting a member key may name a tenant: one that names
// a tenant without it is refused before any upgrade, told why, and the
// key alone lets the tenant through.
func TestExecutorServerTrustsTheTenantHeaderOnlyWithAMemberKey(t *testing.T) {
	const key = "a-member-key-for-this-test-0123456789"
	hash, err := auth.HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := Keys([]string{hash})
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	h := RequireKey(keys, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Get(TenantHeader) }))
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
			req.Header.Set(TenantHeader, c.tenant)
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
