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
// is refused as invalid rather than parsed: no host (253 bytes in DNS) or
// credential a program sends comes near it.
const maxAuthorityBytes = 2048

// parseURL parses input against an optional base.
func parseURL(input string, base *webURL) (*webURL, error) {
	if authorityTooLong(input) {
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
	return &webURL{u}, nil
}

// authorityTooLong reports whether the authority the parser may read in
// input is longer than maxAuthorityBytes. It over-estimates: it counts from
// the first character after the scheme and its slashes up to the next '/',
// '?' or '#', for every input that has an authority (a special scheme,
// "scheme://", or a relative "//").
func authorityTooLong(input string) bool {
	s := cleanInput(input)
	if scheme, rest, ok := splitScheme(s); ok {
		if !isSpecial(scheme) && !strings.HasPrefix(rest, "//") {
			return false // an opaque path, or a path without a host
		}
		s = rest
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
// for an href that does not parse, a field with no setter, or a host value
// past maxAuthorityBytes.
func setURLPart(href, field, value string) *webURL {
	w, err := parseURL(href, nil)
	if err != nil {
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
		u.SetPathname(value)
	case "search":
		u.SetSearch(value)
	case "hash":
		u.SetHash(value)
	default:
		return nil
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
