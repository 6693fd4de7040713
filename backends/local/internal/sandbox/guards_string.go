package sandbox

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
	"golang.org/x/text/cases"
	"golang.org/x/text/language"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// String guards: results whose size follows from the arguments are sized
// and asked of the budget first, and the slow or long ones are built here,
// equal to goja's (its string representations included), with a look at
// the interrupt between pieces.

// stringNative is the result length (in UTF-16 units) below which a string
// guard leaves the work to goja: goja spends about 6 ns a unit repeating,
// padding or case-mapping ASCII, and 50 encoding a URI component, so 2^20
// units take 6 to 50 ms. normalize (300 ns a unit) and the case mapping of
// other text (150) leave only guardSlowLoop units to goja.
const stringNative = 1 << 20

// stringStride is how many units of a string a guard's loop handles between
// two looks at the interrupt.
const stringStride = 1 << 16

func (g *guards) installStrings() error {
	proto := g.global("String").Get("prototype").(*goja.Object)
	padEnd, ok := proto.Get("padEnd").(*goja.Object).Export().(nativeFunc)
	if !ok {
		return errNotBuiltin("String.prototype.padEnd")
	}
	// String.prototype.padEnd(0) is goja's RequireObjectCoercible and
	// ToString of this, with its exact errors, and nothing else.
	g.thisString = func(this goja.Value) goja.String {
		return padEnd(goja.FunctionCall{This: this, Arguments: []goja.Value{g.vm.ToValue(0)}}).(goja.String)
	}
	for name, wrap := range map[string]func(nativeFunc) nativeFunc{
		"repeat":            g.repeat,
		"padStart":          func(orig nativeFunc) nativeFunc { return g.pad(orig, true) },
		"padEnd":            func(orig nativeFunc) nativeFunc { return g.pad(orig, false) },
		"concat":            g.concat,
		"normalize":         g.normalize,
		"toUpperCase":       func(orig nativeFunc) nativeFunc { return g.caseMap(orig, true) },
		"toLocaleUpperCase": func(orig nativeFunc) nativeFunc { return g.caseMap(orig, true) },
		"toLowerCase":       func(orig nativeFunc) nativeFunc { return g.caseMap(orig, false) },
		"toLocaleLowerCase": func(orig nativeFunc) nativeFunc { return g.caseMap(orig, false) },
		"split":             g.split,
		"replace":           func(orig nativeFunc) nativeFunc { return g.replace(orig, false) },
		"replaceAll":        func(orig nativeFunc) nativeFunc { return g.replace(orig, true) },
		"indexOf":           func(orig nativeFunc) nativeFunc { return g.stringSearch(orig, false) },
		"lastIndexOf":       func(orig nativeFunc) nativeFunc { return g.stringSearch(orig, true) },
		"includes":          g.stringIncludes,
	} {
		if err := g.method(proto, name, wrap); err != nil {
			return err
		}
	}
	return g.method(g.global("String"), "raw", g.stringRaw)
}

// toStr is goja's internal ToString of v: a Symbol throws.
func (g *guards) toStr(v goja.Value) goja.String {
	switch x := v.(type) {
	case goja.String:
		return x
	case *goja.Symbol:
		panic(g.vm.NewTypeError("Cannot convert a Symbol value to a string"))
	case *goja.Object:
		return g.toStr(x.ToString())
	}
	return fromUTF8(v.String())
}

