package capnweb

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestKnowsNoApplicationProtocol: of this module's packages capnweb builds
// on jsvalue alone, never on protocol, so it cannot come to know the
// executor contract; what it needs of an application protocol it asks
// through Options.ErrorProps.
func TestKnowsNoApplicationProtocol(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	const module = "github.com/supolka/codemode-gateway/"
	var ours []string
	for _, path := range strings.Fields(string(out)) {
		if strings.HasPrefix(path, module) {
			ours = append(ours, path)
		}
	}
	slices.Sort(ours)
	// capnweb lists itself, so the list cannot come out empty by mistake.
	if want := []string{module + "capnweb", module + "jsvalue"}; !slices.Equal(ours, want) {
		t.Errorf("capnweb builds on %v of this module, want %v", ours, want)
	}
}
