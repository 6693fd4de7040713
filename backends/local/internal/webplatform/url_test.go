package webplatform

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Expected serializations follow the URL Standard's basic URL parser.
func TestParseURL(t *testing.T) {
	cases := []struct{ input, base, want string }{
		{"https://example.com", "", "https://example.com/"},
		{"HTTPS://EXAMPLE.com:443/a/./b/../c?q=1#f", "", "https://example.com/a/c?q=1#f"},
		{"http://example.com:80/", "", "http://example.com/"},
		{"http://example.com:8080/", "", "http://example.com:8080/"},
		{"http://example.com:0008080/", "", "http://example.com:8080/"},
		{"  http://example.com/\t\na b  ", "", "http://example.com/a%20b"},
		{"http://example.com/a b", "", "http://example.com/a%20b"},
		{`http:\\example.com\a\b`, "", "http://example.com/a/b"},
		{"http:///example.com/", "", "http://example.com/"},
		{"http://user:pa ss@example.com/", "", "http://user:pa%20ss@example.com/"},
		{"http://a@b@example.com/", "", "http://a%40b@example.com/"},
		{"http://example.com/?q=a b'c\"", "", "http://example.com/?q=a%20b%27c%22"},
		{"foo://example.com/?q='", "", "foo://example.com/?q='"},
		{"http://example.com/#a b`c", "", "http://example.com/#a%20b%60c"},
		{"http://example.com/é", "", "http://example.com/%C3%A9"},
		{"http://example.com/%7e", "", "http://example.com/%7e"},
		{"http://0x7f.1/", "", "http://127.0.0.1/"},
		{"http://2130706433/", "", "http://127.0.0.1/"},
		{"http://0177.0.0.1/", "", "http://127.0.0.1/"},
		{"http://192.168.0.257/", "", ""},
		{"http://1.2.3.4.5/", "", ""},
		{"http://[::1]:8080/", "", "http://[::1]:8080/"},
		{"http://[0:0:0:0:0:0:0:1]/", "", "http://[::1]/"},
		{"http://[2001:db8:0:0:1:0:0:1]/", "", "http://[2001:db8::1:0:0:1]/"},
		{"http://[::ffff:127.0.0.1]/", "", "http://[::ffff:7f00:1]/"},
		{"http://[::1/", "", ""},
		{"http://exa mple.com/", "", ""},
		{"http://example.com:99999/", "", ""},
		{"http://example.com:8a/", "", ""},
		{"http://", "", ""},
		{"http://ex%41mple.com/", "", "http://example.com/"},
		{"http://münchen.de/", "", "http://xn--mnchen-3ya.de/"},
		{"mailto:someone@example.com", "", "mailto:someone@example.com"},
		{"data:text/plain,hi there", "", "data:text/plain,hi there"},
		{"foo:/a/../b", "", "foo:/b"},
		{"foo://Host/x", "", "foo://Host/x"},
		{"file:///etc/hosts", "", "file:///etc/hosts"},
		{"file://localhost/etc", "", "file:///etc"},
		{"no-scheme", "", ""},
		{"", "", ""},
		// Relative references.
		{"b/c", "http://example.com/a/d?x#y", "http://example.com/a/b/c"},
		{"../c", "http://example.com/a/b/d", "http://example.com/a/c"},
		{"../../../../c", "http://example.com/a/", "http://example.com/c"},
		{"/c", "http://example.com/a/b", "http://example.com/c"},
		{"//other.org/p", "https://example.com/a", "https://other.org/p"},
		{`\\other.org\p`, "https://example.com/a", "https://other.org/p"},
		{"?q=2", "http://example.com/a/b?q=1#f", "http://example.com/a/b?q=2"},
		{"#g", "http://example.com/a/b?q=1#f", "http://example.com/a/b?q=1#g"},
		{"", "http://example.com/a/b?q=1#f", "http://example.com/a/b?q=1"},
		{"http:c", "http://example.com/a/b", "http://example.com/a/c"},
		{"https:c", "http://example.com/a/b", "https://c/"},
		{".", "http://example.com/a/b", "http://example.com/a/"},
		{"..", "http://example.com/a/b/c", "http://example.com/a/"},
		{"%2e%2E/x", "http://example.com/a/b/c", "http://example.com/a/x"},
		{"x", "mailto:a@b", ""},
		{"#x", "mailto:a@b", "mailto:a@b#x"},
		{"b", "foo://h/a/c", "foo://h/a/b"},
		// An authority past maxAuthorityBytes is refused; only an input
		// that has one is measured.
		{"http://" + strings.Repeat("a", maxAuthorityBytes-2) + "@x/", "", "http://" + strings.Repeat("a", maxAuthorityBytes-2) + "@x/"},
		{"http://" + strings.Repeat("a", maxAuthorityBytes-1) + "@x/", "", ""},
		{"http:" + strings.Repeat("@", maxAuthorityBytes+1), "", ""},
		{"foo://" + strings.Repeat("%", maxAuthorityBytes+1), "", ""},
		{"//" + strings.Repeat("@", maxAuthorityBytes) + "x/", "http://example.com/", ""},
		{"//" + strings.Repeat("@", maxAuthorityBytes) + "x/", "foo://h/", ""},
		{"http://x/" + strings.Repeat("a@", maxAuthorityBytes), "", "http://x/" + strings.Repeat("a@", maxAuthorityBytes)},
		{"mailto:" + strings.Repeat("a", maxAuthorityBytes) + "@example.com", "", "mailto:" + strings.Repeat("a", maxAuthorityBytes) + "@example.com"},
		{strings.Repeat("a", maxAuthorityBytes) + "@b", "http://example.com/", "http://example.com/" + strings.Repeat("a", maxAuthorityBytes) + "@b"},
		// The bounds hold for the href too, which percent-encoding lengthens.
		{"http://" + strings.Repeat(" ", maxAuthorityBytes/2) + "@x/", "", ""},
		{"http://x/" + strings.Repeat("é", maxURLBytes/4), "", ""},
		// So is a hierarchical path past maxPathCost (separators times bytes);
		// an opaque path, a query or a fragment is not one.
		{"http://x/" + strings.Repeat("a/", 1100), "", "http://x/" + strings.Repeat("a/", 1100)},
		{"http://x/" + strings.Repeat("a/", 1500), "", ""},
		{strings.Repeat("b/", 500), "http://x/" + strings.Repeat("a/", 1000), ""},
		{"http://x/?" + strings.Repeat("a/", 100000), "", "http://x/?" + strings.Repeat("a/", 100000)},
		{"data:," + strings.Repeat("a/", 100000), "", "data:," + strings.Repeat("a/", 100000)},
		// So is an input past maxURLBytes.
		{"data:," + strings.Repeat("a", maxURLBytes-len("data:,")), "", "data:," + strings.Repeat("a", maxURLBytes-len("data:,"))},
		{"data:," + strings.Repeat("a", maxURLBytes-len("data:,")+1), "", ""},
	}
	for _, c := range cases {
		var base *webURL
		if c.base != "" {
			b, err := parseURL(c.base, nil)
			if err != nil {
				t.Fatalf("base %q: %v", c.base, err)
			}
			base = b
		}
		u, err := parseURL(c.input, base)
		got := ""
		if err == nil {
			got = u.href()
		}
		if got != c.want {
			t.Errorf("parse(%q, %q) = %q, want %q", c.input, c.base, got, c.want)
		}
		if err == nil {
			// A serialized URL parses back to itself.
			again, err := parseURL(got, nil)
			if err != nil || again.href() != got {
				t.Errorf("reparse of %q gave %v %v", got, again, err)
			}
		}
	}
}

