package sandbox

import (
	"github.com/dop251/goja"
)

// RegExp guards. goja's RegExp.prototype[Symbol.replace] finds every match
// in one call, then builds the result in the same call: a 1 MB string
// whose every character matches, replaced with 512 characters each, is
// half a gigabyte, and goja's process died of it.

// regexpState is what the RegExp guards share.
type regexpState struct {
	construct      goja.Constructor // RegExp, goja's
	exec           goja.Callable    // RegExp.prototype.exec, goja's
	global, sticky goja.Callable    // the getters of RegExp.prototype's flags
	unicode        goja.Callable
}

func (g *guards) installRegExps() error {
	ctor := g.global("RegExp")
	proto := ctor.Get("prototype").(*goja.Object)
	construct, _ := goja.AssertConstructor(ctor)
	exec, _ := goja.AssertFunction(proto.Get("exec"))
	flag := func(name string) goja.Callable {
		d, err := g.ownDesc(goja.Undefined(), proto, g.vm.ToValue(name))
		if err != nil {
			return nil
		}
		f, _ := goja.AssertFunction(d.(*goja.Object).Get("get"))
		return f
	}
	g.regexp = &regexpState{construct: construct, exec: exec,
		global: flag("global"), sticky: flag("sticky"), unicode: flag("unicode")}
	if g.regexp.global == nil || g.regexp.sticky == nil || g.regexp.unicode == nil {
		return errNotBuiltin("RegExp.prototype's flags")
	}
	if err := g.methodSymbol(proto, goja.SymMatch, "[Symbol.match]", g.regexpListing(false)); err != nil {
		return err
	}
	if err := g.methodSymbol(proto, goja.SymSplit, "[Symbol.split]", g.regexpListing(true)); err != nil {
		return err
	}
	return g.methodSymbol(proto, goja.SymReplace, "[Symbol.replace]", g.regexpReplace)
}

