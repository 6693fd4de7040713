package config

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportsNoAuth: the configuration is plain data, checked up front;
// the authenticator is built from it, and what only its code can check is
// checked, by the gateway (a Check). So config builds on no part of auth,
// nor on the JWT library auth uses.
func TestImportsNoAuth(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/supolka/codemode-gateway/"
	deps := strings.Fields(string(out))
	// config lists itself, so the list cannot come out empty by mistake.
	if !slices.Contains(deps, module+"gateway/config") {
		t.Fatalf("go list -deps . does not list the configuration: %v", deps)
	}
	for _, path := range deps {
		for _, forbidden := range []string{module + "auth", "github.com/golang-jwt/jwt"} {
			if path == forbidden || strings.HasPrefix(path, forbidden+"/") {
				t.Errorf("gateway/config builds on %s", path)
			}
		}
	}
}
