package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// badJWT is a jwt section whose public key only the authenticator's code
// can refuse, at the line of the key: the fourth line of the section.
const badJWT = "jwt:\n  issuer: i\n  audience: a\n  publicKeys: [\"not a key\"]\n"

// check-config refuses what the gateway would refuse to build its
// authenticator from, at the line and key, as it refuses the rest.
func TestCheckConfigChecksTheCredentials(t *testing.T) {
	example, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, append(example, badJWT...), 0o600)
	want := fmt.Sprintf("%s:%d: jwt.publicKeys[0]: not a PEM-encoded RSA or P-256 EC public key\n", bad, bytes.Count(example, []byte("\n"))+4)
	if code, out, errOut := runCmd("check-config", "--config", bad); code != 1 || out != "" || errOut != want {
		t.Fatalf("check-config of a bad public key: %d %q\n%q\nwant\n%q", code, out, errOut, want)
	}
}

// A reload refuses such a file too, and says the running configuration
// stays.
func TestReloadChecksTheCredentials(t *testing.T) {
	path, _, withAdmin := serveExampleAdmin(t, func(p string) string { return "listen: 127.0.0.1:" + p })
	os.WriteFile(path, append(withAdmin, badJWT...), 0o600)
	want := fmt.Sprintf("gateway reload: refused; the running configuration stays:\n%s:%d: jwt.publicKeys[0]: not a PEM-encoded RSA or P-256 EC public key\n",
		path, bytes.Count(withAdmin, []byte("\n"))+4)
	if code, _, errOut := runCmd("reload", "--config", path); code != 1 || errOut != want {
		t.Fatalf("reload of a bad public key: %d\n%q\nwant\n%q", code, errOut, want)
	}
}
