package gateway

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportsNoBackend: the gateway runs its groups through the members
// the kinds it is given make (Options.Kinds, registered by cmd/gateway),
// so it builds on neither backend, nor on the executor server.
func TestImportsNoBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/supolka/codemode-gateway/"
	deps := strings.Fields(string(out))
	// gateway lists itself, so the list cannot come out empty by mistake.
	if !slices.Contains(deps, module+"gateway") {
		t.Fatalf("go list -deps . does not list the gateway: %v", deps)
	}
	for _, path := range deps {
		for _, backend := range []string{"backends/local", "backends/remote", "executorserver"} {
			if path == module+backend || strings.HasPrefix(path, module+backend+"/") {
				t.Errorf("gateway builds on %s", path)
			}
		}
	}
}
