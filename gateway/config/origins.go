package config

import (
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"
)

// OriginPattern is one entry of a route's allowedOrigins: a host pattern
// ("app.example.com", "*.example.com", "127.0.0.1:8000", "[::1]:8000"),
// which any scheme may use, or an origin as a browser sends it ("http://127.0.0.1:8000",
// "https://*.example.com"), whose scheme must match too.
type OriginPattern struct {
	// Scheme is "http" or "https"; "" matches either.
	Scheme string
	// Host is a path.Match pattern over the origin's host[:port], lower
	// case.
	Host string
}

// ParseOrigin reads one allowedOrigins entry. It refuses what no browser's
// Origin header could ever match, saying what to write instead.
func ParseOrigin(entry string) (OriginPattern, error) {
	if strings.EqualFold(entry, "null") {
		return OriginPattern{}, errors.New(`"null" can never match: it is the opaque origin of file:// and sandboxed pages, which the gateway always refuses`)
	}
	if strings.TrimSpace(entry) != entry || strings.ContainsAny(entry, " \t") {
		return OriginPattern{}, fmt.Errorf("%q can never match: an origin holds no spaces", entry)
	}
	if scheme, rest, ok := misspeltScheme(entry); ok {
		fixed := scheme + "://" + rest
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			fixed = scheme + "://" + rest[:i]
		}
		if _, err := ParseOrigin(fixed); err == nil {
			return OriginPattern{}, fmt.Errorf("%q can never match: a scheme is followed by \"://\"; write %q", entry, fixed)
		}
		return OriginPattern{}, fmt.Errorf("%q can never match: a scheme is followed by \"://\"", entry)
	}
	scheme, host, full := strings.Cut(entry, "://")
	if !full {
		scheme, host = "", entry
	}
	scheme = strings.ToLower(scheme)
	if full && scheme != "http" && scheme != "https" {
		return OriginPattern{}, fmt.Errorf("%q can never match: browsers send the origins of http:// and https:// pages only", entry)
	}
	if i := strings.IndexAny(host, "/?#"); i >= 0 {
		return OriginPattern{}, fmt.Errorf("%q can never match: an origin has no path, query or fragment; write %q", entry, entryOf(scheme, host[:i]))
	}
	if strings.Contains(host, "@") {
		return OriginPattern{}, fmt.Errorf("%q can never match: an origin has no user name", entry)
	}
	if host == "" {
		return OriginPattern{}, fmt.Errorf("%q names no host: write a host pattern (app.example.com, *.example.com) or an origin (https://app.example.com)", entry)
	}
	if (scheme == "http" && strings.HasSuffix(host, ":80")) || (scheme == "https" && strings.HasSuffix(host, ":443")) {
		bare := host[:strings.LastIndex(host, ":")]
		return OriginPattern{}, fmt.Errorf("%q can never match: browsers leave the default port out of an origin; write %q", entry, entryOf(scheme, bare))
	}
	host = strings.ToLower(host)
	if strings.Trim(host, "*") == "" {
		// A pattern of every host: said on purpose with allowAnyOrigin,
		// not by a CORS habit.
		whose := "any origin"
		if scheme != "" {
			whose = "any " + scheme + ":// origin"
		}
		return OriginPattern{}, fmt.Errorf("%q is refused: it lets a page of %s connect with a tenant's credential; list the origins of your pages, or set allowAnyOrigin: true on the route if every origin may", entry, whose)
	}
	if strings.HasPrefix(host, "[") {
		// An IPv6 literal: its brackets are the address's, not a
		// character class.
		addr, _, _ := strings.Cut(host[1:], "]")
		if _, err := netip.ParseAddr(addr); err != nil || !strings.Contains(host, "]") {
			return OriginPattern{}, fmt.Errorf("%q can never match: a host in brackets is an IPv6 address, such as [::1]:8000", entry)
		}
		host = strings.NewReplacer("[", `\[`, "]", `\]`).Replace(host)
	}
	if _, err := path.Match(host, ""); err != nil {
		return OriginPattern{}, fmt.Errorf("%q is not a valid pattern (%v); use * and ? for parts of a host", entry, err)
	}
	return OriginPattern{Scheme: scheme, Host: host}, nil
}

// misspeltScheme finds an http or https scheme whose "://" is misspelt
// ("http//", "https:/", "http:///"): read as a host with a path, the entry
// would otherwise be cut to the scheme's name.
func misspeltScheme(entry string) (scheme, rest string, ok bool) {
	for _, s := range []string{"https", "http"} {
		if len(entry) <= len(s) || !strings.EqualFold(entry[:len(s)], s) {
			continue
		}
		after := entry[len(s):]
		rest = strings.TrimLeft(strings.TrimPrefix(after, ":"), "/")
		sep := after[:len(after)-len(rest)]
		if sep != "://" && strings.Contains(sep, "/") && rest != "" {
			return s, rest, true
		}
	}
	return "", "", false
}

func entryOf(scheme, host string) string {
	if scheme == "" {
		return host
	}
	return scheme + "://" + host
}

// Matches reports whether an origin of scheme and host (as a browser's
// Origin header gives them) matches p.
func (p OriginPattern) Matches(scheme, host string) bool {
	if p.Scheme != "" && !strings.EqualFold(p.Scheme, scheme) {
		return false
	}
	ok, _ := path.Match(p.Host, strings.ToLower(host))
	return ok
}
