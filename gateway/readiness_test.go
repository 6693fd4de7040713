package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

func noEnv(string) string { return "" }

// serveConfig runs a gateway of the configuration text src, logging into
// logs (nil: nowhere), and returns it with its HTTP and admin servers,
// all closed when the test ends.
func serveConfig(t *testing.T, src string, logs io.Writer) (gw *gateway.Gateway, hs, admin *httptest.Server) {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	cfg, err := config.Parse("test.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	gw, err = gateway.New(cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	hs = httptest.NewServer(gw.Handler())
	admin = httptest.NewServer(gw.AdminHandler())
	t.Cleanup(func() { hs.Close(); admin.Close(); gw.Close() })
	return gw, hs, admin
}

// deadURL is a ws:// address on loopback where nothing listens.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "ws://" + addr + "/"
}

// A replica whose remote group is down still serves the tenants of its
// local group, and stays ready, unless that group's readiness is required.
func TestReadinessFollowsTheGroupsThatCanServe(t *testing.T) {
	key := auth.NewAPIKey()
	hash, _ := auth.HashAPIKey(key)
	far := deadURL(t)
	for _, c := range []struct {
		name, localReadiness, farReadiness string
		code                               int
		body                               string
	}{
		{"defaults", "", "", 200, "ready\n"},
		{"remote optional", "", "readiness: optional", 200, "ready\n"},
		{"remote required", "readiness: required", "readiness: required", 503, "backend far has no healthy member, and its readiness is required\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: local
    type: local
    %s
    local: {maxWorkers: 1}
  - name: far
    type: remote
    %s
    remote:
      members: [{url: %q}]
      dialTimeout: 1s
tenants:
  - {name: acme, backend: local, keys: [{name: k, hash: %s}]}
  - {name: globex, backend: far, keys: [{name: g, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]}
routes:
  - {path: /v1/executor, kind: executor}
`, c.localReadiness, c.farReadiness, far, hash)
			_, hs, admin := serveConfig(t, src, nil)
			if code, body := testutil.Get(t, admin.URL+"/readyz"); code != c.code || body != c.body {
				t.Fatalf("/readyz: %d %q, want %d %q", code, body, c.code, c.body)
			}
			ex, err := remote.Dial(testCtx(t), wsURL(hs.URL)+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}})
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close()
			res, err := ex.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 6 * 7"})
			if err != nil || res.ResultJSON != "42" {
				t.Fatalf("the local tenant's execution: %v %+v", err, res)
			}
		})
	}
}

// Only a group that can serve makes a replica ready: with every group
// down it is not, whatever their readiness says.
func TestReadinessNeedsOneGroupThatCanServe(t *testing.T) {
	src := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: far
    type: remote
    remote: {members: [{url: %q}], dialTimeout: 1s}
tenants:
  - {name: globex, backend: far, keys: [{name: g, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]}
routes:
  - {path: /v1/executor, kind: executor}
`, deadURL(t))
	_, _, admin := serveConfig(t, src, nil)
	if code, body := testutil.Get(t, admin.URL+"/readyz"); code != 503 || body != "no backend group has a healthy member\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
}
