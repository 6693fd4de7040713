package webplatform

import (
	"errors"
	"strings"

	whatwg "github.com/nlnwa/whatwg-url/url"
)

// webURL is a URL record of the WHATWG URL Standard. The parsing is
// github.com/nlnwa/whatwg-url's (url_wpt_test.go holds it to the
// web-platform-tests data); this file adapts it to what the glue reads.
type webURL struct{ u *whatwg.Url }

var errInvalidURL = errors.New("invalid URL")

// maxAuthorityBytes bounds the part of an input that can be read as an
// authority (userinfo, host and port). The library's userinfo and opaque
// host handling take time quadratic in their length, so a longer authority
// is refused as invalid rather than parsed; real hosts (253 bytes in DNS)
// and credentials stay below it.
const maxAuthorityBytes = 2048

// maxURLBytes bounds a whole input, as Chromium does (2 MiB): the library
// allocates about fifty bytes for each byte it reads.
const maxURLBytes = 2 << 20

// maxPathCost bounds the path separators times the bytes of a hierarchical
// path: the library serializes a path (href, pathname) in time and garbage
// of about that product. Real paths (a few KiB, tens of segments) stay far
// below it; so do long paths of few segments.
const maxPathCost = 4 << 20

// parseURL parses input against an optional base.
func parseURL(input string, base *webURL) (*webURL, error) {
	baseHref := ""
	if base != nil && !base.u.OpaquePath() {
		baseHref = base.href()
	}
	if !withinBounds(input, baseHref) {
		return nil, errInvalidURL
	}
	var u *whatwg.Url
	var err error
	if base == nil {
		u, err = whatwg.Parse(input)
	} else {
		u, err = base.u.Parse(input)
	}
	if err != nil {
		return nil, errInvalidURL
	}
	if !reparses(u) {
		return nil, errInvalidURL
	}
	return &webURL{u}, nil
}

// reparses reports whether u's href is within the bounds parseURL puts on
// an input. What is accepted must parse again from its href, where the
// setters and fetch start, and percent-encoding can make the href longer.
func reparses(u *whatwg.Url) bool { return withinBounds(u.Href(false), "") }

// withinBounds reports whether input (relative to baseHref, "" for none)
// is within every bound parseURL holds an input and its href to: its
// length, its authority's and its path's cost.
func withinBounds(input, baseHref string) bool {
	if len(input) > maxURLBytes {
		return false
	}
	in := readInput(input)
	return !in.authorityTooLong() && !in.pathTooCostly(baseHref)
}

// urlInput is an input as the basic URL parser first sees it: cleaned
// (cleanInput), and split after its scheme when it has one.
type urlInput struct {
	s, scheme, rest string
	hasScheme       bool
}

func readInput(input string) urlInput {
	in := urlInput{s: cleanInput(input)}
	in.scheme, in.rest, in.hasScheme = splitScheme(in.s)
	return in
}

// pathTooCostly reports whether the path the parser may build from in,
// with baseHref's where in is relative to it, passes maxPathCost. It
// over-estimates: it counts all of both up to '?' or '#'. An opaque path
// costs nothing.
func (in urlInput) pathTooCostly(baseHref string) bool {
	if in.hasScheme && !isSpecial(in.scheme) && !strings.HasPrefix(in.rest, "/") {
		return false
	}
	return pathCost(hierarchical(in.s), hierarchical(baseHref)) > maxPathCost
}

