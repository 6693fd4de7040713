package protocol

import (
	"go/build"
	"testing"
)

// TestImportsOnlyTheStandardLibrary: protocol must build on nothing beyond
// the standard library. The standard library imports only itself, so
// checking the package's own imports is enough.
func TestImportsOnlyTheStandardLibrary(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.Imports) == 0 {
		t.Fatal("no imports found; the check would prove nothing")
	}
	for _, path := range pkg.Imports {
		if !isStandard(path) {
			t.Errorf("protocol imports %s, which is not in the standard library", path)
		}
	}
	// The check can fail: a module dependency is not standard.
	if isStandard("github.com/go-chi/chi/v5") {
		t.Error("the check calls chi standard")
	}
}

func isStandard(path string) bool {
	dep, err := build.Import(path, ".", build.FindOnly)
	return err == nil && dep.Goroot
}
