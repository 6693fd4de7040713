package sandbox

import (
	"reflect"
	"testing"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// evalTemplate runs src, a script whose last expression is the value, and
// returns the value with the log the script kept, or what it threw.
func evalTemplate(t *testing.T, src string, split bool) string {
	t.Helper()
	vm := goja.New()
	prelude := "var log = []; function v(x) { log.push('v' + log.length); return x }\n"
	var (
		got goja.Value
		err error
	)
	if split {
		var prg *goja.Program
		if prg, err = parseAndCompile("t.js", prelude+src, false); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err = vm.RunProgram(prg)
	} else {
		got, err = vm.RunString(prelude + src)
	}
	if err != nil {
		if ex, ok := err.(*goja.Exception); ok {
			return "threw " + ex.Value().String() + " log " + vm.Get("log").String()
		}
		return "error " + err.Error()
	}
	return got.String() + " log " + vm.Get("log").String()
}

// A template split into parts joined by + gives goja's own result, side
// effects in the same order and the same errors.
func TestSplitTemplatesKeepGojasResults(t *testing.T) {
	for _, src := range []string{
		"`a${v(1)}b${v(2)}c${v(3)}d`",
		"`${v(1)}${v(2)}${v(3)}${v(4)}${v(5)}${v(6)}${v(7)}`",
		"`x${v('é')}y${v(2.5)}z${v(null)}w${v(undefined)}`",
		"`${v({ toString() { log.push('s'); return 'S' }, valueOf() { log.push('n'); return 7 } })}-${v(1)}-${v([1, 2])}`",
		"`${v(1)}${v(Symbol('q'))}${v(3)}`",
		"`${v(1)}${v(2)}${v({ toString() { throw new Error('no') } })}${v(4)}`",
		"`a${v(1)}b${`c${v(2)}d${v(3)}e${v(4)}`}f${v(5)}g`",
		"String.raw`a${v(1)}b${v(2)}c${v(3)}` + ((s, ...a) => s.raw.join('|') + a.join())`p${1}q${2}r${3}s`",
		"`${v(1)}\\u{1F600}${v(2)}\\n${v(3)}\\``",
		"(function () { 'use strict'; return `${this}${v(1)}${v(2)}` }).call(undefined)",
	} {
		if got, want := evalTemplate(t, src, true), evalTemplate(t, src, false); got != want {
			t.Errorf("%s\n split: %s\n  goja: %s", src, got, want)
		}
	}
}

// No untagged template of more than templateGroup substitutions is left
// for goja to build in one allocation, however it is nested.
func TestSplitTemplatesLeaveNoLargeTemplate(t *testing.T) {
	src := "const f = (s) => [`${s}${s}${s}${s}${s}`, { k: `${s}-${s}-${s}` }, () => `${`${s}${s}${s}`}${s}${s}`]"
	prg, err := parser.ParseFile(nil, "t.js", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	splitTemplates(prg, src)
	var templates, large int
	walkExpressions(reflect.ValueOf(prg), func(e ast.Expression) ast.Expression {
		if tl, ok := e.(*ast.TemplateLiteral); ok {
			templates++
			if len(tl.Expressions) > templateGroup {
				large++
			}
		}
		return e
	})
	if large != 0 || templates != 9 {
		t.Fatalf("%d templates, %d of them large; want 9 parts, none large", templates, large)
	}
}

// BenchmarkTemplates compiles one loop of concatenations with and without
// the split: + and templates of one or two substitutions are untouched,
// a template of three or more pays one more allocation per extra part.
func BenchmarkTemplates(b *testing.B) {
	for _, c := range []struct{ name, expr string }{
		{"plus", "a + '-' + b + '-' + c"},
		{"template2", "`${a}-${b}`"},
		{"template3", "`${a}-${b}-${c}`"},
		{"template6", "`${a}-${b}-${c}-${a}-${b}-${c}`"},
	} {
		src := "var a = 'alpha', b = 42, c = 'gamma', r; for (let i = 0; i < 1000; i++) r = " + c.expr
		for _, split := range []bool{false, true} {
			name := c.name + "/goja"
			prg, err := goja.Compile("b.js", src, false)
			if split {
				name = c.name + "/split"
				prg, err = parseAndCompile("b.js", src, false)
			}
			if err != nil {
				b.Fatal(err)
			}
			b.Run(name, func(b *testing.B) {
				vm := goja.New()
				for b.Loop() {
					if _, err := vm.RunProgram(prg); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
