package protocol

import (
	"go/build"
	"testing"
)

const jsvaluePath = "github.com/supolka/codemode-gateway/jsvalue"

// TestBuildsOnTheStandardLibraryAndJSValue: protocol must build on nothing
// beyond the standard library and jsvalue, which itself builds on the
// standard library alone, so that any Go program can implement or call an
// executor from the two. The standard library imports only itself, so
// checking the two packages' own imports is enough.
func TestBuildsOnTheStandardLibraryAndJSValue(t *testing.T) {
	for _, c := range []struct {
		dir     string
		allowed string // the one package outside the standard library it may import
	}{{".", jsvaluePath}, {"../jsvalue", ""}} {
		pkg, err := build.ImportDir(c.dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkg.Imports) == 0 {
			t.Fatalf("%s: no imports found; the check would prove nothing", c.dir)
		}
		for _, path := range pkg.Imports {
			if path != c.allowed && !isStandard(path) {
				t.Errorf("%s imports %s, which is not in the standard library", c.dir, path)
			}
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
