package sandbox

import (
	"reflect"
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
