package gateway

import (
	"errors"
	"fmt"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/gateway/config"
)

// CheckCredentials is the config.Check of the tenants' credentials: it
// builds the authenticator of them, as the gateway does to serve them, and
// reports each problem of the jwt section at its key (a public key that is
// not one, a JWKS file that holds none, a short secret). Whatever loads a
// file the gateway serves (gateway serve, check-config, a reload) passes
// it to config.Load, so they refuse the same files.
func CheckCredentials(c *config.Config, report func(path, msg string)) {
	authenticator(c.Credentials, report)
}

// buildAuthenticator is the authenticator of c; a configuration that
// config.Load returned with CheckCredentials has none of the problems its
// error lists.
func buildAuthenticator(c config.Credentials) (auth.Authenticator, error) {
	var problems []error
	report := func(path, msg string) {
		problems = append(problems, fmt.Errorf("%s: %s", path, msg))
	}
	if c.JWT != nil && c.JWT.Unavailable() {
		// Validation refuses this at the variable or the file; serving
		// without that source's keys would refuse its tokens unsaid.
		report("jwt", "a key source it names was not read: its variable is not set, or its file cannot be read")
	}
	a := authenticator(c, report)
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	return a, nil
}

// authenticator checks the tenants' credentials: their API keys and, with
// a jwt section, JWTs. It reports each problem with report, at its key
// path, and returns nil when there is one.
func authenticator(c config.Credentials, report func(path, msg string)) auth.Authenticator {
	keys := make([]auth.APIKey, len(c.Keys))
	for i, k := range c.Keys {
		keys[i] = auth.APIKey{Name: k.Name, Tenant: k.Tenant, Hash: k.Hash}
	}
	apiKeys, err := auth.NewAPIKeys(keys)
	if err != nil {
		// Validation refuses an unnamed key and a hash given twice, each
		// at its own key, before they get here.
		report("tenants", err.Error())
		return nil
	}
	if c.JWT == nil {
		return auth.Chain{apiKeys}
	}
	jwt := jwtVerifier(c.JWT, report)
	if jwt == nil {
		return nil
	}
	return auth.Chain{apiKeys, jwt}
}

// jwtVerifier builds the verifier of the jwt section, reporting each of
// its problems at the key it is about; nil when there is one. A source
// validation could not read is left out, and not said again.
func jwtVerifier(j *config.JWTSettings, report func(path, msg string)) *auth.JWTVerifier {
	cfg := auth.JWTConfig{Issuer: j.Issuer, Audience: j.Audience, TenantClaim: j.TenantClaim, HMACSecret: j.HMACSecret, PublicKeysPEM: j.PublicKeys, Leeway: j.Leeway}
	if j.JWKS != nil {
		// The bytes validation read; the path only names them.
		cfg.JWKSFile, cfg.JWKS = j.JWKSFile, j.JWKS
	}
	v, err := auth.NewJWTVerifier(cfg)
	if err == nil {
		return v
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		if j.Unavailable() && errors.Is(e, auth.ErrNoJWTKey) {
			continue // the unset variable or unread file, said by validation, is the missing key
		}
		var ce *auth.JWTConfigError
		if !errors.As(e, &ce) {
			report("jwt", e.Error())
			continue
		}
		switch ce.Field {
		case "HMACSecret":
			report("jwt.hmacSecretEnv", fmt.Sprintf("environment variable %s: %v", j.HMACSecretEnv, ce.Err))
		case "PublicKeysPEM":
			report(fmt.Sprintf("jwt.publicKeys[%d]", ce.Index), ce.Err.Error())
		case "JWKSFile":
			report("jwt.jwksFile", ce.Err.Error())
		default:
			report("jwt", ce.Err.Error())
		}
	}
	return nil
}
