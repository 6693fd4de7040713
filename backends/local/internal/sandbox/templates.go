package sandbox

import (
	"reflect"
	"sort"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/token"
)

// Template literals are split before goja compiles them. goja builds a
// template's string in one allocation of the whole result, in Go code no
// interrupt reaches, so `${s}${s}${s}…` over a string near the run's limit
// asks for many times the limit at once: the copy outruns every memory
// check and the process's address-space limit kills the worker with all
// its runs. Binary + has no such reach: each step allocates at most its two
// operands, which the run already holds, and the meter cancels the run at
// the first allocation of its whole limit.
//
// So an untagged template of more than templateGroup substitutions becomes
// templates of templateGroup substitutions each, joined by + in a balanced
// tree: `a${x}b${y}c${z}d` is `a${x}b${y}c` + `${z}d`. Each part is a
// template (ToString of each value, as the whole did) and each + joins two
// strings, so the result, the order of evaluation and every error are the
// template's own; no allocation is larger than two values the run holds
// and the literal text, and the meter sees each one. Templates of one or
// two substitutions, the common ones, are left as they are.
const templateGroup = 2

// splitTemplates rewrites the large templates in prg, in place.
func splitTemplates(prg *ast.Program, src string) {
	if !strings.Contains(src, "${") {
		return // no template has a substitution
	}
	walkExpressions(reflect.ValueOf(prg), func(e ast.Expression) ast.Expression {
		t, ok := e.(*ast.TemplateLiteral)
		if !ok || t.Tag != nil || len(t.Expressions) <= templateGroup {
			return e
		}
		return joinTemplateParts(t, templateParts(t))
	})
}

// templateParts cuts t into templates of templateGroup substitutions: the
// first keeps t's head, each keeps the text that follows its last value.
func templateParts(t *ast.TemplateLiteral) []ast.Expression {
	var parts []ast.Expression
	for i := 0; i < len(t.Expressions); i += templateGroup {
		j := min(i+templateGroup, len(t.Expressions))
		head := &ast.TemplateElement{Idx: t.OpenQuote, Valid: true}
		if i == 0 {
			head = t.Elements[0]
		}
		parts = append(parts, &ast.TemplateLiteral{
			OpenQuote:   t.OpenQuote,
			CloseQuote:  t.CloseQuote,
			Elements:    append([]*ast.TemplateElement{head}, t.Elements[i+1:j+1]...),
			Expressions: t.Expressions[i:j],
		})
	}
	return parts
}

// joinTemplateParts joins parts with + in a balanced tree, left to right:
// each + then joins two strings each smaller than the run's limit (or the
// meter cancelled the run at the allocation of one), and the tree is as
// shallow as it can be for goja's recursive compiler.
func joinTemplateParts(t *ast.TemplateLiteral, parts []ast.Expression) ast.Expression {
	if len(parts) == 1 {
		return parts[0]
	}
	mid := len(parts) / 2
	return &ast.BinaryExpression{
		Operator: token.PLUS,
		Left:     joinTemplateParts(t, parts[:mid]),
		Right:    joinTemplateParts(t, parts[mid:]),
	}
}

var (
	expressionType = reflect.TypeFor[ast.Expression]()
	astPackage     = reflect.TypeFor[ast.Program]().PkgPath()
)

// walkExpressions calls f on every expression under v, children first, and
// puts what f returns in its place. goja's ast has no walker of its own;
// this one follows every pointer, interface, slice and struct field of the
// ast package's types.
func walkExpressions(v reflect.Value, f func(ast.Expression) ast.Expression) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() && v.Elem().Kind() == reflect.Struct && v.Elem().Type().PkgPath() == astPackage {
			walkExpressions(v.Elem(), f)
		}
	case reflect.Interface:
		if !v.IsNil() {
			walkExpressions(v.Elem(), f)
			if v.Type() == expressionType && v.CanSet() {
				if e, ok := v.Interface().(ast.Expression); ok {
					if r := f(e); r != e {
						v.Set(reflect.ValueOf(r))
					}
				}
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			walkExpressions(v.Index(i), f)
		}
	case reflect.Struct:
		if v.Type().PkgPath() != astPackage {
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkExpressions(v.Field(i), f)
			}
		}
	}
}