func TestURLGlobal(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"components", `const u = new URL('https://user:pw@Example.com:8443/p/a?x=1&y=2#frag');
			return [u.href, u.protocol, u.username, u.password, u.host, u.hostname, u.port, u.pathname, u.search, u.hash, u.origin]`,
			`["https://user:pw@example.com:8443/p/a?x=1&y=2#frag","https:","user","pw","example.com:8443","example.com","8443","/p/a","?x=1&y=2","#frag","https://example.com:8443"]`},
		{"relative with base", `return new URL('../x?y', 'https://a.example/b/c/d').href`, `"https://a.example/b/x?y"`},
		{"base as URL object", `return new URL('x', new URL('https://a.example/b/')).href`, `"https://a.example/b/x"`},
		{"invalid throws TypeError", `new URL('/relative')`, rejected("TypeError", "Failed to construct 'URL': Invalid URL: /relative")},
		{"canParse and parse", `return [URL.canParse('https://x'), URL.canParse('nope'), URL.parse('nope'), URL.parse('b', 'https://x/a').href]`,
			`[true,false,null,"https://x/b"]`},
		{"empty search and hash read as empty", `const u = new URL('https://x/?#'); return [u.search, u.hash, u.href]`, `["","","https://x/?#"]`},
		{"opaque origin", `return [new URL('data:text/plain,x').origin, new URL('file:///a').origin]`, `["null","null"]`},
		{"setters", `const u = new URL('https://x.example/a?q=1#h');
			u.pathname = '/b c'; u.search = 'r=2'; u.hash = 'k'; u.port = '8080'; u.hostname = 'Y.example'; u.username = 'me'; u.protocol = 'http';
			return u.href`, `"http://me@y.example:8080/b%20c?r=2#k"`},
		{"default port setter clears it", `const u = new URL('https://x/'); u.port = '443'; return u.href`, `"https://x/"`},
		{"invalid setters are ignored", `const u = new URL('https://x/'); u.port = 'abc'; u.hostname = ''; u.protocol = 'mailto'; return u.href`, `"https://x/"`},
		{"href setter throws on invalid", `const u = new URL('https://x/'); u.href = 'nope'`, rejected("TypeError", "Failed to set the 'href' property on 'URL': Invalid URL: nope")},
		{"toString and JSON", `const u = new URL('https://x/y'); return [String(u), JSON.stringify({u})]`, `["https://x/y","{\"u\":\"https://x/y\"}"]`},
		{"searchParams reads the query", `const u = new URL('https://x/?a=1&b=two+words&a=%C3%A9'); return [u.searchParams.getAll('a'), u.searchParams.get('b')]`,
			`[["1","é"],"two words"]`},
		{"searchParams writes back", `const u = new URL('https://x/p?a=1#h'); u.searchParams.append('b', 'x y&z'); u.searchParams.delete('a'); return u.href`,
			`"https://x/p?b=x+y%26z#h"`},
		{"emptying searchParams drops the ?", `const u = new URL('https://x/p?a=1'); u.searchParams.delete('a'); return u.href`, `"https://x/p"`},
		{"search setter updates searchParams", `const u = new URL('https://x/'); const sp = u.searchParams; u.search = '?k=v'; return sp.get('k')`, `"v"`},
		{"a host setter past the authority bound is ignored", `const u = new URL('https://x/'); u.hostname = 'a'.repeat(2049); u.host = 'b'.repeat(2049) + ':1';
			const before = u.href; u.hostname = 'c'.repeat(2048); return [before, u.hostname.length]`, `["https://x/",2048]`},
		{"a pathname past the path cost bound is ignored", `const u = new URL('https://x/'); u.pathname = 'a/'.repeat(2000); const before = u.href;
			u.pathname = 'a/'.repeat(1000); return [before, u.pathname.length]`, `["https://x/",2001]`},
		{"a setter that makes the href past 2 MiB is ignored", `const u = new URL('https://x/'); u.hash = 'h'.repeat(2 * 1024 * 1024 - 10); const before = u.href;
			u.hash = 'h'.repeat(2 * 1024 * 1024 - 11); return [before, u.href.length]`, `["https://x/",2097152]`},
		{"members are prototype accessors", `return [Object.keys(new URL('https://x/')).length, typeof Object.getOwnPropertyDescriptor(URL.prototype, 'href').get]`, `[0,"function"]`},
		{"the prototype's members, their order and names", `return Reflect.ownKeys(URL.prototype).map((k) => {
			const d = Object.getOwnPropertyDescriptor(URL.prototype, k);
			return [String(k), d.enumerable, d.get?.name ?? null, d.set?.name ?? null, typeof d.value === 'function' ? d.value.name : null];
		})`, `[["constructor",false,null,null,"URL"],["href",true,"get href","set href",null],["origin",true,"get origin",null,null],` +
			`["protocol",true,"get protocol","set protocol",null],["username",true,"get username","set username",null],` +
			`["password",true,"get password","set password",null],["host",true,"get host","set host",null],` +
			`["hostname",true,"get hostname","set hostname",null],["port",true,"get port","set port",null],` +
			`["pathname",true,"get pathname","set pathname",null],["search",true,"get search","set search",null],` +
			`["hash",true,"get hash","set hash",null],["searchParams",false,"get searchParams",null,null],` +
			`["toString",false,null,null,"toString"],["toJSON",false,null,null,"toJSON"],["Symbol(Symbol.toStringTag)",false,null,null,null]]`},
		{"members refuse another receiver and are not constructors", `const r = [];
			for (const k of ['href', 'protocol', 'searchParams']) {
				try { Object.getOwnPropertyDescriptor(URL.prototype, k).get.call({}); } catch (e) { r.push(e.constructor.name + ': ' + e.message); }
			}
			try { new URL.prototype.toJSON(); } catch (e) { r.push(e.constructor.name + ': ' + e.message); }
			return r`, `["TypeError: Cannot read private member #parts from an object whose class did not declare it",` +
			`"TypeError: Cannot read private member #parts from an object whose class did not declare it",` +
			`"TypeError: Cannot read private member #query from an object whose class did not declare it","TypeError: Value is not a constructor"]`},
	})
}

