package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/printer"
)

// The file is read in two steps: the YAML library parses it into nodes,
// and decoder walks the nodes against the Go types, so that every problem
// is found in one pass and said in the file's own words: the key path as
// the file writes it (backends[1].remote.members[0].url), the line, and
// what the key takes, never a Go type.

// maxAliasUses bounds how many times aliases are expanded in one file,
// and maxVisits how many values the decoder visits, so that a document of
// nested aliases cannot make it do exponential work. No configuration
// needs anywhere near maxVisits values (ten thousand tenants take about a
// hundred thousand).
const (
	maxAliasUses = 10000
	maxVisits    = 250_000
)

type decoder struct {
	file     string
	problems Problems
	anchors  map[string]ast.Node
	aliases  int
	visits   int
	// active are the anchors being expanded, to refuse an alias inside
	// its own anchor.
	active map[string]bool
	// lines are the lines of the key paths decoded, for validation's
	// problems.
	lines map[string]int
}

// decodeFile fills v (a pointer to a struct) from data and returns every
// problem found, and the line of every key path it decoded. A syntax error
// or a document past maxVisits stops the reading (stopped is true): what v
// holds is then not worth validating.
func decodeFile(file string, data []byte, v any) (problems Problems, lines map[string]int, stopped bool) {
	f, err := parseYAML(data)
	if err != nil {
		return Problems{syntaxProblem(file, data, err)}, nil, true
	}
	d := &decoder{file: file, anchors: map[string]ast.Node{}, active: map[string]bool{}, lines: map[string]int{}}
	if f == nil || len(f.Docs) == 0 || f.Docs[0] == nil || f.Docs[0].Body == nil {
		return nil, d.lines, false
	}
	defer func() {
		// The library's nodes have held surprises (nil where a node was
		// expected); a document that brings one is refused, never a crash.
		if r := recover(); r != nil {
			problems = append(d.problems, &Problem{File: file, Msg: fmt.Sprintf("the YAML library could not read this document (%v); check its indentation and tags", r)})
			lines, stopped = d.lines, true
		}
	}()
	if len(f.Docs) > 1 {
		d.add(f.Docs[1], "", "the file holds more than one YAML document (a second ---); the configuration is one document")
	}
	// Anchors may sit under keys the decoder never walks (a block of
	// defaults): find them all first.
	for _, n := range ast.Filter(ast.AnchorType, f.Docs[0]) {
		a := n.(*ast.AnchorNode)
		d.anchors[a.Name.GetToken().Value] = a.Value
	}
	d.value(f.Docs[0].Body, reflect.ValueOf(v).Elem(), "")
	return d.problems, d.lines, d.visits >= maxVisits
}

// parseYAML runs the YAML parser. It has panicked on some malformed
// documents (found by fuzzing); that becomes an error, never a crash of
// `gateway serve` or a reload.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser could not read this document (%v); check its indentation and tags", r)
		}
	}()
	// Duplicate keys are the decoder's to report, with the others.
	return parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
}

// syntaxProblem places a parse error at its line, with the lines around
// it, once.
func syntaxProblem(file string, data []byte, err error) *Problem {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil {
		return &Problem{File: file, Msg: err.Error()}
	}
	var pp printer.Printer
	tok := ye.GetToken()
	msg := ye.GetMessage()
	if v := bracketedIPv6(sourceLine(data, tok.Position.Line)); v != "" {
		msg += fmt.Sprintf("; YAML reads [ and ] outside quotes as a list, so quote a value that holds an IPv6 address: %q", v)
	}
	return &Problem{File: file, Line: tok.Position.Line, Msg: msg + "\n" + strings.TrimRight(pp.PrintErrorToken(tok, false), "\n ")}
}

// unquotedIPv6 finds an IPv6 address in brackets, with the scheme or the
// port around it (ws://[::1]:8787/, [::1]:8080), not preceded by a quote.
var unquotedIPv6 = regexp.MustCompile(`(?:^|[^"'\w/:])((?:[a-z][a-z0-9+.-]*://)?\[[0-9A-Fa-f:.%]*:[0-9A-Fa-f:.%]*\](?::[0-9]+)?[^\s,\]}'"#]*)`)