// isASCII reports whether goja holds s as one byte a unit: what its own
// built-ins decide their result's representation by.
func isASCII(s goja.String) bool {
	switch reflect.TypeOf(s).Name() {
	case "asciiString":
		return true
	case "unicodeString":
		return false
	}
	for i, n := 0, s.Length(); i < n; i++ {
		if s.CharAt(i) >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// unitBytes is how many bytes a string of s's representation takes a unit.
func unitBytes(ascii bool) int64 {
	if ascii {
		return 1
	}
	return 2
}

// growth meters a result that grows in one buffer across a guard's loop,
// asking the budget ahead as the buffer doubles.
type growth struct{ reserved int64 }

// grow notes that the result has reached size bytes.
func (g *guards) grow(m *growth, size int64) {
	if size <= m.reserved {
		return
	}
	next := max(size, 2*m.reserved, reserveFloor)
	g.grant(next-m.reserved, size)
	m.reserved = next
}

// grant asks the host's budget for step bytes of a result whose buffer is
// whole bytes; without a budget, whole is held to the job's limit.
func (g *guards) grant(step, whole int64) {
	s := g.s
	if s.halted() {
		g.raise()
	}
	if _, ok := s.host.(MemoryBudget); ok {
		g.reserve(max(step, reserveFloor))
		return
	}
	if limit := int64(s.job.MemoryLimitMB) << 20; limit > 0 && whole > limit {
		s.interrupt(interruptMemory{})
		g.raise()
	}
}

// repeat guards String.prototype.repeat: goja writes the string once per
// count, 2.9 s for 2^29 characters; the guard sizes the result, asks the
// budget and doubles.
func (g *guards) repeat(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		s := g.thisString(call.This)
		n := call.Argument(0).ToNumber()
		delegate := func() goja.Value {
			return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{n}})
		}
		count, l := n.ToInteger(), int64(s.Length())
		if goja.IsInfinity(n) || count <= 0 || l == 0 || count < g.strNative && count*l < g.strNative {
			return delegate()
		}
		ascii := isASCII(s)
		if count > math.MaxInt64/(2*l) {
			g.reserve(math.MaxInt64)
		}
		total := count * l
		g.reserve(total * unitBytes(ascii))
		var b goja.StringBuilder
		if ascii {
			b.Grow(int(total))
		} else {
			b.LikelyUnicode(int(total))
		}
		b.WriteString(s)
		g.fillRepeating(&b, 0, l, total)
		return b.String()
	}
}

// fillRepeating extends b, whose units from start on hold one period of
// period units, until they hold total units of the repeating pattern:
// doubling, with a look at the interrupt between copies.
func (g *guards) fillRepeating(b *goja.StringBuilder, start, period, total int64) {
	done := period
	for done < total {
		g.checkpoint()
		k := min(done, total-done)
		if period < total-done {
			// Whole periods keep the pattern aligned.
			k = max(k-k%period, period)
			k = min(k, total-done)
		}
		b.WriteSubstring(b.String(), int(start), int(start+k))
		done += k
	}
}

// pad guards String.prototype.padStart and padEnd, which write the filler
// once per repeat as repeat does.
func (g *guards) pad(orig nativeFunc, atStart bool) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		s := g.thisString(call.This)
		maxLen := toLength(call.Argument(0))
		l := int64(s.Length())
		if maxLen <= l {
			return s
		}
		var filler goja.String = g.vm.ToValue(" ").(goja.String)
		if f := call.Argument(1); !goja.IsUndefined(f) {
			filler = g.toStr(f)
		}
		fl := int64(filler.Length())
		if fl == 0 || maxLen < g.strNative {
			return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{g.vm.ToValue(maxLen), filler}})
		}
		remaining := maxLen - l
		// The result holds a non-ASCII unit when s does, or the part of
		// the filler it repeats does, as goja's builders decide.
		ascii := isASCII(s)
		if ascii && !isASCII(filler) {
			used := filler
			if remaining < fl {
				used = filler.Substring(0, int(remaining))
			}
			ascii = isASCII(used)
		}
		g.reserve(maxLen * unitBytes(ascii))
		var b goja.StringBuilder
		if ascii {
			b.Grow(int(maxLen))
		} else {
			b.LikelyUnicode(int(maxLen))
		}
		start := int64(0)
		if !atStart {
			b.WriteString(s)
			start = l
		}
		if remaining < fl {
			b.WriteSubstring(filler, 0, int(remaining))
		} else {
			b.WriteString(filler)
			g.fillRepeating(&b, start, fl, remaining)
		}
		if atStart {
			b.WriteString(s)
		}
		return b.String()
	}
}