func TestURLSearchParams(t *testing.T) {
	runCases(t, disabled, []programCase{
		{"from string", `return [...new URLSearchParams('?a=1&b=2&a=3&c&=d')]`, `[["a","1"],["b","2"],["a","3"],["c",""],["","d"]]`},
		{"from record and pairs", `return [new URLSearchParams({x: 1, y: 'z'}).toString(), new URLSearchParams([['a', 'b'], ['c', 'd']]).toString()]`, `["x=1&y=z","a=b&c=d"]`},
		{"bad pair", `new URLSearchParams([['a']])`, rejected("TypeError", "Failed to construct 'URLSearchParams': Each query pair must be an iterable [name, value] tuple.")},
		{"serializer escapes", `return new URLSearchParams({'a b': "~!'()*-._é&="}).toString()`, `"a+b=%7E%21%27%28%29*-._%C3%A9%26%3D"`},
		{"set, has with value, delete with value, size", `const p = new URLSearchParams('a=1&b=2&a=3');
			p.set('a', 'x'); const r = [p.toString(), p.has('b', '2'), p.has('b', '3')]; p.delete('b', '3'); r.push(p.size); p.delete('b', '2'); r.push(p.toString()); return r`,
			`["a=x&b=2",true,false,2,"a=x"]`},
		{"sort is stable by code units", `const p = new URLSearchParams('z=1&a=2&z=0&B=3&a=1'); p.sort(); return p.toString()`, `"B=3&a=2&a=1&z=1&z=0"`},
		{"forEach order", `const out = []; new URLSearchParams('a=1&b=2').forEach((v, k) => out.push(k + v)); return out`, `["a1","b2"]`},
		{"percent decoding is lenient", `return new URLSearchParams('a=%zz%41%E2%82').get('a')`, "\"%zzA\uFFFD\""},
	})
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"https://example.com/a?b#c", "http://[::1]:80/", "http://0x7f.1", "foo:bar", `http:\\x\y`,
		"http://a:b@c:1/d/../e", "file:///x", "//x", "http://%41.com", "http://[::ffff:1.2.3.4]", "?", "#", "http://1.2.3.4.5"} {
		f.Add(s, "")
		f.Add(s, "http://base.example/a/b?c#d")
	}
	f.Fuzz(func(t *testing.T, input, baseText string) {
		var base *webURL
		if baseText != "" {
			b, err := parseURL(baseText, nil)
			if err != nil {
				return
			}
			base = b
		}
		u, err := parseURL(input, base)
		if err != nil {
			return
		}
		href := u.href()
		if !utf8.ValidString(href) && utf8.ValidString(input) && utf8.ValidString(baseText) {
			t.Fatalf("href %q is not UTF-8", href)
		}
		if strings.ContainsAny(href, "\t\n\r") {
			t.Fatalf("href %q holds a tab or newline", href)
		}
		again, err := parseURL(href, nil)
		if err != nil {
			t.Fatalf("href %q of %q does not parse: %v", href, input, err)
		}
		if again.href() != href {
			t.Fatalf("href %q reparses as %q", href, again.href())
		}
		_ = u.parts()
		for _, field := range []string{"protocol", "host", "hostname", "port", "pathname", "search", "hash", "username"} {
			if v := setURLPart(href, field, input); v != nil {
				_ = v.href()
			}
		}
	})
}

// The parser's cost on inputs at the authority bound and on long inputs
// that have no authority to bound.
func BenchmarkParseURL(b *testing.B) {
	for _, c := range []struct {
		name, input string
		refused     bool
	}{
		{"typical", "https://user:pw@Example.com:8443/p/a/../b?x=1&y=2#frag", false},
		// Parsed whole, then refused: its href's userinfo is three times longer.
		{"userinfo at the bound", "http://" + strings.Repeat("@", maxAuthorityBytes-1) + "x/", true},
		{"path at the cost bound", "http://x/" + strings.Repeat("a/", 1400), false},
		{"512KiB path of two segments", "http://x/" + strings.Repeat("a", 1<<19) + "/b", false},
		{"1MiB query", "http://x/?" + strings.Repeat("a=@", 1<<18), false},
		{"1MiB opaque path", "data:text/plain," + strings.Repeat("a@%", 1<<18), false},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				u, err := parseURL(c.input, nil)
				if (err != nil) != c.refused {
					b.Fatalf("refused: %v", err)
				}
				if u != nil {
					_ = u.parts()
				}
			}
		})
	}
}
