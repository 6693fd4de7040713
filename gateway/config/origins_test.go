package config

import (
	"strings"
	"testing"
)

// An allowedOrigins entry no browser's Origin could match is refused with
// what to write instead, at its line.
func TestAllowedOriginsThatCanNeverMatch(t *testing.T) {
	cases := []struct{ entry, want string }{
		{`"https://app.example.com/"`, `"https://app.example.com/" can never match: an origin has no path, query or fragment; write "https://app.example.com"`},
		{`"app.example.com/ui"`, `"app.example.com/ui" can never match: an origin has no path, query or fragment; write "app.example.com"`},
		{`"https://app.example.com:443"`, `"https://app.example.com:443" can never match: browsers leave the default port out of an origin; write "https://app.example.com"`},
		{`"http://127.0.0.1:80"`, `"http://127.0.0.1:80" can never match: browsers leave the default port out of an origin; write "http://127.0.0.1"`},
		{`"ws://app.example.com"`, `"ws://app.example.com" can never match: browsers send the origins of http:// and https:// pages only`},
		{`"null"`, `"null" can never match: it is the opaque origin of file:// and sandboxed pages, which the gateway always refuses`},
		{`"https://"`, `"https://" names no host: write a host pattern (app.example.com, *.example.com) or an origin (https://app.example.com)`},
		{`""`, `"" names no host: write a host pattern (app.example.com, *.example.com) or an origin (https://app.example.com)`},
		{`"http//app.example.com"`, `"http//app.example.com" can never match: a scheme is followed by "://"; write "http://app.example.com"`},
		{`"HTTPS:/app.example.com:8443/ui"`, `"HTTPS:/app.example.com:8443/ui" can never match: a scheme is followed by "://"; write "https://app.example.com:8443"`},
		{`"https:///app.example.com"`, `"https:///app.example.com" can never match: a scheme is followed by "://"; write "https://app.example.com"`},
		{`"http//app.example.com:80"`, `"http//app.example.com:80" can never match: a scheme is followed by "://"`},
		{`"*"`, `"*" is refused: it lets a page of any origin connect with a tenant's credential; list the origins of your pages, or set allowAnyOrigin: true on the route if every origin may`},
		{`"HTTPS://**"`, `"HTTPS://**" is refused: it lets a page of any https:// origin connect with a tenant's credential; list the origins of your pages, or set allowAnyOrigin: true on the route if every origin may`},
		{`"https://user@app.example.com"`, `"https://user@app.example.com" can never match: an origin has no user name`},
		{`" app.example.com"`, `" app.example.com" can never match: an origin holds no spaces`},
		{`"[app.example.com"`, `"[app.example.com" can never match: a host in brackets is an IPv6 address, such as [::1]:8000`},
		{`"app[.example.com"`, `"app[.example.com" is not a valid pattern (syntax error in pattern); use * and ? for parts of a host`},
	}
	for _, c := range cases {
		src := strings.Replace(good, "    kind: executor\n", "    kind: executor\n    allowedOrigins:\n      - "+c.entry+"\n", 1)
		want := "c.yaml:15: routes[0].allowedOrigins[0]: " + c.want
		if got := problems(t, src, 2); len(got) != 1 || got[0] != want {
			t.Errorf("%s: got:\n%s\nwant:\n%s", c.entry, strings.Join(got, "\n"), want)
		}
	}
	src := strings.Replace(good, "    kind: executor\n", "    kind: executor\n    allowedOrigins: [\"http://127.0.0.1:8000\", \"*.example.com\", \"https://*.example.org:8443\", \"localhost:3000\"]\n", 1)
	if got := problems(t, src, 2); got != nil {
		t.Fatalf("valid entries refused:\n%s", strings.Join(got, "\n"))
	}
}

// allowAnyOrigin is how a route lets every origin connect; beside
// allowedOrigins it is refused, since the list would mean nothing.
func TestAllowAnyOrigin(t *testing.T) {
	src := strings.Replace(good, "    kind: executor\n", "    kind: executor\n    allowAnyOrigin: true\n", 1)
	cfg, err := Parse("c.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o := cfg.Routes[0].Origins; len(o) != 1 || !o[0].Matches("https", "anything.example:8443") || !o[0].Matches("http", "127.0.0.1") {
		t.Fatalf("allowAnyOrigin gave %v", o)
	}
	src = strings.Replace(good, "    kind: executor\n", "    kind: executor\n    allowedOrigins: [app.example.com]\n    allowAnyOrigin: true\n", 1)
	want := "c.yaml:15: routes[0].allowAnyOrigin: lets every origin connect, so allowedOrigins would add nothing: keep one of the two"
	if got := problems(t, src, 2); len(got) != 1 || got[0] != want {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}

func TestOriginPatternMatches(t *testing.T) {
	for _, c := range []struct {
		entry, scheme, host string
		want                bool
	}{
		{"http://127.0.0.1:8000", "http", "127.0.0.1:8000", true},
		{"http://127.0.0.1:8000", "https", "127.0.0.1:8000", false},
		{"http://127.0.0.1:8000", "http", "127.0.0.1", false},
		{"*.example.com", "https", "a.example.com", true},
		{"*.example.com", "http", "A.Example.COM", true},
		{"*.example.com", "https", "example.com", false},
		{"https://*.example.com", "http", "a.example.com", false},
		{"http://[::1]:8000", "http", "[::1]:8000", true},
		{"[::1]:8000", "https", "[::1]:8000", true},
		{"http://[::1]:8000", "http", "1:8000", false},
	} {
		p, err := ParseOrigin(c.entry)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Matches(c.scheme, c.host); got != c.want {
			t.Errorf("%s against %s://%s: %v, want %v", c.entry, c.scheme, c.host, got, c.want)
		}
	}
}