// pathCost is the path separators times the bytes of parts.
func pathCost(parts ...string) int {
	seps, size := 0, 0
	for _, p := range parts {
		seps += strings.Count(p, "/") + strings.Count(p, `\`)
		size += len(p)
	}
	return seps * size
}

// hierarchical cuts s at its query or fragment.
func hierarchical(s string) string {
	if end := strings.IndexAny(s, "?#"); end >= 0 {
		return s[:end]
	}
	return s
}

// authorityTooLong reports whether the authority the parser may read in in
// is longer than maxAuthorityBytes. It over-estimates: it counts from the
// first character after the scheme and its slashes up to the next '/', '?'
// or '#', for every input that has an authority (a special scheme,
// "scheme://", or a relative "//").
func (in urlInput) authorityTooLong() bool {
	s := in.s
	if in.hasScheme {
		if !isSpecial(in.scheme) && !strings.HasPrefix(in.rest, "//") {
			return false // an opaque path, or a path without a host
		}
		s = in.rest
	} else if len(s) < 2 || !isSlash(s[0]) || !isSlash(s[1]) {
		return false // a relative path, query or fragment
	}
	return runTooLong(strings.TrimLeft(s, `/\`))
}

// runTooLong reports whether s, up to its first '/', '?' or '#', is longer
// than maxAuthorityBytes.
func runTooLong(s string) bool {
	if end := strings.IndexAny(s, "/?#"); end >= 0 {
		s = s[:end]
	}
	return len(s) > maxAuthorityBytes
}

func isSlash(c byte) bool { return c == '/' || c == '\\' }

// cleanInput strips leading and trailing C0 controls and spaces, and removes
// every tab and newline, as the basic URL parser does first.
func cleanInput(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= 0x20 })
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
	}
	return s
}

// splitScheme returns the lowercased scheme and the rest after ':' when s
// starts with one.
func splitScheme(s string) (string, string, bool) {
	if s == "" || !isASCIIAlpha(s[0]) {
		return "", s, false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case isASCIIAlpha(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.':
		case c == ':':
			return strings.ToLower(s[:i]), s[i+1:], true
		default:
			return "", s, false
		}
	}
	return "", s, false
}

func isASCIIAlpha(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isSpecial(scheme string) bool {
	switch scheme {
	case "ftp", "file", "http", "https", "ws", "wss":
		return true
	}
	return false
}

// href serializes the URL.
func (w *webURL) href() string { return w.u.Href(false) }

// origin serializes the URL's origin: a tuple origin for the schemes that
// have one, the inner URL's for a blob: URL of http(s), else "null".
func (w *webURL) origin() string {
	u := w.u
	switch u.Scheme() {
	case "http", "https", "ws", "wss", "ftp":
		return u.Scheme() + "://" + u.Host()
	case "blob":
		if inner, err := parseURL(u.Pathname(), nil); err == nil && (inner.u.Scheme() == "http" || inner.u.Scheme() == "https") {
			return inner.origin()
		}
	}
	return "null"
}

// parts is the URL as the JS glue reads it: href, protocol, username,
// password, host, hostname, port, pathname, search, hash, origin.
func (w *webURL) parts() []string {
	u := w.u
	return []string{u.Href(false), u.Protocol(), u.Username(), u.Password(), u.Host(), u.Hostname(),
		u.Port(), u.Pathname(), u.Search(), u.Hash(), w.origin()}
}

// setURLPart applies one URL setter to the URL href and returns the new
// URL (the same one when the standard's setter leaves it as it is), or nil
// for an href that does not parse, a field with no setter, a value past
// maxURLBytes, a host value past maxAuthorityBytes or a pathname past
// maxPathCost (all left unread), or a result that would not parse again.
func setURLPart(href, field, value string) *webURL {
	w, err := parseURL(href, nil)
	if err != nil || len(value) > maxURLBytes {
		return nil
	}
	u := w.u
	switch field {
	case "protocol":
		u.SetProtocol(value)
	case "username":
		u.SetUsername(value)
	case "password":
		u.SetPassword(value)
	case "host", "hostname":
		if runTooLong(value) {
			return nil
		}
		if field == "host" {
			u.SetHost(value)
		} else {
			u.SetHostname(value)
		}
	case "port":
		u.SetPort(value)
	case "pathname":
		if pathCost(value, hierarchical(href)) > maxPathCost {
			return nil
		}
		u.SetPathname(value)
	case "search":
		u.SetSearch(value)
	case "hash":
		u.SetHash(value)
	default:
		return nil
	}
	if !reparses(u) {
		return nil // the setter made it too long
	}
	return w
}

// upperHex is the digits of a percent-encoded byte.
const upperHex = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// percentDecode decodes %XX sequences; a % not followed by two hex digits
// stays as it is.
func percentDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			h, ok1 := unhex(s[i+1])
			l, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				out = append(out, h<<4|l)
				i += 2
				continue
			}
		}
		out = append(out, s[i])
	}
	return out
}
