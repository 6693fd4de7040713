package local

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEngineIsTheLocalBackendsOwn: the sandbox and the web platform are
// how the local backend runs a program, not an API of their own. No Go
// file outside backends/local imports them, tests and every build tag
// included; whoever needs native-fetch settings uses NativeOptions.
func TestEngineIsTheLocalBackendsOwn(t *testing.T) {
	const module = "github.com/supolka/codemode-gateway"
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if mod, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(mod), "module "+module+"\n") {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
	engine := map[string]bool{module + "/backends/local/sandbox": true, module + "/backends/local/webplatform": true}
	own := filepath.Join(root, "backends", "local")
	insideHits := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		inside := strings.HasPrefix(path, own+string(filepath.Separator))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case !engine[p]:
			case inside:
				insideHits++
			default:
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s imports %s, which only backends/local may use", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The check can fail: the walk reads the local backend's own imports
	// of the engine the same way it reads everyone else's.
	if insideHits == 0 {
		t.Fatal("the walk saw no import of the engine even inside backends/local; it would prove nothing")
	}
}
