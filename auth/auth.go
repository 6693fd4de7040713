// Package auth authenticates the callers of the gateway: it takes the bearer
// credential off an HTTP request (the Authorization header, or an offered
// WebSocket subprotocol entry for browsers that cannot set headers) and turns
// it into the tenant it proves, with API keys stored only as hashes and JWTs
// signed with HS256, RS256 or ES256.
//
// Nothing in this package logs, and no error it returns contains the
// credential or a key hash.
package auth

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/supolka/codemode-gateway/internal/bearer"
)

// Identity is who a credential proved the caller to be.
type Identity struct {
	// Tenant is the tenant the credential belongs to.
	Tenant string
	// Method is how it was proved: "api-key" or "jwt".
	Method string
	// Credential names the credential without revealing it: the API key's
	// configured name, or the JWT's subject (else the kid of its key,
	// else its issuer), at most 64 bytes of it. Safe to log.
	Credential string
}

// Authenticator checks one bearer credential.
type Authenticator interface {
	// Authenticate returns the identity token proves, ErrUnrecognized when
	// the token is not of a kind this authenticator checks, or another error
	// when it is of that kind and invalid.
	Authenticate(ctx context.Context, token string) (Identity, error)
}

var (
	// ErrNoCredential: the request carries no bearer credential.
	ErrNoCredential = errors.New("auth: no bearer credential in the Authorization header or the WebSocket subprotocols")
	// ErrUnrecognized: no configured authenticator accepts this kind of
	// credential.
	ErrUnrecognized = errors.New("auth: credential not recognized")
	// ErrInvalid: the credential was recognized and failed a check. The
	// wrapping error says which check, never the credential itself.
	ErrInvalid = errors.New("auth: invalid credential")
)

// SubprotocolPrefix marks the WebSocket subprotocol entry that carries a
// bearer credential for a browser, which cannot set an Authorization header:
//
//	new WebSocket(url, ["codemode.bearer." + token])
//
// API keys and JWTs use only characters a subprotocol token allows. The
// gateway never selects this entry, so the credential is never echoed back.
// The gateway's configuration refuses a route subprotocol with it too,
// which is why it lives in internal/bearer.
const SubprotocolPrefix = bearer.SubprotocolPrefix

// Credential is a bearer credential taken off a request.
type Credential struct {
	Token string
	// FromSubprotocol is true when the token came from an offered
	// Sec-WebSocket-Protocol entry rather than the Authorization header.
	FromSubprotocol bool
}

// FromRequest takes the bearer credential off r: the Authorization header
// first, then an offered subprotocol entry with SubprotocolPrefix. It
// returns ErrNoCredential when there is none and ErrInvalid when the header
// is present but not a well-formed bearer credential, or more than one
// subprotocol entry carries a credential.
func FromRequest(r *http.Request) (Credential, error) {
	if h := r.Header.Values("Authorization"); len(h) > 0 {
		if len(h) > 1 {
			return Credential{}, errors.Join(ErrInvalid, errors.New("more than one Authorization header"))
		}
		scheme, token, ok := strings.Cut(strings.TrimSpace(h[0]), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Credential{}, errors.Join(ErrInvalid, errors.New(`the Authorization header must read "Bearer <credential>"`))
		}
		token = strings.TrimSpace(token)
		if token == "" {
			return Credential{}, errors.Join(ErrInvalid, errors.New("the bearer credential is empty"))
		}
		return Credential{Token: token}, nil
	}
	var found []string
	for _, p := range OfferedSubprotocols(r) {
		if t, ok := strings.CutPrefix(p, SubprotocolPrefix); ok {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		return Credential{}, ErrNoCredential
	case 1:
		if found[0] == "" {
			return Credential{}, errors.Join(ErrInvalid, errors.New("the bearer subprotocol entry is empty"))
		}
		return Credential{Token: found[0], FromSubprotocol: true}, nil
	default:
		return Credential{}, errors.Join(ErrInvalid, errors.New("more than one bearer subprotocol entry"))
	}
}

// OfferedSubprotocols lists the subprotocols a WebSocket upgrade request
// offers, in order, across every Sec-WebSocket-Protocol header line.
func OfferedSubprotocols(r *http.Request) []string {
	var out []string
	for _, line := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(line, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// IsCredentialSubprotocol reports whether an offered subprotocol entry is a
// credential carrier, which must never be selected or echoed back.
func IsCredentialSubprotocol(p string) bool {
	return strings.HasPrefix(p, SubprotocolPrefix)
}

// Chain tries each authenticator in order and returns the first answer that
// is not ErrUnrecognized.
type Chain []Authenticator

// Authenticate implements Authenticator.
func (c Chain) Authenticate(ctx context.Context, token string) (Identity, error) {
	for _, a := range c {
		id, err := a.Authenticate(ctx, token)
		if errors.Is(err, ErrUnrecognized) {
			continue
		}
		return id, err
	}
	return Identity{}, ErrUnrecognized
}
