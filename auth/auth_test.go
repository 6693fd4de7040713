package auth

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFromRequest(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string][]string
		want    Credential
		wantErr error
	}{
		{"bearer header", map[string][]string{"Authorization": {"Bearer abc"}}, Credential{Token: "abc"}, nil},
		{"scheme is case-insensitive", map[string][]string{"Authorization": {"bearer  abc "}}, Credential{Token: "abc"}, nil},
		{"basic scheme", map[string][]string{"Authorization": {"Basic abc"}}, Credential{}, ErrInvalid},
		{"empty bearer", map[string][]string{"Authorization": {"Bearer "}}, Credential{}, ErrInvalid},
		{"two headers", map[string][]string{"Authorization": {"Bearer a", "Bearer b"}}, Credential{}, ErrInvalid},
		{"nothing", nil, Credential{}, ErrNoCredential},
		{"subprotocol", map[string][]string{"Sec-Websocket-Protocol": {"capnweb, codemode.bearer.tok"}},
			Credential{Token: "tok", FromSubprotocol: true}, nil},
		{"subprotocol across lines", map[string][]string{"Sec-Websocket-Protocol": {"a", "codemode.bearer.tok"}},
			Credential{Token: "tok", FromSubprotocol: true}, nil},
		{"two subprotocol credentials", map[string][]string{"Sec-Websocket-Protocol": {"codemode.bearer.a, codemode.bearer.b"}},
			Credential{}, ErrInvalid},
		{"empty subprotocol credential", map[string][]string{"Sec-Websocket-Protocol": {"codemode.bearer."}},
			Credential{}, ErrInvalid},
		{"header wins over subprotocol", map[string][]string{
			"Authorization": {"Bearer h"}, "Sec-Websocket-Protocol": {"codemode.bearer.s"}}, Credential{Token: "h"}, nil},
		{"unrelated subprotocols only", map[string][]string{"Sec-Websocket-Protocol": {"capnweb"}}, Credential{}, ErrNoCredential},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/executor", nil)
			for k, vs := range c.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			got, err := FromRequest(r)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "abc") {
				t.Fatalf("error %q leaks the credential", err)
			}
		})
	}
}

func TestIsCredentialSubprotocol(t *testing.T) {
	if !IsCredentialSubprotocol("codemode.bearer.x") || IsCredentialSubprotocol("capnweb") {
		t.Fatal("IsCredentialSubprotocol misclassifies")
	}
}

type fixed struct {
	id  Identity
	err error
}

func (f fixed) Authenticate(context.Context, string) (Identity, error) { return f.id, f.err }

func TestChainSkipsUnrecognized(t *testing.T) {
	want := Identity{Tenant: "t"}
	c := Chain{fixed{err: ErrUnrecognized}, fixed{id: want}, fixed{err: ErrInvalid}}
	got, err := c.Authenticate(context.Background(), "x")
	if err != nil || got != want {
		t.Fatalf("got %+v, %v", got, err)
	}
	_, err = Chain{fixed{err: ErrUnrecognized}, fixed{err: ErrInvalid}}.Authenticate(context.Background(), "x")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ErrInvalid from the second authenticator", err)
	}
	_, err = Chain{fixed{err: ErrUnrecognized}}.Authenticate(context.Background(), "x")
	if !errors.Is(err, ErrUnrecognized) {
		t.Fatalf("err = %v, want ErrUnrecognized", err)
	}
}
