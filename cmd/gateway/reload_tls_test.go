package main

import (
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
)

// An admin listener with a certificate the system does not trust is
// reloaded with --ca naming it, and refused without.
func TestReloadTrustsTheCertificateGivenWithCA(t *testing.T) {
	cfg, err := config.Load("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{ConfigPath: "../../config.example.yaml", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv := httptest.NewUnstartedServer(gw.AdminHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "admin.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := runCmd("reload", "--admin", srv.URL, "--ca", ca); code != 0 || out != "reloaded\n" {
		t.Fatalf("reload --ca: %d %q %q", code, out, errOut)
	}
	code, _, errOut := runCmd("reload", "--admin", srv.URL)
	if code != 1 || !strings.HasPrefix(errOut, "gateway reload: Post ") || !strings.Contains(errOut, "certificate signed by unknown authority") {
		t.Fatalf("reload without --ca: %d %q", code, errOut)
	}
	notPEM := filepath.Join(dir, "empty.pem")
	os.WriteFile(notPEM, []byte("no certificate here\n"), 0o600)
	if code, _, errOut := runCmd("reload", "--admin", srv.URL, "--ca", notPEM); code != 2 || errOut != "gateway reload: --ca: "+notPEM+" holds no PEM certificate\n" {
		t.Fatalf("reload --ca of a file without a certificate: %d %q", code, errOut)
	}
}