// concat guards String.prototype.concat: the result's size is known once
// every argument is a string, and is asked of the budget.
func (g *guards) concat(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		s := g.thisString(call.This)
		args := make([]goja.Value, len(call.Arguments))
		total := int64(s.Length())
		for i, a := range call.Arguments {
			str := g.toStr(a)
			args[i] = str
			total += int64(str.Length())
		}
		if total >= reserveFloor {
			ascii := isASCII(s)
			for _, a := range args {
				ascii = ascii && isASCII(a.(goja.String))
			}
			g.reserve(total * unitBytes(ascii))
		}
		return orig(goja.FunctionCall{This: s, Arguments: args})
	}
}

// transformString is transform.String(t, src), with a look at the
// interrupt every few of the pieces transform.String hands t: the same
// pieces, so the same result (golang.org/x/text's casers give another
// result for another split of their input).
func (g *guards) transformString(t transform.Transformer, src string) string {
	out, _, err := transform.String(&checkedTransformer{t: t, g: g}, src)
	if err != nil {
		// The transformers used here never fail: the sandbox broke.
		g.s.breakRun()
		g.raise()
	}
	return out
}

// checkedTransformer is a transformer that looks at the interrupt.
type checkedTransformer struct {
	t     transform.Transformer
	g     *guards
	calls int
}

func (c *checkedTransformer) Reset() { c.t.Reset() }

func (c *checkedTransformer) Transform(dst, src []byte, atEOF bool) (int, int, error) {
	if c.calls++; c.calls%64 == 0 {
		c.g.checkpoint()
	}
	return c.t.Transform(dst, src, atEOF)
}

// utf8Of is s.String(), goja's UTF-8 form of a string (a lone surrogate
// becomes U+FFFD), made a piece at a time with a look at the interrupt:
// goja's own conversion of 2^24 units can take a second on a busy heap.
func (g *guards) utf8Of(s goja.String) string {
	n := s.Length()
	if n < g.strStride || isASCII(s) {
		return s.String()
	}
	var b strings.Builder
	b.Grow(n * 2)
	for i := 0; i < n; {
		g.checkpoint()
		end := min(i+g.strStride, n)
		if end < n && utf16.IsSurrogate(rune(s.CharAt(end-1))) && s.CharAt(end-1) < 0xdc00 {
			end++ // keep a surrogate pair in one piece
		}
		b.WriteString(s.Substring(i, end).String())
		i = end
	}
	return b.String()
}

// fromUTF8 is goja's newStringValue: an ASCII string when s is, else
// UTF-16.
func fromUTF8(s string) goja.String {
	var b goja.StringBuilder
	b.WriteUTF8String(s)
	return b.String()
}

// normalize guards String.prototype.normalize, about 300 ns a character
// in goja on non-ASCII text: the guard normalizes a segment at a time.
func (g *guards) normalize(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		s := g.thisString(call.This)
		form := goja.Value(goja.Undefined())
		if f := call.Argument(0); !goja.IsUndefined(f) {
			form = g.toStr(f)
		}
		delegate := func() goja.Value { return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{form}}) }
		if int64(s.Length()) < g.slowLoop || isASCII(s) {
			return delegate()
		}
		var f norm.Form
		switch name := "NFC"; {
		case !goja.IsUndefined(form):
			name = form.String()
			fallthrough
		default:
			switch name {
			case "NFC":
				f = norm.NFC
			case "NFD":
				f = norm.NFD
			case "NFKC":
				f = norm.NFKC
			case "NFKD":
				f = norm.NFKD
			default:
				return delegate() // goja's RangeError
			}
		}
		g.reserve(int64(s.Length()) * 2)
		return fromUTF8(g.transformString(f, g.utf8Of(s)))
	}
}