// splitTemplateSource is src with its large templates split as
// splitTemplates splits them, and its direct evals routed through the
// hook (directeval.go), written out as source: for the code goja compiles
// itself at run time (Function and its kin, eval), whose compilation the
// sandbox cannot reach but whose text it can. Each split template becomes
// its parts joined by + in the same balanced tree, in parentheses:
// `a${x}b${y}c${z}d` is (`a${x}b${y}c`+`${z}d`). Nothing else of src
// changes. ok is false when src has nothing to rewrite or does not parse
// (goja then reports its own syntax error), and when the rewritten text
// would not parse (positions goja's parser gave that were off): src is
// then compiled as it is.
func splitTemplateSource(src string) (out string, ok bool) {
	ins := templateSplits(src)
	if len(ins) == 0 {
		return src, false
	}
	out = insert(src, ins)
	if !parses(out) {
		return src, false
	}
	return out, true
}

// templateSplits are the insertions that split src's large templates and
// route its direct evals' source through the hook (directEvalInsertions),
// in order (none when src does not parse).
func templateSplits(src string) []insertion {
	if !strings.Contains(src, "${") && !strings.Contains(src, "eval") {
		return nil
	}
	prg, err := parseSource("", src)
	if err != nil {
		return nil
	}
	base := prg.File.Base()
	var ins []insertion
	whole := true
	walkExpressions(reflect.ValueOf(prg), func(e ast.Expression) ast.Expression {
		var more []insertion
		ok := true
		if t, isT := e.(*ast.TemplateLiteral); isT && t.Tag == nil && len(t.Expressions) > templateGroup {
			more, ok = templateInsertions(t, src, base)
		} else if arg := directEvalArgument(e); arg != nil {
			more, ok = directEvalInsertions(arg, src, base)
		}
		ins, whole = append(ins, more...), whole && ok
		return e
	})
	if !whole {
		return nil
	}
	sort.SliceStable(ins, func(i, j int) bool {
		if ins[i].at != ins[j].at {
			return ins[i].at < ins[j].at
		}
		return ins[i].rank < ins[j].rank
	})
	return ins
}

// insert is src with ins (in order) inserted.
func insert(src string, ins []insertion) string {
	var b strings.Builder
	last := 0
	for _, in := range ins {
		b.WriteString(src[last:in.at])
		b.WriteString(in.text)
		last = in.at
	}
	b.WriteString(src[last:])
	return b.String()
}

// insertion is text to insert into a source before its byte at. Of
// insertions at one byte, the lower rank goes first: a direct eval's
// hook opens around a template that starts its argument (rank 0 before
// the template's 1) and closes after one that ends it (2 after 1).
type insertion struct {
	at   int
	rank int
	text string
}

// templateInsertions are the insertions that split t (in src, whose
// positions start at base) into parts of templateGroup substitutions,
// joined as joinTemplateParts joins them; ok is false when its text is
// not where the parser said.
func templateInsertions(t *ast.TemplateLiteral, src string, base int) (ins []insertion, ok bool) {
	n := (len(t.Expressions) + templateGroup - 1) / templateGroup
	// opens[i] and closes[i] count the tree's + nodes whose first and
	// last part is part i.
	opens, closes := make([]int, n), make([]int, n)
	var tree func(lo, hi int)
	tree = func(lo, hi int) {
		if hi-lo < 2 {
			return
		}
		opens[lo]++
		closes[hi-1]++
		mid := lo + (hi-lo)/2
		tree(lo, mid)
		tree(mid, hi)
	}
	tree(0, n)
	openAt, closeAt := int(t.OpenQuote)-base, int(t.CloseQuote)-base
	if openAt < 0 || closeAt >= len(src) || src[openAt] != '`' || src[closeAt] != '`' {
		return nil, false
	}
	ins = []insertion{{at: openAt, rank: 1, text: strings.Repeat("(", opens[0])}}
	for i := 1; i < n; i++ {
		// Part i starts at the ${ of substitution i*templateGroup, which
		// ends the raw text of the element before it (goja places an
		// element one past its first byte).
		at := substitutionStart(src, int(t.Elements[i*templateGroup].Idx)-base-1)
		if at < 0 {
			return nil, false
		}
		ins = append(ins, insertion{at: at, rank: 1, text: "`" + strings.Repeat(")", closes[i-1]) + "+" + strings.Repeat("(", opens[i]) + "`"})
	}
	return append(ins, insertion{at: closeAt + 1, rank: 1, text: strings.Repeat(")", closes[n-1])}), true
}

// substitutionStart is the offset of the ${ that ends the raw template
// text starting at from: the first $ followed by { that no backslash
// escapes (-1: none).
func substitutionStart(src string, from int) int {
	for i := max(from, 0); i+1 < len(src); i++ {
		switch {
		case src[i] == '\\':
			i++
		case src[i] == '`':
			return -1
		case src[i] == '$' && src[i+1] == '{':
			return i
		}
	}
	return -1
}
