package webplatform

import (
	"encoding/json"
	neturl "net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The web-platform-tests URL data (testdata/wpt, BSD-3-Clause) holds the
// parser to the URL Standard: every case passes except the ones listed
// here, each with the reason, so a change in either direction fails.

// knownURLFailures are the urltestdata.json cases the parser gets wrong,
// by input (and " against " base, where there is one).
var knownURLFailures = map[string]string{
	"non-special:opaque  ?hi":                      trailingSpaces,
	"non-special:opaque  #hi":                      trailingSpaces,
	"non-special:opaque \t\t  \t#hi":               trailingSpaces,
	"non-special:opaque \t\t  #hi":                 trailingSpaces,
	"non-special:opaque\t\t  \r #hi":               trailingSpaces,
	"http://a.b.c.xn--pokxncvks":                   asciiLabels,
	"http://10.0.0.xn--pokxncvks":                  asciiLabels,
	"http://a.b.c.XN--pokxncvks":                   asciiLabels,
	"http://a.b.c.Xn--pokxncvks":                   asciiLabels,
	"http://10.0.0.XN--pokxncvks":                  asciiLabels,
	"http://10.0.0.xN--pokxncvks":                  asciiLabels,
	"file://xn--/p":                                asciiLabels,
	"https://xn--/":                                asciiLabels,
	"foo://host/ !\"$%&'()*+,-./:;<=>@[\\]^_`{|}~": caretInPath,
	"wss://host/ !\"$%&'()*+,-./:;<=>@[\\]^_`{|}~": caretInPath,
}

// knownSetterFailures are the setters_tests.json cases the setters get
// wrong, by field, URL and new value.
var knownSetterFailures = map[string]string{
	"search data:space ?query ":                                 trailingSpaces,
	"search sc:space ?query ":                                   trailingSpaces,
	"search data:space  ?query#fragment ":                       trailingSpaces,
	"search sc:space  ?query#fragment ":                         trailingSpaces,
	"hash data:space" + strings.Repeat(" ", 130) + "#fragment ": trailingSpaces,
	"hash sc:space    #fragment ":                               trailingSpaces,
	"hash data:space  ?query#fragment ":                         trailingSpaces,
	"hash sc:space  ?query#fragment ":                           trailingSpaces,
	"host https://example.com/ xn--":                            asciiLabels,
	"hostname https://example.com/ xn--":                        asciiLabels,
	"pathname a:/ \x00\x01\t\n\r\x1f !\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~\u007f\u0080\u0081Éé": caretInPath,
}

// The reasons: the library follows the URL Standard as of 2023 and misses
// three later changes. None changes which host a URL names, except that
// it refuses a few hosts the standard accepts.
const (
	trailingSpaces = "keeps the spaces that end an opaque path before ? or #, or strips them when the query or fragment goes; the standard now encodes the last one as %20"
	asciiLabels    = "refuses an ASCII host label that starts with xn-- but is not valid Punycode; the standard now keeps such a host as it is"
	caretInPath    = "leaves ^ in a path; the standard's path percent-encode set now holds it"
)

// wptURLCase is one case of urltestdata.json: input against base (none
// when nil) fails to parse, or gives these members.
type wptURLCase struct {
	Input    string  `json:"input"`
	Base     *string `json:"base"`
	Failure  bool    `json:"failure"`
	Href     string  `json:"href"`
	Protocol string  `json:"protocol"`
	Username string  `json:"username"`
	Password string  `json:"password"`
	Host     string  `json:"host"`
	Hostname string  `json:"hostname"`
	Port     string  `json:"port"`
	Pathname string  `json:"pathname"`
	Search   string  `json:"search"`
	Hash     string  `json:"hash"`
	Origin   *string `json:"origin"`
}

// loadWPTURLCases reads the objects of urltestdata.json (its strings are
// section comments).
func loadWPTURLCases(t *testing.T) []wptURLCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/wpt/urltestdata.json")
	if err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		t.Fatal(err)
	}
	var cases []wptURLCase
	for _, item := range items {
		if item[0] != '{' {
			continue
		}
		var c wptURLCase
		if err := json.Unmarshal(item, &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	return cases
}

// glueParse is what the glue's urlParse native does for new URL(input,
// base): nil when either does not parse.
func glueParse(input string, base *string) *webURL {
	var b *webURL
	if base != nil {
		bu, err := parseURL(*base, nil)
		if err != nil {
			return nil
		}
		b = bu
	}
	u, err := parseURL(input, b)
	if err != nil {
		return nil
	}
	return u
}

// urlFields names the members of webURL.parts, in order.
var urlFields = []string{"href", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash", "origin"}

// mismatch compares the members the case expects with got (nil: the URL
// did not parse) and says what differs, or "".
func mismatch(want map[string]string, got *webURL) string {
	if got == nil {
		return "did not parse"
	}
	parts := got.parts()
	var diffs []string
	for i, f := range urlFields {
		if w, ok := want[f]; ok && parts[i] != w {
			diffs = append(diffs, f+" "+strconv.Quote(parts[i])+", want "+strconv.Quote(w))
		}
	}
	return strings.Join(diffs, "; ")
}

// checkKnown fails t for a case that fails and is not listed, or passes
// and is listed, and for a listed case the data does not hold.
func checkKnown(t *testing.T, known map[string]string, failed map[string]string, seen map[string]bool) {
	t.Helper()
	for name, why := range failed {
		if _, ok := known[name]; !ok {
			t.Errorf("%q: %s", name, why)
		}
	}
	for name := range known {
		_, fails := failed[name]
		switch {
		case !seen[name]:
			t.Errorf("%q is listed as failing but is not in the data", name)
		case !fails:
			t.Errorf("%q is listed as failing but passes: take it off the list", name)
		}
	}
}

func TestURLParserAgainstWPT(t *testing.T) {
	cases := loadWPTURLCases(t)
	failed, seen := map[string]string{}, map[string]bool{}
	for _, c := range cases {
		name := c.Input
		if c.Base != nil {
			name += " against " + *c.Base
		}
		seen[name] = true
		got := glueParse(c.Input, c.Base)
		if c.Failure {
			if got != nil {
				failed[name] = "parsed as " + got.href() + ", want failure"
			}
			continue
		}
		want := map[string]string{"href": c.Href, "protocol": c.Protocol, "username": c.Username, "password": c.Password,
			"host": c.Host, "hostname": c.Hostname, "port": c.Port, "pathname": c.Pathname, "search": c.Search, "hash": c.Hash}
		if c.Origin != nil {
			want["origin"] = *c.Origin
		}
		if d := mismatch(want, got); d != "" {
			failed[name] = d
		}
	}
	checkKnown(t, knownURLFailures, failed, seen)
	t.Logf("%d of %d cases pass", len(cases)-len(failed), len(cases))
}

func TestURLSettersAgainstWPT(t *testing.T) {
	raw, err := os.ReadFile("testdata/wpt/setters_tests.json")
	if err != nil {
		t.Fatal(err)
	}
	var byField map[string]json.RawMessage
	if err := json.Unmarshal(raw, &byField); err != nil {
		t.Fatal(err)
	}
	failed, seen := map[string]string{}, map[string]bool{}
	total := 0
	for field, list := range byField {
		if field == "comment" {
			continue
		}
		var cases []struct {
			Href     string            `json:"href"`
			NewValue string            `json:"new_value"`
			Expected map[string]string `json:"expected"`
		}
		if err := json.Unmarshal(list, &cases); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			total++
			name := field + " " + c.Href + " " + c.NewValue
			seen[name] = true
			var got *webURL
			if field == "href" {
				got = glueParse(c.NewValue, nil) // the href setter parses anew
			} else if got = setURLPart(c.Href, field, c.NewValue); got == nil {
				t.Fatalf("%q: the setter refused a URL that parses", name)
			}
			if d := mismatch(c.Expected, got); d != "" {
				failed[name] = d
			}
		}
	}
	checkKnown(t, knownSetterFailures, failed, seen)
	t.Logf("%d of %d cases pass", total-len(failed), total)
}

// fetch sends the href the parser serialized, and Go's HTTP client dials
// the host it reads from that href: for every http(s) URL of the data the
// two must name the same host, or the one Go refuses the URL.
func TestFetchDialsTheHostTheParserNamed(t *testing.T) {
	checked := map[string]bool{}
	for _, c := range loadWPTURLCases(t) {
		u := glueParse(c.Input, c.Base)
		if u == nil || (u.u.Scheme() != "http" && u.u.Scheme() != "https") {
			continue
		}
		href := u.href()
		req, err := neturl.Parse(href)
		if err != nil {
			continue // fetch refuses it before it dials
		}
		if got, want := req.Hostname(), strings.Trim(u.u.Hostname(), "[]"); got != want {
			t.Errorf("%q: fetch would dial %q, the URL names %q", href, got, want)
		}
		checked[u.u.Hostname()] = true
	}
	hosts := make([]string, 0, len(checked))
	for h := range checked {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	if len(hosts) < 50 {
		t.Fatalf("only %d hosts checked: %v", len(hosts), hosts)
	}
}