// caseMap guards toUpperCase, toLowerCase and their locale forms: goja
// maps the whole string in one call, about 6 ns a character for ASCII
// text and 150 for other text. ASCII text is mapped a piece at a time,
// other text through goja's own casers with a look at the interrupt.
func (g *guards) caseMap(orig nativeFunc, upper bool) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		s := g.thisString(call.This)
		n := s.Length()
		if int64(n) < g.slowLoop || int64(n) < g.strNative && isASCII(s) {
			return orig(goja.FunctionCall{This: s})
		}
		ascii := isASCII(s)
		g.reserve(int64(n) * unitBytes(ascii))
		if !ascii {
			return g.caseUnicode(s, upper)
		}
		src := s.String()
		var b goja.StringBuilder
		b.Grow(n)
		for i := 0; i < n; i += g.strStride {
			g.checkpoint()
			part := src[i:min(i+g.strStride, n)]
			if upper {
				b.WriteUTF8String(strings.ToUpper(part))
			} else {
				b.WriteUTF8String(strings.ToLower(part))
			}
		}
		return b.String()
	}
}

// caseUnicode is goja's case mapping of non-ASCII text.
func (g *guards) caseUnicode(s goja.String, upper bool) goja.Value {
	if upper {
		return fromUTF8(g.transformString(cases.Upper(language.Und), g.utf8Of(s)))
	}
	// goja's toLower, with its fix for U+0345 before a final sigma.
	r := []rune(g.transformString(cases.Lower(language.Und), g.utf8Of(s)))
	for i := 0; i < len(r)-1; i++ {
		if (i == 0 || r[i-1] != 0x3b1) && r[i] == 0x345 && r[i+1] == 0x3c2 {
			i++
			r[i] = 0x3c3
		}
	}
	var b goja.StringBuilder
	for i, c := range r {
		if i%g.strStride == 0 {
			g.checkpoint()
		}
		b.WriteRune(c)
	}
	return b.String()
}

// toMethod is goja's GetMethod of a value already read: nil for undefined
// or null, a TypeError for anything else that is not callable.
func (g *guards) toMethod(v goja.Value) nativeFunc {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil
	}
	if f, ok := callable(v); ok {
		return f
	}
	panic(g.vm.NewTypeError(fmt.Sprintf("%s is not a method", v.String())))
}

// objectCoercible throws goja's TypeError for undefined and null, through
// the original it guards (which throws before doing anything else).
func objectCoercible(orig nativeFunc, this goja.Value) {
	if goja.IsUndefined(this) || goja.IsNull(this) {
		orig(goja.FunctionCall{This: this})
	}
}

// split guards String.prototype.split with a string separator: goja makes
// every piece in one call (about 400 ns a piece). The guard counts the
// pieces, asks the budget, and makes them with a look at the interrupt.
func (g *guards) split(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		objectCoercible(orig, call.This)
		sep, limitValue := call.Argument(0), call.Argument(1)
		if _, ok := sep.(*goja.Object); ok {
			if splitter := g.toMethod(sep.(*goja.Object).GetSymbol(goja.SymSplit)); splitter != nil {
				return splitter(goja.FunctionCall{This: sep, Arguments: []goja.Value{call.This, limitValue}})
			}
		}
		s := g.thisString(call.This)
		limit := -1
		if !goja.IsUndefined(limitValue) {
			limit = int(toUint32(limitValue))
			limitValue = g.vm.ToValue(limit)
		}
		sep = sep.ToString()
		delegate := func() goja.Value {
			return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{sep, limitValue}})
		}
		if limit == 0 || goja.IsUndefined(sep) || int64(s.Length()) < g.loop/2 {
			return delegate()
		}
		str, separator := g.utf8Of(s), sep.String()
		pieces := int64(strings.Count(str, separator)) + 1
		if separator == "" {
			pieces = int64(utf8.RuneCountInString(str))
		}
		if limit > 0 {
			pieces = min(pieces, int64(limit))
		}
		if pieces < g.loop {
			return delegate()
		}
		// A piece is an interface value in the array, and its string
		// header; a piece of UTF-16 text is a copy.
		bytes := pieces * 2 * valueBytes
		if !isASCII(s) {
			bytes += 2 * int64(s.Length())
		}
		g.reserve(bytes)
		splitLimit := limit
		if limit > 0 {
			splitLimit = limit + 1
		}
		parts := strings.SplitN(str, separator, splitLimit)
		if limit > 0 && len(parts) > limit {
			parts = parts[:limit]
		}
		values := make([]any, len(parts))
		for i, p := range parts {
			if i%guardStride == 0 {
				g.checkpoint()
			}
			values[i] = newString(g.vm, p)
		}
		return g.vm.NewArray(values...)
	}
}

