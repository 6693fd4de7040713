package sandbox

// Nesting depth is checked before any parser sees a source: goja's parser
// and esbuild's both recurse on the Go stack, and goja's dies with a fatal,
// unrecoverable stack overflow on source nested about 300 000 deep (a few
// hundred kilobytes of parentheses). The check is not a parser. It walks the
// source once, skipping string literals, template text, comments and
// regular-expression literals, and counts the brackets that remain. Where it
// cannot tell a regular expression from a division it errs towards counting,
// so a real program is never rejected for brackets inside a regex it took for
// code unless they open deeper than the bound.

// maxNestingExceeded reports the line where src first nests brackets deeper
// than limit, or 0 when it never does.
func maxNestingExceeded(src string, limit int) int {
	var stack []byte // '(' '[' '{' or '$' for a template substitution
	// kwParen records, per open '(', whether a keyword such as if or while
	// came right before it: then a '/' after its ')' starts a regex.
	var kwParen []bool
	line := 1
	// regexOK says whether a '/' here would start a regular expression.
	regexOK := true
	i := 0
	n := len(src)
	push := func(c byte, kw bool) bool {
		stack = append(stack, c)
		kwParen = append(kwParen, kw)
		return len(stack) > limit
	}
	pop := func() (byte, bool) {
		if len(stack) == 0 {
			return 0, false
		}
		c, kw := stack[len(stack)-1], kwParen[len(kwParen)-1]
		stack = stack[:len(stack)-1]
		kwParen = kwParen[:len(kwParen)-1]
		return c, kw
	}
	lastWord := ""
	// template scans template text from i (just past '`' or a closing '}'
	// of a substitution) to its end or to the next "${".
	template := func() bool {
		for i < n {
			c := src[i]
			switch {
			case c == '\\':
				i += 2
				continue
			case c == '\n':
				line++
			case c == '`':
				i++
				regexOK = false
				return false
			case c == '$' && i+1 < n && src[i+1] == '{':
				i += 2
				regexOK = true
				return push('$', false)
			}
			i++
		}
		return false
	}
	for i < n {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '/' && i+1 < n && src[i+1] == '/':
			for i < n && src[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < n && src[i+1] == '*':
			i += 2
			for i < n && !(src[i] == '*' && i+1 < n && src[i+1] == '/') {
				if src[i] == '\n' {
					line++
				}
				i++
			}
			i += 2
		case c == '\'' || c == '"':
			i++
			for i < n && src[i] != c && src[i] != '\n' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
			regexOK = false
			lastWord = ""
		case c == '`':
			i++
			if template() {
				return line
			}
			lastWord = ""
		case c == '/' && regexOK:
			// A regular expression ends on its line; if no closing '/' is
			// found there, it was a division after all.
			j := i + 1
			inClass := false
			closed := false
			for j < n && src[j] != '\n' {
				ch := src[j]
				if ch == '\\' {
					j += 2
					continue
				}
				if ch == '[' {
					inClass = true
				} else if ch == ']' {
					inClass = false
				} else if ch == '/' && !inClass {
					closed = true
					break
				}
				j++
			}
			if closed {
				i = j + 1
				regexOK = false
			} else {
				i++
				regexOK = true
			}
			lastWord = ""
		case c == '(' || c == '[' || c == '{':
			kw := c == '(' && (lastWord == "if" || lastWord == "while" || lastWord == "for" || lastWord == "with")
			if push(c, kw) {
				return line
			}
			i++
			regexOK = true
			lastWord = ""
		case c == ')' || c == ']' || c == '}':
			open, kw := pop()
			i++
			lastWord = ""
			if open == '$' && c == '}' {
				if template() {
					return line
				}
				continue
			}
			// After ')' of if(…) or while(…) a statement starts, so a '/'
			// opens a regex; after '}' a block may have ended, so count a
			// following '/' as a regex too (a division after an object
			// literal is rare, and reading one as a regex only skips text
			// up to the next '/' on that line).
			regexOK = kw || c == '}'
		case isWordByte(c):
			j := i
			for j < n && isWordByte(src[j]) {
				j++
			}
			lastWord = src[i:j]
			i = j
			switch lastWord {
			case "return", "typeof", "case", "do", "else", "in", "instanceof", "new",
				"delete", "void", "throw", "yield", "await", "of":
				regexOK = true
			default:
				regexOK = false
			}
		default:
			// Any other punctuator (or a non-ASCII byte): an operator
			// leaves room for an operand, so a '/' next opens a regex.
			i++
			regexOK = c < 0x80
			lastWord = ""
		}
	}
	return 0
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}
