package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
)

func TestMain(m *testing.M) {
	local.RunWorkerIfRequested()
	os.Exit(m.Run())
}

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersionAndUsage(t *testing.T) {
	if code, out, _ := runCmd("version"); code != 0 || !strings.Contains(out, "executor protocol 1") {
		t.Fatalf("version: %d %q", code, out)
	}
	if code, _, errOut := runCmd("frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(); code != 2 || !strings.Contains(errOut, "usage: gateway") {
		t.Fatalf("no command: %d %q", code, errOut)
	}
}

func TestHashKey(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := hashKey(nil, strings.NewReader("0123456789abcdefghijklmn\n"), &out, &errOut); code != 0 {
		t.Fatalf("hash-key: %d %s", code, errOut.String())
	}
	// SHA-256 of the key, as sha256sum computes it.
	if got := strings.TrimSpace(out.String()); got != "sha256:d5ea2aa9223ac1fa43ccec70b30962690fcfc6686857f99a0c4b2963cf8bee4b" {
		t.Fatalf("hash-key printed %q", got)
	}
	out.Reset()
	if code := hashKey(nil, strings.NewReader("short"), &out, &errOut); code != 2 {
		t.Fatalf("a short key was hashed: %q", out.String())
	}
	out.Reset()
	if code := hashKey([]string{"--new"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "key:  cmk_") || !strings.Contains(out.String(), "hash: sha256:") {
		t.Fatalf("hash-key --new printed %q", out.String())
	}
}

func TestCheckConfig(t *testing.T) {
	if code, out, errOut := runCmd("check-config", "--config", "../../config.example.yaml"); code != 0 || !strings.Contains(out, ": ok") {
		t.Fatalf("the example config: %d %q %q", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	src, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bad, bytes.Replace(src, []byte("backend: local"), []byte("backend: nowhere"), 1), 0o600)
	code, _, errOut := runCmd("check-config", "--config", bad)
	if code != 1 || !strings.Contains(errOut, `bad.yaml:`) || !strings.Contains(errOut, `no backend is named "nowhere"`) {
		t.Fatalf("a bad config: %d %q", code, errOut)
	}
}

func TestServeRefusesAnOpenExecutorServerWithoutAKey(t *testing.T) {
	code, _, errOut := runCmd("serve", "--executor-server", "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "not a loopback address") {
		t.Fatalf("an unauthenticated public executor server: %d %q", code, errOut)
	}
}