// newString is goja's newStringValue of s, sharing s's bytes when it is
// ASCII, as goja's split does.
func newString(vm *goja.Runtime, s string) goja.Value {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return fromUTF8(s)
		}
	}
	if len(s) <= 16 {
		return vm.ToValue(s)
	}
	var b goja.StringBuilder
	b.WriteUTF8String(s)
	return b.String()
}

// toUint32 is goja's toUint32 (an integer wraps, a float is truncated
// through int64).
func toUint32(v goja.Value) uint32 {
	switch x := v.ToNumber().Export().(type) {
	case int64:
		return uint32(x)
	case float64:
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return uint32(int64(x))
		}
	}
	return 0
}

// replace guards String.prototype.replace and replaceAll with a string to
// search for: goja lists every match, then builds the result in one call.
// The guard bounds the result's size ("$`" copies the text before the
// match, each time), asks the budget, and replaces many matches in a loop
// that looks at the interrupt.
func (g *guards) replace(orig nativeFunc, all bool) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		objectCoercible(orig, call.This)
		search, replaceValue := call.Argument(0), call.Argument(1)
		if o, ok := search.(*goja.Object); ok {
			// A RegExp's replacer is guarded apart; goja reads and calls
			// it. An object whose Symbol.match and Symbol.replace read
			// quietly as absent (goja reads both for replaceAll, the
			// second for replace) takes the string path here.
			if isProxy(o) || o.ClassName() == "RegExp" {
				return orig(call)
			}
			if _, known := g.quietSymbol(o, goja.SymMatch); !known && all {
				return orig(call)
			}
			if m, known := g.quietSymbol(o, goja.SymReplace); !known || m {
				return orig(call)
			}
			if all && o.GetSymbol(goja.SymMatch) != nil {
				return orig(call)
			}
		}
		s := g.thisString(call.This)
		searchStr := g.toStr(search)
		delegate := func(rv goja.Value) goja.Value {
			return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{searchStr, rv}})
		}
		n, m := int64(s.Length()), int64(searchStr.Length())
		most := int64(1)
		if all {
			most = n/max(m, 1) + 1
		}
		rcall, isFn := callable(replaceValue)
		if _, isObj := replaceValue.(*goja.Object); !isObj || isFn {
			// Nothing observable is left before goja's search: a
			// replacement small enough for every match passes.
			if most < g.loop && (isFn || substitutionBound(g.toStr(replaceValue), n, m, most) < reserveFloor/2) {
				return delegate(replaceValue)
			}
		}
		hay := newSearchable(s)
		var matches []int64
		for pos := hay.index(searchStr, 0); pos >= 0; pos = hay.index(searchStr, pos+max(1, m)) {
			if len(matches)%guardStride == 0 {
				g.checkpoint()
			}
			matches = append(matches, pos)
			if !all {
				break
			}
		}
		var replaceStr goja.String
		if !isFn {
			replaceStr = g.toStr(replaceValue)
		}
		count := int64(len(matches))
		if count == 0 {
			return s
		}
		if !isFn {
			ascii := isASCII(s) && isASCII(replaceStr)
			bound := substitutionBound(replaceStr, n, m, count)
			if count < g.loop && bound*unitBytes(ascii) < reserveFloor {
				return delegate(replaceStr)
			}
			g.reserve(bound*unitBytes(ascii) + count*3*8)
			if count < g.loop {
				return delegate(replaceStr)
			}
		} else if count < g.loop {
			return delegate(replaceValue)
		}
		// goja's stringReplace, a match at a time.
		var b goja.StringBuilder
		var meter growth
		size, last := int64(0), int64(0)
		write := func(str goja.String) {
			b.WriteString(str)
			size += int64(str.Length())
		}
		for i, pos := range matches {
			if i%guardStride == 0 {
				g.checkpoint()
				g.grow(&meter, 2*size)
			}
			if pos != last {
				write(s.Substring(int(last), int(pos)))
			}
			matched := s.Substring(int(pos), int(pos+m))
			if isFn {
				write(g.toStr(rcall(goja.FunctionCall{
					This:      goja.Undefined(),
					Arguments: []goja.Value{matched, g.vm.ToValue(pos), s},
				})))
			} else {
				writeSubstitution(write, s, pos, matched, replaceStr)
			}
			last = pos + m
		}
		if last != n {
			write(s.Substring(int(last), int(n)))
		}
		return b.String()
	}
}

