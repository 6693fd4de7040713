package sandbox

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
	"github.com/evanw/esbuild/pkg/api"
)

// compiled is a source turned into something goja runs: a program whose
// value is a wrapper function, and the names its static imports request.
// A source that fails to compile is cached too, as its error text.
type compiled struct {
	program *goja.Program
	imports []string
	err     string
}

// compileCacheBytes bounds the source bytes behind the compiled sources a
// process keeps, least recently used out first. Module-map entries repeat
// across runs, and a compiled goja Program is immutable and safe to share
// between runtimes; the bound is on bytes, not entries, so a stream of large
// distinct programs cannot grow a worker's heap without limit.
const compileCacheBytes = 8 << 20

var compileCache = newWeightedCache(compileCacheBytes)

// weightedCache is an LRU cache bounded by the summed weight of its values.
type weightedCache struct {
	mu     sync.Mutex
	budget int
	used   int
	order  *list.List // of *cacheEntry, most recent first
	items  map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key    [sha256.Size]byte
	value  *compiled
	weight int
}

func newWeightedCache(budget int) *weightedCache {
	return &weightedCache{budget: budget, order: list.New(), items: map[[sha256.Size]byte]*list.Element{}}
}

func (c *weightedCache) Get(k [sha256.Size]byte) (*compiled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).value, true
	}
	return nil, false
}

// Add keeps v at weight w (its source length), evicting the least recently
// used entries to stay inside the budget. A value heavier than a quarter of
// the budget is not kept.
func (c *weightedCache) Add(k [sha256.Size]byte, v *compiled, w int) {
	w += 256 // the entry itself, so empty sources still count
	if w > c.budget/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, value: v, weight: w})
	c.used += w
	for c.used > c.budget {
		last := c.order.Back()
		e := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.items, e.key)
		c.used -= e.weight
	}
}

func cacheKey(parts ...string) [sha256.Size]byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(strconv.Itoa(len(p))))
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// entryParams are the parameters of the entry module's wrapper: the
// CommonJS trio esbuild's output refers to, then the contract's entry-scope
// names in the order bootstrap.js passes them.
const entryParams = "exports, require, module, " + scopeParams

// directParams is entryParams for an entry goja compiles without esbuild:
// nothing there refers to require or module, so those stay out of the scope
// under names the reserved "__" prefix keeps free.
const directParams = "__exports, __require, __module, " + scopeParams

const scopeParams = "__dispatch, __stringifyForDispatch, __parseForDispatch, __BINARY_TAG, " +
	"__encodeBinaryValue, __decodeBinaryValue, __encodeBase64, __decodeBase64"

// moduleParams are the parameters of a module-map entry's wrapper.
const moduleParams = "exports, require, module"

// compileEntry compiles the generated entry module. An entry without import
// lines is tried with goja alone first, which costs a fraction of a
// millisecond; one with imports, or one goja cannot parse (import(), for
// await, async generators), goes through esbuild, which turns the module into
// CommonJS and lowers what goja lacks. A syntax error is reported as esbuild
// words it, with its location in the generated module.
func compileEntry(e entryModule) *compiled {
	key := cacheKey("entry", e.esm)
	if c, ok := compileCache.Get(key); ok {
		return c
	}
	var c *compiled
	if !e.hasImports {
		if prg, err := parseAndCompile(entryFile, e.direct, true); err == nil {
			c = &compiled{program: prg}
		}
	}
	if c == nil {
		c = compileESM(entryFile, e.esm, entryParams)
	}
	compileCache.Add(key, c, len(e.esm))
	return c
}

// compileModule compiles one js or cjs entry of the module map.
func compileModule(name string, kind string, src string) *compiled {
	key := cacheKey(kind, name, src)
	if c, ok := compileCache.Get(key); ok {
		return c
	}
	var c *compiled
	if kind == "cjs" {
		// CommonJS is sloppy-mode script code, run as Node wraps it.
		prg, err := parseAndCompile(name, "(function ("+moduleParams+") {"+src+"\n})", false)
		if err != nil {
			c = &compiled{err: err.Error()}
		} else {
			c = &compiled{program: prg}
		}
	} else {
		c = compileESM(name, src, moduleParams)
	}
	compileCache.Add(key, c, len(src))
	return c
}

