package protocol

import "strings"

// Provider names.
//
// Every provider becomes a declaration in the entry module (const <name> =
// its proxy), so its name must be something that declaration can bind and
// that shadows nothing the entry scope relies on. ValidateProviders applies
// the contract's four rules in this order, one error class each:
//
//  1. InvalidProviderNameError: ASCII letters, digits, _ and $ only, not
//     starting with a digit, not empty.
//  2. KeywordProviderNameError: not an ECMAScript reserved word, the
//     strict-mode ones included (the entry module is strict code).
//  3. ReservedProviderNameError: not a name the entry scope reserves (the
//     set below).
//  4. DuplicateProviderNameError: not a name an earlier descriptor took.
//
// Tool names are not checked: every property read goes through the proxy's
// get trap, so any string arrives at the dispatch as data and is never
// declared. Nor are lengths or counts bounded here: a provider list reaches
// the executor inside a wire message, which the transport already bounds,
// and validation is linear in its size.

// entryScopeReserved lists every name the entry scope reserves, grouped by
// the reason it is there. Reserved names cover what the generated source
// would break on, not the whole standard library.
//
// fetch and Response are deliberately outside the set. A provider may take
// either name and shadow that global inside the entry module for the whole
// run: nothing outside the entry module changes and no capability is gained
// (the sandbox's own outbound and handle machinery hold their references
// outside that scope), but a program written expecting the global finds the
// provider instead. Whether a provider list may carry them is the caller's
// decision, and an HTTP tool named fetch is a natural thing to want.
var entryScopeReserved = map[string]string{}

// reservedGroups is the set, by reason. Keep each name in one group.
var reservedGroups = []struct {
	reason string
	names  []string
}{
	{"the entry scope's dispatch and codec", []string{
		// The names the contract lists as the entry scope: the host call
		// and the dispatch codec, assembled from its parts in that scope.
		"__dispatch", "__stringifyForDispatch", "__parseForDispatch",
		"__BINARY_TAG", "__encodeBinaryValue", "__decodeBinaryValue",
		"__encodeBase64", "__decodeBase64",
	}},
	{"the generated source", []string{
		// The proxies and the entry wrapper are built from these: a get
		// trap on a Proxy, errors rethrown from the envelope, promises
		// awaited. Shadowing undefined, NaN or Infinity would change what
		// the codec's comparisons mean.
		"Proxy", "Reflect", "Object", "Promise", "Error", "TypeError",
		"Symbol", "Function", "globalThis", "undefined", "NaN", "Infinity",
	}},
	{"a host binding", []string{
		// Go-backed globals the sandbox installs into the entry scope, the
		// declared absences among them, so that a provider cannot hide a
		// capability or the text that says it is absent.
		"crypto", "TextEncoder", "TextDecoder", "atob", "btoa", "structuredClone",
		"URL", "URLSearchParams", "Headers", "Request", "AbortController",
		"AbortSignal", "DOMException", "performance", "caches",
		"CompressionStream", "DecompressionStream",
	}},
	{"a timer", []string{
		// The run clock is enforced through these.
		"setTimeout", "clearTimeout", "setInterval", "clearInterval", "queueMicrotask",
	}},
	{"a codec global", []string{
		// What the dispatch codec reads through the scope while it writes
		// and reads binary envelopes and JSON.
		"JSON", "Array", "ArrayBuffer", "SharedArrayBuffer", "DataView",
		"Uint8Array", "String", "Number", "Math",
	}},
	{"the console", []string{
		// Capture goes through it.
		"console",
	}},
}

// ecmaReservedWords are the names a strict-mode declaration cannot bind:
// the reserved words of ECMA-262 (keywords, future reserved words, the
// literals), the strict-mode future reserved words, await (reserved in
// module code), and eval and arguments, which strict mode forbids as
// binding names. Contextual words that can be bound (async, of, get, set,
// from, as, target, meta) are not here.
var ecmaReservedWords = map[string]bool{}

func init() {
	for _, w := range []string{
		"await", "break", "case", "catch", "class", "const", "continue", "debugger",
		"default", "delete", "do", "else", "enum", "export", "extends", "false",
		"finally", "for", "function", "if", "import", "in", "instanceof", "new",
		"null", "return", "super", "switch", "this", "throw", "true", "try",
		"typeof", "var", "void", "while", "with", "yield",
		// strict mode
		"implements", "interface", "let", "package", "private", "protected",
		"public", "static",
		// not bindable in strict mode
		"eval", "arguments",
	} {
		ecmaReservedWords[w] = true
	}
	for _, g := range reservedGroups {
		for _, n := range g.names {
			if _, dup := entryScopeReserved[n]; dup {
				panic("protocol: reserved name listed twice: " + n)
			}
			entryScopeReserved[n] = g.reason
		}
	}
}