// substitutionBound bounds the length of the result of replacing count
// matches of an m-unit string in an n-unit one with template t.
func substitutionBound(t goja.String, n, m, count int64) int64 {
	var lit, amp, whole int64
	tl := t.Length()
	for i := 0; i < tl; i++ {
		if t.CharAt(i) == '$' && i < tl-1 {
			switch t.CharAt(i + 1) {
			case '&':
				amp++
			case '`', '\'':
				whole++
			default:
				lit += 2
			}
			i++
			continue
		}
		lit++
	}
	per := lit + amp*m
	bound := n + count*per
	if whole > 0 {
		if count > math.MaxInt64/(whole*n+1)/4 {
			return math.MaxInt64 / 4
		}
		bound += count * whole * n
	}
	return bound
}

// writeSubstitution is goja's GetSubstitution for a match of a string
// (no captures: "$1" stays as written).
func writeSubstitution(write func(goja.String), s goja.String, pos int64, matched, t goja.String) {
	n := s.Length()
	tail := int(pos) + matched.Length()
	tl := t.Length()
	lit := 0 // the start of the literal run not yet written
	for i := 0; i < tl; i++ {
		if t.CharAt(i) != '$' || i == tl-1 {
			continue
		}
		if lit < i {
			write(t.Substring(lit, i))
		}
		switch t.CharAt(i + 1) {
		case '$':
			write(t.Substring(i, i+1))
		case '`':
			write(s.Substring(0, int(pos)))
		case '\'':
			if tail < n {
				write(s.Substring(tail, n))
			}
		case '&':
			write(matched)
		default:
			write(t.Substring(i, i+2))
		}
		i++
		lit = i + 1
	}
	if lit < tl {
		write(t.Substring(lit, tl))
	}
}

// searchable is a string to search in linear time: goja's own search of
// UTF-16 text compares at every position, n×m units for a needle of m.
type searchable struct {
	ascii string   // the text, when it is ASCII
	units []uint16 // the text's UTF-16 units otherwise
}

func newSearchable(s goja.String) searchable {
	if isASCII(s) {
		return searchable{ascii: s.String()}
	}
	return searchable{units: unitsOf(s)}
}

// unitsOf is s's UTF-16 code units.
func unitsOf(s goja.String) []uint16 {
	u := make([]uint16, s.Length())
	for i := range u {
		u[i] = s.CharAt(i)
	}
	return u
}

// index is goja's String index: the first match at or after start, or -1.
func (h searchable) index(needle goja.String, start int64) int64 {
	if h.units == nil {
		if !isASCII(needle) || start > int64(len(h.ascii)) {
			return -1
		}
		p := strings.Index(h.ascii[start:], needle.String())
		if p < 0 {
			return -1
		}
		return int64(p) + start
	}
	return indexUnits(h.units, unitsOf(needle), start)
}

// lastIndex is goja's String lastIndex: the last match starting at or
// before pos, or -1.
func (h searchable) lastIndex(needle goja.String, pos int64) int64 {
	if h.units == nil {
		if !isASCII(needle) {
			return -1
		}
		a := needle.String()
		end := pos + int64(len(a))
		ss := h.ascii
		if end <= int64(len(ss)) {
			ss = ss[:end]
		}
		return int64(strings.LastIndex(ss, a))
	}
	nu := unitsOf(needle)
	if maxStart := int64(len(h.units) - len(nu)); pos > maxStart {
		pos = maxStart
	}
	if pos < 0 {
		return -1
	}
	// The last match at or before pos is the first of the reversed text
	// at or after its mirror.
	rev := func(u []uint16) []uint16 {
		r := make([]uint16, len(u))
		for i, c := range u {
			r[len(u)-1-i] = c
		}
		return r
	}
	hr := rev(h.units[:pos+int64(len(nu))])
	p := indexUnits(hr, rev(nu), 0)
	if p < 0 {
		return -1
	}
	return int64(len(hr)) - p - int64(len(nu))
}

