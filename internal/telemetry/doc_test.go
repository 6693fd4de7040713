package telemetry

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// resourceKeys are attributes of the process, not of a span: the tracing
// table's serviceName row documents them.
var resourceKeys = map[string]bool{"service.name": true, "service.version": true}

// TestTracingDocListsEveryAttribute: the spans table of
// docs/configuration.md, the operator's reference, names every attribute
// key and event the module's code puts on a span, and nothing else.
func TestTracingDocListsEveryAttribute(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(raw), "\n## `tracing`\n")
	if !found {
		t.Fatal("docs/configuration.md has no ## `tracing` section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, table, found := strings.Cut(section, "\n| span | kind | parent | attributes |\n")
	if !found {
		t.Fatal("the tracing section has no spans table")
	}
	key := regexp.MustCompile("`([a-z_]+(?:\\.[a-z0-9_*]+)+)`")
	documented := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 6 {
			break
		}
		for _, m := range key.FindAllStringSubmatch(cells[4], -1) {
			documented[m[1]] = true
		}
	}
	set := codeKeys(t)
	if len(set) < 30 {
		t.Fatalf("found only %d keys in the code: %v", len(set), set)
	}
	listed := func(k string) bool {
		for d := range documented {
			if d == k || strings.HasSuffix(d, "*") && strings.HasPrefix(k, strings.TrimSuffix(d, "*")) {
				return true
			}
		}
		return false
	}
	for k := range set {
		if !listed(k) {
			t.Errorf("a span carries %s, which the spans table of docs/configuration.md does not list", k)
		}
	}
	for d := range documented {
		found := false
		for k := range set {
			found = found || k == d || strings.HasSuffix(d, "*") && strings.HasPrefix(k, strings.TrimSuffix(d, "*"))
		}
		if !found {
			t.Errorf("docs/configuration.md lists %s, which no span carries", d)
		}
	}
}

// codeKeys are the attribute keys the module's Go code names, as
// attribute.Key("…") or attribute.String("…", …) and the like, and the
// event names of this package.
func codeKeys(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{EventWorkerStart: true, EventWorkerKill: true}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "attribute" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if k, err := strconv.Unquote(lit.Value); err == nil && !resourceKeys[k] {
				out[k] = true
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
