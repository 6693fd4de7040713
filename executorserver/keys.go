package executorserver

import (
	"fmt"
	"net/http"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/gateway/connlimit"
)

// Keys are the member keys of an executor server's --key-hash flags.
func Keys(hashes []string) (*auth.APIKeys, error) {
	list := make([]auth.APIKey, len(hashes))
	for i, h := range hashes {
		list[i] = auth.APIKey{Name: fmt.Sprintf("key-%d", i+1), Tenant: "executor-server"}
		var err error
		if list[i].Hash, err = auth.ParseKeyHash(h); err != nil {
			return nil, fmt.Errorf("auth: API key %q: %w", list[i].Name, err)
		}
	}
	return auth.NewAPIKeys(list)
}

// unkeyedTenantText answers a caller that names a tenant without a member
// key.
const unkeyedTenantText = "the Codemode-Tenant and Codemode-Tenant-Policy headers are trusted only from a caller presenting a member key (--key-hash): only the gateway may name a tenant"

// RequireKey answers 401 before any upgrade unless the request carries one
// of keys (nil: no credential needed).
func RequireKey(keys *auth.APIKeys, next http.Handler) http.Handler {
	if keys == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			connlimit.Authenticated(r.Context())
			next.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, err := auth.FromRequest(r)
		if err == nil {
			_, err = keys.Authenticate(r.Context(), cred.Token)
		}
		if err != nil {
			text := "a valid bearer credential is required"
			if r.Header.Get(TenantHeader) != "" || r.Header.Get(TenantPolicyHeader) != "" {
				// Only the gateway, with its member key, may say whose
				// session this is.
				text = unkeyedTenantText
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="codemode-executor"`)
			w.Header().Set("Connection", "close") // no idle connection after a refusal
			http.Error(w, text, http.StatusUnauthorized)
			return
		}
		connlimit.Authenticated(r.Context())
		next.ServeHTTP(w, r)
	})
}