// indexUnits finds needle in hay from start on (Knuth–Morris–Pratt).
func indexUnits(hay, needle []uint16, start int64) int64 {
	if len(needle) == 0 {
		if start <= int64(len(hay)) {
			return start
		}
		return -1
	}
	fail := make([]int, len(needle))
	for i, k := 1, 0; i < len(needle); i++ {
		for k > 0 && needle[i] != needle[k] {
			k = fail[k-1]
		}
		if needle[i] == needle[k] {
			k++
		}
		fail[i] = k
	}
	for i, k := start, 0; i < int64(len(hay)); i++ {
		for k > 0 && hay[i] != needle[k] {
			k = fail[k-1]
		}
		if hay[i] == needle[k] {
			k++
		}
		if k == len(needle) {
			return i - int64(len(needle)) + 1
		}
	}
	return -1
}

// stringSearch guards indexOf and lastIndexOf on UTF-16 text, whose search
// in goja takes the receiver's length times the needle's.
func (g *guards) stringSearch(orig nativeFunc, last bool) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		s := g.thisString(call.This)
		target := g.toStr(call.Argument(0))
		num := call.Argument(1).ToNumber()
		n, m := int64(s.Length()), int64(target.Length())
		if m < 64 || (n-m)*m < g.strNative<<4 || isASCII(s) {
			return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{target, num}})
		}
		g.checkpoint()
		h := newSearchable(s)
		if last {
			pos := n
			if !goja.IsNaN(num) {
				pos = min(max(num.ToInteger(), 0), n)
			}
			return g.vm.ToValue(h.lastIndex(target, pos))
		}
		pos := min(max(num.ToInteger(), 0), n)
		return g.vm.ToValue(h.index(target, pos))
	}
}

// stringIncludes guards includes as stringSearch guards indexOf.
func (g *guards) stringIncludes(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		objectCoercible(orig, call.This)
		search := call.Argument(0)
		if _, ok := search.(*goja.Object); ok {
			return orig(call)
		}
		s := g.thisString(call.This)
		target := g.toStr(search)
		var pos int64
		posArg := call.Argument(1)
		if !goja.IsUndefined(posArg) {
			pos = posArg.ToInteger()
			posArg = g.vm.ToValue(pos)
		}
		n, m := int64(s.Length()), int64(target.Length())
		if m < 64 || (n-m)*m < g.strNative<<4 || isASCII(s) {
			return orig(goja.FunctionCall{This: s, Arguments: []goja.Value{target, posArg}})
		}
		g.checkpoint()
		return g.vm.ToValue(newSearchable(s).index(target, min(max(pos, 0), n)) != -1)
	}
}

// stringRaw guards String.raw, which loops to the raw strings' length in
// one call.
func (g *guards) stringRaw(orig nativeFunc) nativeFunc {
	return func(call goja.FunctionCall) goja.Value {
		cooked := call.Argument(0).ToObject(g.vm)
		rawValue := cooked.Get("raw")
		if rawValue == nil {
			rawValue = goja.Undefined()
		}
		raw := rawValue.ToObject(g.vm)
		segments := toLength(raw.Get("length"))
		if segments <= 0 {
			return g.vm.ToValue("")
		}
		var b goja.StringBuilder
		var meter growth
		size := int64(0)
		write := func(v goja.Value) {
			if v == nil {
				v = goja.Undefined()
			}
			str := g.toStr(v)
			b.WriteString(str)
			size += int64(str.Length())
		}
		subs := int64(len(call.Arguments) - 1)
		for next := int64(0); ; next++ {
			if next%guardStride == 0 {
				g.checkpoint()
				g.grow(&meter, 2*size)
			}
			write(raw.Get(key(next)))
			if next+1 == segments {
				return b.String()
			}
			if next < subs {
				write(call.Arguments[next+1])
			}
		}
	}
}