// bracketedIPv6 is the first unquoted IPv6 address in brackets on line,
// with what belongs to it, or "".
func bracketedIPv6(line string) string {
	m := unquotedIPv6.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

// sourceLine is line n (from 1) of data, or "".
func sourceLine(data []byte, n int) string {
	for i := 1; len(data) > 0; i++ {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		if i == n {
			return string(line)
		}
		data = rest
	}
	return ""
}

func (d *decoder) add(n ast.Node, path, format string, args ...any) {
	d.problems = append(d.problems, &Problem{File: d.file, Line: lineOfAST(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func lineOfAST(n ast.Node) int {
	if n == nil || n.GetToken() == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// resolve strips tags, records anchors and follows aliases, so that what
// remains is a value node (or nil for an absent value).
func (d *decoder) resolve(n ast.Node, path string) (ast.Node, func()) {
	done := func() {}
	for {
		switch t := n.(type) {
		case *ast.TagNode:
			n = t.Value
		case *ast.AnchorNode:
			n = t.Value
		case *ast.AliasNode:
			name := t.Value.GetToken().Value
			target, ok := d.anchors[name]
			switch {
			case !ok:
				d.add(t, path, "alias *%s names no anchor", name)
				return nil, done
			case d.active[name]:
				d.add(t, path, "alias *%s is inside its own anchor", name)
				return nil, done
			case d.aliases >= maxAliasUses:
				d.add(t, path, "aliases are expanded more than %d times; write the values out", maxAliasUses)
				return nil, done
			}
			d.aliases++
			d.active[name] = true
			prev := done
			done = func() { delete(d.active, name); prev() }
			n = target
		case *ast.NullNode:
			return nil, done
		default:
			return n, done
		}
	}
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// value decodes n into v, which is addressable; path is n's key path.
func (d *decoder) value(n ast.Node, v reflect.Value, path string) {
	if d.visits++; d.visits == maxVisits {
		d.add(n, path, "the file expands to more than %d values (through aliases); write the values out", maxVisits)
	}
	if d.visits >= maxVisits {
		return
	}
	// A problem of this value is placed where the file wrote it: at an
	// alias, not at its anchor.
	at := n
	if _, ok := d.lines[path]; !ok {
		d.lines[path] = lineOfAST(at)
	}
	n, done := d.resolve(n, path)
	defer done()
	if n == nil {
		return // absent or null: the zero value, which takes the default
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, v.Elem(), path)
		return
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		d.text(at, n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(at, n, v, path)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.mismatch(at, n, v.Type(), path)
			return
		}
		out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, e := range seq.Values {
			d.value(e, out.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(out)
	case reflect.String:
		s, ok := scalar(n)
		if !ok {
			d.mismatch(at, n, v.Type(), path)
			return
		}
		v.SetString(s)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.mismatch(at, n, v.Type(), path)
			return
		}
		v.SetBool(b.Value)
	case reflect.Int, reflect.Int64:
		d.integer(at, n, v, path)
	case reflect.Float64:
		switch t := n.(type) {
		case *ast.IntegerNode:
			f, _ := strconv.ParseFloat(t.GetToken().Value, 64)
			v.SetFloat(f)
		case *ast.FloatNode:
			v.SetFloat(t.Value)
		case *ast.InfinityNode:
			v.SetFloat(t.Value)
		case *ast.NanNode:
			v.SetFloat(math.NaN())
		default:
			d.mismatch(at, n, v.Type(), path)
		}
	default:
		panic("config: no decoding for " + v.Type().String())
	}
}

func (d *decoder) integer(at, n ast.Node, v reflect.Value, path string) {
	var i int64
	switch t := n.(type) {
	case *ast.IntegerNode:
		switch x := t.Value.(type) {
		case int64:
			i = x
		case uint64:
			if x > math.MaxInt64 {
				d.add(at, path, "%s is out of range", t.GetToken().Value)
				return
			}
			i = int64(x)
		}
	case *ast.FloatNode:
		if t.Value != math.Trunc(t.Value) || math.Abs(t.Value) >= 1<<63 {
			d.mismatch(at, n, v.Type(), path)
			return
		}
		i = int64(t.Value)
	case *ast.StringNode:
		// The YAML library reads a number past 64 bits as a string.
		if _, err := strconv.ParseInt(t.Value, 10, 64); errors.Is(err, strconv.ErrRange) {
			d.add(at, path, "%s is out of range", t.Value)
			return
		}
		d.mismatch(at, n, v.Type(), path)
		return
	default:
		d.mismatch(at, n, v.Type(), path)
		return
	}
	if v.OverflowInt(i) {
		d.add(at, path, "%d is out of range", i)
		return
	}
	v.SetInt(i)
}

// text decodes a scalar through the type's UnmarshalText (a Duration).
func (d *decoder) text(at, n ast.Node, v reflect.Value, path string) {
	s, ok := scalar(n)
	if !ok {
		d.mismatch(at, n, v.Type(), path)
		return
	}
	if _, isInt := n.(*ast.IntegerNode); isInt && v.Type() == reflect.TypeFor[Duration]() {
		if s == "0" {
			return
		}
		d.add(at, path, "%s has no unit: write a duration such as %ss or %sms", s, s, s)
		return
	}
	if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		d.add(at, path, "%q is not %s", s, want(v.Type()))
	}
}

// mapping decodes a map node into the struct v, key by key.
func (d *decoder) mapping(at, n ast.Node, v reflect.Value, path string) {
	var entries []*ast.MappingValueNode
	switch t := n.(type) {
	case *ast.MappingNode:
		entries = t.Values
	case *ast.MappingValueNode: // a map of one key
		entries = []*ast.MappingValueNode{t}
	default:
		d.mismatch(at, n, v.Type(), path)
		return
	}
	keys := keysOf(v.Type())
	seen := map[string]bool{}
	for _, e := range entries {
		if _, merge := e.Key.(*ast.MergeKeyNode); merge {
			// << merges a map (an alias of one, usually) into this one;
			// the keys written here may override it.
			d.value(e.Value, v, path)
			continue
		}
		key := keyText(e.Key)
		kp := join(path, key)
		if seen[key] {
			d.add(e.Key, kp, "is set twice in this map; keep one")
			continue
		}
		seen[key] = true
		d.lines[kp] = lineOfAST(e.Key)
		i, ok := keys.index[key]
		if !ok {
			if home := homeOf(key, v.Type()); home != "" {
				d.add(e.Key, kp, "unknown key here; it belongs under %s, as %s", home, join(join(path, home), key))
			} else {
				d.add(e.Key, kp, "%s", unknownKey(key, keys.names))
			}
			continue
		}
		d.value(e.Value, v.Field(i), kp)
	}
}

func keyText(k ast.MapKeyNode) string {
	n := ast.Node(k)
	if mk, ok := k.(*ast.MappingKeyNode); ok {
		n = mk.Value
	}
	if s, ok := scalar(n); ok {
		return s
	}
	return n.String()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// structKeys are the keys a struct takes, by their yaml tags.
type structKeys struct {
	index map[string]int
	names []string // in declaration order
}

func keysOf(t reflect.Type) structKeys {
	k := structKeys{index: map[string]int{}}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		k.index[name] = i
		k.names = append(k.names, name)
	}
	return k
}

// homeOf is the key of the struct t whose own map takes key: where a key
// written one level too far out belongs. "" when no such map does.
func homeOf(key string, t reflect.Type) string {
	keys := keysOf(t)
	for _, name := range keys.names {
		ft := t.Field(keys.index[name]).Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() != reflect.Struct {
			continue
		}
		if _, ok := keysOf(ft).index[key]; ok {
			return name
		}
	}
	return ""
}

// unknownKey says that key is not one of known, suggesting the closest
// known key when one is close enough to be a slip.
func unknownKey(key string, known []string) string {
	best, bestDist := "", math.MaxInt
	for _, k := range known {
		if dist := editDistance(strings.ToLower(key), strings.ToLower(k)); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	slack := 0
	switch n := len([]rune(key)); {
	case n >= 6:
		slack = 2
	case n >= 3:
		slack = 1
	}
	if best != "" && bestDist <= slack {
		return fmt.Sprintf("unknown key; did you mean %q?", best)
	}
	return "unknown key; the keys here are: " + strings.Join(known, ", ")
}

// editDistance counts the single-character insertions, deletions,
// substitutions and swaps of adjacent characters that turn a into b.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	if len(x) > 64 || len(y) > 64 {
		return math.MaxInt // no slip makes a key that long
	}
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// scalar is the text of a scalar node as the file wrote it; false for a
// map or a list.
func scalar(n ast.Node) (string, bool) {
	switch t := n.(type) {
	case *ast.StringNode:
		return t.Value, true
	case *ast.LiteralNode:
		return t.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return t.GetToken().Value, true
	}
	return "", false
}

func (d *decoder) mismatch(at, n ast.Node, t reflect.Type, path string) {
	if text, ok := colonJoined(n); ok && t.Kind() == reflect.String {
		d.add(at, path, "must be %s, not %s; YAML read %s as a map at its ':', so quote it: %q", want(t), describe(n), text, text)
		return
	}
	d.add(at, path, "must be %s, not %s", want(t), describe(n))
}

// colonJoined is the text of a map of one key whose value follows the ':'
// with no space (fd00::/8 inside [...] or {...}, which the YAML library
// reads as fd00: :/8): a string the file meant, split at its colon.
func colonJoined(n ast.Node) (string, bool) {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) == 1 {
		n = m.Values[0]
	}
	mv, ok := n.(*ast.MappingValueNode)
	if !ok {
		return "", false
	}
	key, keyOK := scalar(mv.Key)
	value, valueOK := scalar(mv.Value)
	k, v := mv.Key.GetToken(), mv.Value.GetToken()
	if !keyOK || !valueOK || k == nil || v == nil || k.Position == nil || v.Position == nil ||
		v.Position.Line != k.Position.Line || v.Position.Column != k.Position.Column+len([]rune(key))+1 {
		return "", false
	}
	return key + ":" + value, true
}

// want says what a Go type takes, in the configuration's words.
func want(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[Duration]():
		return "a duration such as 5s, 250ms or 1h30m"
	case t == reflect.TypeFor[[]string]():
		return "a list of strings"
	}
	switch t.Kind() {
	case reflect.Struct:
		return "a map of keys (" + strings.Join(keysOf(t).names, ", ") + ")"
	case reflect.Slice:
		return "a list"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	}
	return t.Kind().String()
}

// describe says what a node is, for a problem.
func describe(n ast.Node) string {
	switch t := n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a map"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return "the string " + strconv.Quote(t.Value)
	case *ast.LiteralNode:
		return "a block of text"
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "the number " + t.GetToken().Value
	case *ast.BoolNode:
		return t.GetToken().Value
	}
	return strings.ToLower(strings.TrimSuffix(n.Type().String(), "Type"))
}

// underAny reports whether path is one of roots or inside one of them.
func underAny(path string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool {
		return path == r || strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[")
	})
}