// compileESM turns an ES module into a CommonJS wrapper function with
// esbuild, recording its static imports. Every import is left external:
// the sandbox's require resolves them against the module map at run time,
// so esbuild never reads a file.
func compileESM(name, src, params string) *compiled {
	var imports []string
	res := api.Build(api.BuildOptions{
		Stdin:    &api.StdinOptions{Contents: src, Sourcefile: name, Loader: api.LoaderJS},
		Bundle:   true,
		Write:    false,
		Format:   api.FormatCommonJS,
		Platform: api.PlatformNeutral,
		Target:   api.ESNext,
		Charset:  api.CharsetUTF8,
		LogLevel: api.LogLevelSilent,
		// goja lacks these; esbuild lowers them. A lowered import() becomes
		// a require inside a promise job, so a missing name rejects it.
		Supported: map[string]bool{"dynamic-import": false, "for-await": false, "async-generator": false},
		Plugins: []api.Plugin{{Name: "module-map", Setup: func(b api.PluginBuild) {
			b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
				if a.Kind == api.ResolveJSImportStatement {
					imports = append(imports, a.Path)
				}
				return api.OnResolveResult{Path: a.Path, External: true}, nil
			})
		}}},
	})
	if len(res.Errors) > 0 {
		return &compiled{err: esbuildErrorText(name, res.Errors[0])}
	}
	if len(res.OutputFiles) != 1 {
		return &compiled{err: "The module " + strconv.Quote(name) + " produced no code."}
	}
	prg, err := parseAndCompile(name, "(function ("+params+") {"+string(res.OutputFiles[0].Contents)+"\n})", true)
	if err != nil {
		return &compiled{err: err.Error()}
	}
	return &compiled{program: prg, imports: imports}
}

// syntaxError is a source that does not compile, worded for the envelope.
type syntaxError struct{ text string }

func (e *syntaxError) Error() string { return e.text }

// parseSource parses src, named name, as a script with source maps
// disabled: goja would otherwise read any file a sourceMappingURL comment
// names. Every parse of the sandbox's goes through it.
func parseSource(name, src string) (*ast.Program, error) {
	return parser.ParseFile(nil, name, src, 0, parser.WithDisableSourceMaps)
}

// parseAndCompile parses src (parseSource), splits its large
// templates (splitTemplates), routes its direct evals' source through the
// hook that splits theirs (routeDirectEvals) and compiles it.
func parseAndCompile(name, src string, strict bool) (*goja.Program, error) {
	ast, err := parseSource(name, src)
	if err != nil {
		var list parser.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			e := list[0]
			return nil, &syntaxError{text: gojaMessage(e.Message) + " [" + name + ":" +
				strconv.Itoa(e.Position.Line) + ":" + strconv.Itoa(e.Position.Column) + "]"}
		}
		return nil, &syntaxError{text: err.Error()}
	}
	splitTemplates(ast, src)
	routeDirectEvals(ast, src)
	prg, err := goja.CompileAST(ast, strict)
	if err != nil {
		var ce *goja.CompilerSyntaxError
		if errors.As(err, &ce) {
			text := ce.Message
			if ce.File != nil {
				p := ce.File.Position(ce.Offset)
				text += " [" + name + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column) + "]"
			}
			return nil, &syntaxError{text: text}
		}
		return nil, &syntaxError{text: err.Error()}
	}
	return prg, nil
}

var gojaToken = regexp.MustCompile(`^Unexpected token ([^\sA-Za-z0-9_$]+)$`)

// gojaMessage quotes the bare token goja names, as V8 does.
func gojaMessage(m string) string {
	if g := gojaToken.FindStringSubmatch(m); g != nil {
		return "Unexpected token '" + g[1] + "'"
	}
	return m
}

// esbuildUnexpected matches the esbuild messages V8 words as "Unexpected
// token": an unexpected token, and the "=>" esbuild expects after an empty
// "()" that V8 reports as an unexpected ")".
var esbuildUnexpected = regexp.MustCompile(`^(?:Unexpected|Expected "=>" but found) "(.*)"$`)

// esbuildErrorText words an esbuild error for the envelope: its message,
// with `Unexpected ")"` read the way V8 writes it (Unexpected token ')'),
// and its location as
// [file:line:column], the column counted from 1.
func esbuildErrorText(name string, m api.Message) string {
	text := m.Text
	if g := esbuildUnexpected.FindStringSubmatch(text); g != nil {
		text = "Unexpected token '" + g[1] + "'"
	}
	if m.Location != nil {
		file := m.Location.File
		if file == "" {
			file = name
		}
		text += " [" + file + ":" + strconv.Itoa(m.Location.Line) + ":" + strconv.Itoa(m.Location.Column+1) + "]"
	}
	return strings.TrimSpace(text)
}