// IsReservedName reports whether the entry scope reserves name: it is in
// the set above, or it begins with two underscores. The prefix keeps every
// __name free for the entry scope's own machinery (the sandbox may add more
// of them), beyond the eight the contract lists.
func IsReservedName(name string) bool {
	_, ok := entryScopeReserved[name]
	return ok || strings.HasPrefix(name, "__")
}

// ReservedNameReason says why the entry scope reserves name, "" when it does
// not.
func ReservedNameReason(name string) string {
	if r, ok := entryScopeReserved[name]; ok {
		return r
	}
	if strings.HasPrefix(name, "__") {
		return "the entry scope's own machinery"
	}
	return ""
}

// IsECMAScriptReservedWord reports whether name is a word a strict-mode
// declaration cannot bind.
func IsECMAScriptReservedWord(name string) bool { return ecmaReservedWords[name] }

// IsProviderIdentifier reports whether name has the shape rule 1 allows:
// ASCII letters, digits, _ and $, not starting with a digit, not empty.
func IsProviderIdentifier(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$':
		case c >= '0' && c <= '9':
			if i == 0 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// ValidateProviders checks every descriptor's name against the four rules
// and returns the first failure, as *InvalidProviderNameError,
// *KeywordProviderNameError, *ReservedProviderNameError or
// *DuplicateProviderNameError, or nil when every name can be declared.
func ValidateProviders(ps []ProviderDescriptor) error {
	seen := make(map[string]bool, len(ps))
	for _, p := range ps {
		switch {
		case !IsProviderIdentifier(p.Name):
			return NewInvalidProviderNameError(p.Name)
		case IsECMAScriptReservedWord(p.Name):
			return NewKeywordProviderNameError(p.Name)
		case IsReservedName(p.Name):
			return NewReservedProviderNameError(p.Name)
		case seen[p.Name]:
			return NewDuplicateProviderNameError(p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// InvalidProviderNameError: a provider name is not an identifier of the
// allowed shape (rule 1).
//
//	Provider name "<name>" cannot be declared, because a provider name is made of ASCII letters, digits, _ and $ and does not start with a digit. Rename the provider to a name of that form.
type InvalidProviderNameError struct{ Name string }

// NewInvalidProviderNameError composes the text for name.
func NewInvalidProviderNameError(name string) *InvalidProviderNameError {
	return &InvalidProviderNameError{Name: name}
}

func (e *InvalidProviderNameError) Error() string {
	return `Provider name "` + e.Name + `" cannot be declared, because a provider name is made of ASCII letters, digits, _ and $ and does not start with a digit. Rename the provider to a name of that form.`
}

// KeywordProviderNameError: a provider name is an ECMAScript reserved word
// (rule 2).
//
//	Provider name "<name>" cannot be declared, because it is an ECMAScript reserved word in strict code. Rename the provider to a name that is not a reserved word.
type KeywordProviderNameError struct{ Name string }

// NewKeywordProviderNameError composes the text for name.
func NewKeywordProviderNameError(name string) *KeywordProviderNameError {
	return &KeywordProviderNameError{Name: name}
}

func (e *KeywordProviderNameError) Error() string {
	return `Provider name "` + e.Name + `" cannot be declared, because it is an ECMAScript reserved word in strict code. Rename the provider to a name that is not a reserved word.`
}

// ReservedProviderNameError: the entry scope reserves a provider name
// (rule 3).
//
//	Provider name "<name>" is reserved by the sandbox scope for <reason>, so a provider cannot shadow it. Rename the provider to a name the scope does not reserve.
type ReservedProviderNameError struct{ Name string }

// NewReservedProviderNameError composes the text for name.
func NewReservedProviderNameError(name string) *ReservedProviderNameError {
	return &ReservedProviderNameError{Name: name}
}

func (e *ReservedProviderNameError) Error() string {
	reason := ReservedNameReason(e.Name)
	if reason == "" {
		reason = "the entry scope"
	}
	return `Provider name "` + e.Name + `" is reserved by the sandbox scope for ` + reason +
		`, so a provider cannot shadow it. Rename the provider to a name the scope does not reserve.`
}

// DuplicateProviderNameError: two descriptors name the same provider
// (rule 4).
//
//	Provider name "<name>" is declared more than once, so the entry module cannot declare it. Merge the tools into one descriptor, or rename one of the providers.
type DuplicateProviderNameError struct{ Name string }

// NewDuplicateProviderNameError composes the text for name.
func NewDuplicateProviderNameError(name string) *DuplicateProviderNameError {
	return &DuplicateProviderNameError{Name: name}
}

func (e *DuplicateProviderNameError) Error() string {
	return `Provider name "` + e.Name + `" is declared more than once, so the entry module cannot declare it. Merge the tools into one descriptor, or rename one of the providers.`
}