// methodSymbol is method for a method keyed by a symbol.
func (g *guards) methodSymbol(obj *goja.Object, sym *goja.Symbol, what string, wrap func(orig nativeFunc) nativeFunc) error {
	orig, ok := obj.GetSymbol(sym).(*goja.Object)
	if !ok {
		return errNotBuiltin(what)
	}
	f, ok := orig.Export().(nativeFunc)
	if !ok {
		return errNotBuiltin(what)
	}
	w := g.native(orig.Get("name").String(), orig.Get("length"), wrap(f))
	return obj.DefineDataPropertySymbol(sym, w, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// flagOf reads one of rx's flags through goja's own getter.
func (g *guards) flagOf(get goja.Callable, rx *goja.Object) bool {
	v, err := get(rx)
	return err == nil && v.ToBoolean()
}

// regexpMatchBytes is what goja's list of matches takes a match (a slice
// of the match's and captures' bounds, and its header); measured at 160
// with the rest of a replace, the estimate stays below.
const regexpMatchBytes = 64

// regexpReplace guards RegExp.prototype[Symbol.replace]. goja finds every
// match first, in one call, into a list that takes about a hundred bytes
// a match (a megabyte string of one-character matches is a hundred
// megabytes), then calls back or builds the result. When the list and
// the result could pass half the job's limit, the matches are counted
// first, on a clone of the RegExp, a match at a time with a look at the
// interrupt, and what the list and the result take is asked of the
// budget as the count grows. A native callback (String, say) is called
// through a guard that looks at the interrupt.
func (g *guards) regexpReplace(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		rx, ok := call.This.(*goja.Object)
		if !ok || isProxy(rx) || rx.ClassName() != "RegExp" {
			return orig(call)
		}
		// goja's order: the string, then the replacement.
		s := g.toStr(call.Argument(0))
		rv := call.Argument(1)
		n := int64(s.Length())
		var t goja.String
		var worst int64
		if f, isFn := callable(rv); isFn {
			if !isScriptFunction(rv) {
				calls := int64(0)
				rv = g.vm.ToValue(func(c goja.FunctionCall) goja.Value {
					if calls++; calls%guardStride == 0 {
						g.checkpoint()
					}
					return f(c)
				})
			}
		} else {
			t = g.toStr(rv)
			rv = t
			worst = (n + (n+1)*regexSubstitutionBound(t, n)) * 2
		}
		args := []goja.Value{s, rv}
		room := max(int64(g.s.job.MemoryLimitMB)<<19, reserveFloor) >> g.shift
		if worst += (n + 1) * regexpMatchBytes; worst >= 0 && worst < room {
			return orig(goja.FunctionCall{This: rx, Arguments: args})
		}
		if method, known := g.quietSymbol(rx, goja.SymMatch); known && method {
			g.reserveReplace(rx, s, t, regexpMatchBytes, false)
		}
		return orig(goja.FunctionCall{This: rx, Arguments: args})
	}
}

// regexpListing guards RegExp.prototype[Symbol.match] (a global one lists
// every match) and [Symbol.split] (without a limit, every piece): goja
// finds them all in one call, and a list of one-character matches takes
// about a hundred times the string. Past half the job's limit they are
// counted first, as for replace.
func (g *guards) regexpListing(split bool) func(nativeFunc) nativeFunc {
	return func(orig nativeFunc) nativeFunc {
		return func(call goja.FunctionCall) goja.Value {
			rx, ok := call.This.(*goja.Object)
			if !ok || isProxy(rx) || rx.ClassName() != "RegExp" {
				return orig(call)
			}
			s := g.toStr(call.Argument(0))
			args := append([]goja.Value{s}, call.Arguments[min(1, len(call.Arguments)):]...)
			n := int64(s.Length())
			room := max(int64(g.s.job.MemoryLimitMB)<<19, reserveFloor) >> g.shift
			each := int64(regexpMatchBytes + keyBytes)
			if (n+1)*each < room || split && !goja.IsUndefined(call.Argument(1)) || !split && !g.flagOf(g.regexp.global, rx) {
				return orig(goja.FunctionCall{This: rx, Arguments: args})
			}
			if method, known := g.quietSymbol(rx, goja.SymMatch); known && method {
				g.reserveReplace(rx, s, nil, each, split)
			}
			return orig(goja.FunctionCall{This: rx, Arguments: args})
		}
	}
}

// reserveReplace counts the matches of rx in s on a clone of rx and asks
// the budget, as the count grows, for goja's list of them (perMatch bytes
// each) and for the result of replacing them with template t (nil: a
// callback's, unknown). all counts every match, however rx's flags read.
//
// The count goes a window of s at a time: goja's exec converts the whole
// string it is given to UTF-16 runes first (220 ms for 16 MB), where a
// window costs a few milliseconds. A match across two windows may count
// as two, or not at all: the count is an estimate for the budget, and the
// matches themselves are goja's.
func (g *guards) reserveReplace(rx *goja.Object, s, t goja.String, perMatch int64, all bool) {
	n := int64(s.Length())
	ascii := t != nil && isASCII(s) && isASCII(t)
	if !all && !g.flagOf(g.regexp.global, rx) {
		// One match at most.
		bytes := n*unitBytes(ascii) + perMatch
		if t != nil {
			bytes += regexSubstitutionBound(t, n) * unitBytes(ascii)
		}
		g.reserve(bytes)
		return
	}
	clone, err := g.regexp.construct(nil, rx)
	throwing(err)
	unicode := g.flagOf(g.regexp.unicode, rx)
	var meter growth
	size, matches := n, int64(0)
	bytes := func() int64 { return size*unitBytes(ascii) + matches*perMatch }
	window := int64(g.strStride) * 4
	for from := int64(0); from < n; from += window {
		end := min(from+window, n)
		part := s.Substring(int(from), int(end))
		pn := end - from
		throwing(clone.Set("lastIndex", 0))
		for i := int64(0); ; i++ {
			g.tick(i)
			if i%guardStride == 0 {
				g.grow(&meter, bytes())
			}
			m, err := g.regexp.exec(clone, part)
			throwing(err)
			mo, ok := m.(*goja.Object)
			if !ok {
				break
			}
			matches++
			if t != nil {
				index := from + mo.Get("index").ToInteger()
				caps := make([]int64, lengthOf(mo))
				for c := range caps {
					if v := mo.Get(key(int64(c))); v != nil && !goja.IsUndefined(v) {
						caps[c] = int64(g.toStr(v).Length())
					}
				}
				size += substitutionLength(t, index, n, caps) - caps[0]
			}
			if nilSafe(mo.Get("0")).String() == "" {
				next := toLength(clone.Get("lastIndex")) + 1
				if next > pn {
					break
				}
				if unicode && next < pn && isHighSurrogate(part.CharAt(int(next-1))) && isLowSurrogate(part.CharAt(int(next))) {
					next++
				}
				throwing(clone.Set("lastIndex", next))
			}
		}
	}
	g.grow(&meter, bytes())
}

func isHighSurrogate(c uint16) bool { return c >= 0xd800 && c <= 0xdbff }
func isLowSurrogate(c uint16) bool  { return c >= 0xdc00 && c <= 0xdfff }

// regexSubstitutionBound bounds what template t makes of one match in a
// string of n units: "$&", "$`", "$'" and a capture are n at most.
func regexSubstitutionBound(t goja.String, n int64) int64 {
	var lit, refs int64
	tl := t.Length()
	for i := 0; i < tl; i++ {
		if t.CharAt(i) == '$' && i < tl-1 {
			switch c := t.CharAt(i + 1); {
			case c == '&' || c == '`' || c == '\'' || c >= '0' && c <= '9':
				refs++
				i++
				continue
			}
		}
		lit++
	}
	if refs > 0 && n > (1<<62)/refs {
		return 1 << 60
	}
	return lit + refs*n
}

// substitutionLength is the length goja's GetSubstitution makes of a match
// at index in a string of n units, with the captures' lengths (caps[0]
// the match's).
func substitutionLength(t goja.String, index, n int64, caps []int64) int64 {
	tl := t.Length()
	var out int64
	for i := 0; i < tl; i++ {
		if t.CharAt(i) != '$' || i == tl-1 {
			out++
			continue
		}
		switch ch := t.CharAt(i + 1); ch {
		case '$':
			out++
		case '`':
			out += index
		case '\'':
			if tail := index + caps[0]; tail < n {
				out += n - tail
			}
		case '&':
			out += caps[0]
		default:
			num, j := 0, i+1
			for j < tl {
				c := t.CharAt(j)
				if c < '0' || c > '9' {
					break
				}
				m := num*10 + int(c-'0')
				if m >= len(caps) {
					break
				}
				num = m
				j++
			}
			if num > 0 {
				out += caps[num]
				i = j - 1
				continue
			}
			out += 2
		}
		i++
	}
	return out
}

// quietSymbol reports whether o has a method keyed by sym, when the lookup
// runs nothing (known): no Proxy on the chain, and the property, where
// found, a data property.
func (g *guards) quietSymbol(o *goja.Object, sym *goja.Symbol) (method, known bool) {
	for p := o; p != nil; p = p.Prototype() {
		if isProxy(p) {
			return false, false
		}
		if !g.hasOwnSymbol(p, sym) {
			continue
		}
		d, err := g.ownDesc(goja.Undefined(), p, sym)
		if err != nil {
			return false, false
		}
		desc := d.(*goja.Object)
		for _, f := range desc.Keys() {
			if f == "value" {
				v := desc.Get("value")
				if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
					return false, true
				}
				_, isFn := callable(v)
				return isFn, isFn
			}
		}
		return false, false
	}
	return false, true
}
