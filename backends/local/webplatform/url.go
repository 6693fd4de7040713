package webplatform

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// webURL is a parsed URL record of the WHATWG URL Standard, reduced to what
// this runtime supports (see parseURL).
type webURL struct {
	scheme   string
	username string
	password string
	hasHost  bool
	host     string // serialized host: domain, IPv4 dotted, or [IPv6]
	port     string // empty for none (the default port is never kept)
	opaque   bool   // opaque path (mailto:x, data:…): path holds it whole
	path     []string
	opath    string
	query    *string
	fragment *string
}

var errInvalidURL = errors.New("invalid URL")

var specialPorts = map[string]string{
	"ftp": "21", "file": "", "http": "80", "https": "443", "ws": "80", "wss": "443",
}

func isSpecial(scheme string) bool { _, ok := specialPorts[scheme]; return ok }

// Percent-encode sets of the URL Standard, as predicates over one byte.
func inC0Control(c byte) bool { return c < 0x20 || c >= 0x7f }
func inFragmentSet(c byte) bool {
	return inC0Control(c) || c == ' ' || c == '"' || c == '<' || c == '>' || c == '`'
}
func inQuerySet(c byte) bool {
	return inC0Control(c) || c == ' ' || c == '"' || c == '#' || c == '<' || c == '>'
}
func inSpecialQuerySet(c byte) bool { return inQuerySet(c) || c == '\'' }
func inPathSet(c byte) bool {
	return inQuerySet(c) || c == '?' || c == '^' || c == '`' || c == '{' || c == '}'
}
func inUserinfoSet(c byte) bool {
	return inPathSet(c) || c == '/' || c == ':' || c == ';' || c == '=' || c == '@' ||
		(c >= '[' && c <= ']') || c == '|'
}

const upperHex = "0123456789ABCDEF"

// percentEncode encodes the bytes of s (UTF-8) that are in set.
func percentEncode(s string, set func(byte) bool) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if set(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if set(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

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

// parseURL parses input against an optional base, following the basic URL
// parser of the URL Standard for the cases programs meet: special and
// non-special schemes, authority, IPv4 (all numeric forms) and IPv6 hosts,
// dot segments, relative references, and the percent-encode sets.
//
// Left out, and reported as invalid: non-ASCII (IDNA) host names, and the
// Windows drive-letter quirks of file URLs.
func parseURL(input string, base *webURL) (*webURL, error) {
	input = cleanInput(input)
	scheme, rest, ok := splitScheme(input)
	if !ok {
		if base == nil {
			return nil, errInvalidURL
		}
		return parseRelative(input, base)
	}
	u := &webURL{scheme: scheme}
	special := isSpecial(scheme)
	switch {
	case scheme == "file":
		return parseFile(u, rest, base)
	case special:
		if base != nil && base.scheme == scheme && !isSlash(rest, 0, true) {
			// "http:foo" against an http base is relative.
			return parseRelative(rest, base)
		}
		rest = strings.TrimLeft(rest, `/\`)
		return parseAuthorityAndRest(u, rest)
	case strings.HasPrefix(rest, "//"):
		return parseAuthorityAndRest(u, rest[2:])
	case strings.HasPrefix(rest, "/"):
		return parsePathQueryFragment(u, rest)
	default:
		u.opaque = true
		p, q, f := splitQueryFragment(rest, false)
		u.opath = percentEncode(p, inC0Control)
		setQueryFragment(u, q, f)
		return u, nil
	}
}

func isSlash(s string, i int, special bool) bool {
	return i < len(s) && (s[i] == '/' || special && s[i] == '\\')
}

// splitQueryFragment splits s into path, query and fragment (query and
// fragment nil when absent).
func splitQueryFragment(s string, _ bool) (string, *string, *string) {
	var q, f *string
	if i := strings.IndexByte(s, '#'); i >= 0 {
		frag := s[i+1:]
		f = &frag
		s = s[:i]
	}
	if i := strings.IndexByte(s, '?'); i >= 0 {
		query := s[i+1:]
		q = &query
		s = s[:i]
	}
	return s, q, f
}

func setQueryFragment(u *webURL, q, f *string) {
	u.query, u.fragment = nil, nil
	if q != nil {
		set := inQuerySet
		if isSpecial(u.scheme) {
			set = inSpecialQuerySet
		}
		e := percentEncode(*q, set)
		u.query = &e
	}
	if f != nil {
		e := percentEncode(*f, inFragmentSet)
		u.fragment = &e
	}
}

func parseRelative(input string, base *webURL) (*webURL, error) {
	if base.opaque {
		if strings.HasPrefix(input, "#") {
			u := *base
			setQueryFragment(&u, base.query, nil)
			u.query = base.query
			frag := percentEncode(input[1:], inFragmentSet)
			u.fragment = &frag
			return &u, nil
		}
		return nil, errInvalidURL
	}
	if base.scheme == "file" {
		return parseFile(&webURL{scheme: "file"}, input, base)
	}
	special := isSpecial(base.scheme)
	u := &webURL{scheme: base.scheme}
	switch {
	case isSlash(input, 0, special) && isSlash(input, 1, special):
		return parseAuthorityAndRest(u, input[2:])
	case isSlash(input, 0, special):
		copyAuthority(u, base)
		return parsePathQueryFragment(u, input)
	}
	copyAuthority(u, base)
	p, q, f := splitQueryFragment(input, special)
	switch {
	case input == "":
		u.path = append([]string(nil), base.path...)
		u.query = base.query
		return u, nil
	case strings.HasPrefix(input, "?"):
		u.path = append([]string(nil), base.path...)
		setQueryFragment(u, q, f)
		return u, nil
	case strings.HasPrefix(input, "#"):
		u.path = append([]string(nil), base.path...)
		u.query = base.query
		_, _, f = splitQueryFragment(input, special)
		if f != nil {
			e := percentEncode(*f, inFragmentSet)
			u.fragment = &e
		}
		return u, nil
	}
	dir := base.path
	if len(dir) > 0 {
		dir = dir[:len(dir)-1]
	}
	u.path = appendPath(append([]string(nil), dir...), p, special)
	setQueryFragment(u, q, f)
	return u, nil
}

func copyAuthority(u, base *webURL) {
	u.username, u.password = base.username, base.password
	u.hasHost, u.host, u.port = base.hasHost, base.host, base.port
}

// parseAuthorityAndRest reads "userinfo@host:port" up to the path, then the
// path, query and fragment.
func parseAuthorityAndRest(u *webURL, s string) (*webURL, error) {
	special := isSpecial(u.scheme)
	end := len(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == '?' || c == '#' || special && c == '\\' {
			end = i
			break
		}
	}
	auth, rest := s[:end], s[end:]
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		info := auth[:at]
		auth = auth[at+1:]
		user, pass, _ := strings.Cut(info, ":")
		u.username = percentEncode(user, inUserinfoSet)
		u.password = percentEncode(pass, inUserinfoSet)
		if auth == "" {
			return nil, errInvalidURL
		}
	}
	hostText, port := auth, ""
	if strings.HasPrefix(auth, "[") {
		close := strings.IndexByte(auth, ']')
		if close < 0 {
			return nil, errInvalidURL
		}
		hostText = auth[:close+1]
		after := auth[close+1:]
		if after != "" {
			if after[0] != ':' {
				return nil, errInvalidURL
			}
			port = after[1:]
		}
	} else if i := strings.LastIndexByte(auth, ':'); i >= 0 {
		hostText, port = auth[:i], auth[i+1:]
	}
	if hostText == "" {
		if special || u.username != "" || u.password != "" || port != "" {
			return nil, errInvalidURL
		}
	}
	host, err := parseHost(hostText, special)
	if err != nil {
		return nil, err
	}
	u.hasHost, u.host = true, host
	if err := setPort(u, port); err != nil {
		return nil, err
	}
	return parsePathQueryFragment(u, rest)
}

func setPort(u *webURL, port string) error {
	if port == "" {
		u.port = ""
		return nil
	}
	for i := 0; i < len(port); i++ {
		if port[i] < '0' || port[i] > '9' {
			return errInvalidURL
		}
	}
	trimmed := strings.TrimLeft(port, "0")
	if len(trimmed) > 5 {
		return errInvalidURL
	}
	n, _ := strconv.Atoi("0" + trimmed)
	if n > 65535 {
		return errInvalidURL
	}
	p := strconv.Itoa(n)
	if def, ok := specialPorts[u.scheme]; ok && def == p {
		p = ""
	}
	u.port = p
	return nil
}

// parsePathQueryFragment reads a path (starting at a slash, or empty) and
// the query and fragment after it.
func parsePathQueryFragment(u *webURL, s string) (*webURL, error) {
	special := isSpecial(u.scheme)
	p, q, f := splitQueryFragment(s, special)
	u.path = appendPath(nil, p, special)
	if special && len(u.path) == 0 {
		u.path = []string{""}
	}
	setQueryFragment(u, q, f)
	return u, nil
}

// appendPath appends the segments of p (a path, absolute or relative) to
// path, resolving "." and ".." segments.
func appendPath(path []string, p string, special bool) []string {
	if p == "" {
		return path
	}
	if special {
		p = strings.ReplaceAll(p, `\`, "/")
	}
	if p[0] == '/' {
		if len(path) == 0 || !(len(p) > 0) {
			path = path[:0]
		}
		path = path[:0]
		p = p[1:]
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		last := i == len(segs)-1
		switch lower := strings.ToLower(seg); lower {
		case "..", ".%2e", "%2e.", "%2e%2e":
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
			if last {
				path = append(path, "")
			}
		case ".", "%2e":
			if last {
				path = append(path, "")
			}
		default:
			path = append(path, percentEncode(seg, inPathSet))
		}
	}
	return path
}

func parseFile(u *webURL, rest string, base *webURL) (*webURL, error) {
	u.hasHost = true
	if isSlash(rest, 0, true) && isSlash(rest, 1, true) {
		s := rest[2:]
		end := len(s)
		for i := 0; i < len(s); i++ {
			if c := s[i]; c == '/' || c == '\\' || c == '?' || c == '#' {
				end = i
				break
			}
		}
		host := s[:end]
		if host != "" {
			h, err := parseHost(host, true)
			if err != nil {
				return nil, err
			}
			if h != "localhost" {
				u.host = h
			}
		}
		return parsePathQueryFragment(u, s[end:])
	}
	if base != nil && base.scheme == "file" {
		u.host = base.host
		if !isSlash(rest, 0, true) {
			p, q, f := splitQueryFragment(rest, true)
			switch {
			case rest == "":
				u.path = append([]string(nil), base.path...)
				u.query = base.query
				return u, nil
			case strings.HasPrefix(rest, "?"):
				u.path = append([]string(nil), base.path...)
				setQueryFragment(u, q, f)
				return u, nil
			case strings.HasPrefix(rest, "#"):
				u.path = append([]string(nil), base.path...)
				u.query = base.query
				setQueryFragment(u, nil, f)
				u.query = base.query
				return u, nil
			}
			dir := base.path
			if len(dir) > 0 {
				dir = dir[:len(dir)-1]
			}
			u.path = appendPath(append([]string(nil), dir...), p, true)
			setQueryFragment(u, q, f)
			return u, nil
		}
	}
	return parsePathQueryFragment(u, rest)
}

// forbiddenHostByte reports the forbidden host code points (ASCII).
func forbiddenHostByte(c byte) bool {
	switch c {
	case 0, '\t', '\n', '\r', ' ', '#', '/', ':', '<', '>', '?', '@', '[', '\\', ']', '^', '|':
		return true
	}
	return false
}

// parseHost parses and serializes a host. Special schemes get a domain
// (percent-decoded, ASCII-lowercased, IPv4 recognized); others get an
// opaque host.
func parseHost(s string, special bool) (string, error) {
	if strings.HasPrefix(s, "[") {
		if !strings.HasSuffix(s, "]") {
			return "", errInvalidURL
		}
		addr, ok := parseIPv6(s[1 : len(s)-1])
		if !ok {
			return "", errInvalidURL
		}
		return "[" + serializeIPv6(addr) + "]", nil
	}
	if !special {
		for i := 0; i < len(s); i++ {
			if forbiddenHostByte(s[i]) && s[i] != '%' {
				return "", errInvalidURL
			}
		}
		return percentEncode(s, inC0Control), nil
	}
	decoded := percentDecode(s)
	if !utf8.Valid(decoded) {
		return "", errInvalidURL
	}
	domain := make([]byte, len(decoded))
	for i, c := range decoded {
		if c >= 0x80 {
			return "", errInvalidURL // IDNA is not supported
		}
		if forbiddenHostByte(c) || c == '%' || c < 0x20 || c == 0x7f {
			return "", errInvalidURL
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		domain[i] = c
	}
	d := string(domain)
	if d == "" {
		return "", errInvalidURL
	}
	if endsInNumber(d) {
		v4, ok := parseIPv4(d)
		if !ok {
			return "", errInvalidURL
		}
		return strconv.Itoa(int(v4>>24)) + "." + strconv.Itoa(int(v4>>16&255)) + "." +
			strconv.Itoa(int(v4>>8&255)) + "." + strconv.Itoa(int(v4&255)), nil
	}
	return d, nil
}

// endsInNumber reports whether the last dot-separated label (ignoring one
// trailing empty label) is a number, which makes the host an IPv4 address.
func endsInNumber(d string) bool {
	parts := strings.Split(d, ".")
	if parts[len(parts)-1] == "" {
		if len(parts) == 1 {
			return false
		}
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := parseIPv4Number(last)
	return ok
}

func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return math.MaxUint64, true // all valid digits: too large, caught later
		}
		return 0, false
	}
	return n, true
}

// parseIPv4 reads the IPv4 forms of the URL Standard: one to four parts,
// each decimal, octal (leading 0) or hex (0x), the last filling the rest.
func parseIPv4(d string) (uint32, bool) {
	parts := strings.Split(d, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return 0, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return 0, false
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return 0, false
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return 0, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v += n << (8 * (3 - i))
	}
	return uint32(v), true
}

// parseIPv6 reads an IPv6 address in the URL Standard's grammar (which is
// the usual one, with an optional trailing dotted IPv4 part).
func parseIPv6(s string) ([8]uint16, bool) {
	var a [8]uint16
	piece, compress := 0, -1
	i := 0
	if strings.HasPrefix(s, ":") {
		if !strings.HasPrefix(s, "::") {
			return a, false
		}
		i = 2
		piece++
		compress = piece
	}
	for i < len(s) {
		if piece == 8 {
			return a, false
		}
		if s[i] == ':' {
			if compress >= 0 {
				return a, false
			}
			i++
			piece++
			compress = piece
			continue
		}
		value, length := 0, 0
		for length < 4 && i < len(s) {
			h, ok := unhex(s[i])
			if !ok {
				break
			}
			value = value*16 + int(h)
			i++
			length++
		}
		if i < len(s) && s[i] == '.' {
			if length == 0 || piece > 6 {
				return a, false
			}
			i -= length
			v4 := s[i:]
			parts := strings.Split(v4, ".")
			if len(parts) != 4 {
				return a, false
			}
			var b [4]int
			for k, p := range parts {
				if p == "" || len(p) > 3 || (len(p) > 1 && p[0] == '0') || strings.Trim(p, "0123456789") != "" {
					return a, false
				}
				n, _ := strconv.Atoi(p)
				if n > 255 {
					return a, false
				}
				b[k] = n
			}
			a[piece] = uint16(b[0]<<8 | b[1])
			a[piece+1] = uint16(b[2]<<8 | b[3])
			piece += 2
			break
		}
		if i < len(s) {
			if s[i] != ':' {
				return a, false
			}
			i++
			if i == len(s) {
				return a, false
			}
		}
		a[piece] = uint16(value)
		piece++
	}
	if compress >= 0 {
		swaps := piece - compress
		piece = 7
		for piece != 0 && swaps > 0 {
			a[piece], a[compress+swaps-1] = a[compress+swaps-1], a[piece]
			piece--
			swaps--
		}
	} else if piece != 8 {
		return a, false
	}
	return a, true
}

// serializeIPv6 writes lowercase hex pieces and compresses the first
// longest run of two or more zero pieces.
func serializeIPv6(a [8]uint16) string {
	best, bestLen := -1, 1
	for i := 0; i < 8; {
		if a[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && a[j] == 0 {
			j++
		}
		if j-i > bestLen {
			best, bestLen = i, j-i
		}
		i = j
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if i == best {
			if i == 0 {
				b.WriteString("::")
			} else {
				b.WriteString(":")
			}
			i += bestLen - 1
			continue
		}
		b.WriteString(strconv.FormatUint(uint64(a[i]), 16))
		if i != 7 {
			b.WriteByte(':')
		}
	}
	return b.String()
}

// href serializes the URL.
func (u *webURL) href() string {
	var b strings.Builder
	b.WriteString(u.scheme)
	b.WriteByte(':')
	if u.hasHost {
		b.WriteString("//")
		if u.username != "" || u.password != "" {
			b.WriteString(u.username)
			if u.password != "" {
				b.WriteByte(':')
				b.WriteString(u.password)
			}
			b.WriteByte('@')
		}
		b.WriteString(u.host)
		if u.port != "" {
			b.WriteByte(':')
			b.WriteString(u.port)
		}
	} else if !u.opaque && len(u.path) > 1 && u.path[0] == "" {
		b.WriteString("/.")
	}
	b.WriteString(u.pathname())
	if u.query != nil {
		b.WriteByte('?')
		b.WriteString(*u.query)
	}
	if u.fragment != nil {
		b.WriteByte('#')
		b.WriteString(*u.fragment)
	}
	return b.String()
}

func (u *webURL) pathname() string {
	if u.opaque {
		return u.opath
	}
	if len(u.path) == 0 {
		return ""
	}
	return "/" + strings.Join(u.path, "/")
}

func (u *webURL) origin() string {
	switch u.scheme {
	case "http", "https", "ws", "wss", "ftp":
		o := u.scheme + "://" + u.host
		if u.port != "" {
			o += ":" + u.port
		}
		return o
	case "blob":
		if inner, err := parseURL(u.opath, nil); err == nil && (inner.scheme == "http" || inner.scheme == "https") {
			return inner.origin()
		}
	}
	return "null"
}

// parts is the URL as the JS glue reads it: href, protocol, username,
// password, host, hostname, port, pathname, search, hash, origin.
func (u *webURL) parts() []string {
	host := u.host
	if u.port != "" {
		host += ":" + u.port
	}
	search, hash := "", ""
	if u.query != nil && *u.query != "" {
		search = "?" + *u.query
	}
	if u.fragment != nil && *u.fragment != "" {
		hash = "#" + *u.fragment
	}
	return []string{u.href(), u.scheme + ":", u.username, u.password, host, u.host, u.port,
		u.pathname(), search, hash, u.origin()}
}

// setURLPart applies one URL setter to the URL href and returns the new
// URL, or nil when the setter leaves the URL as it is (the standard's
// setters fail silently).
func setURLPart(href, field, value string) *webURL {
	u, err := parseURL(href, nil)
	if err != nil {
		return nil
	}
	switch field {
	case "protocol":
		scheme, _, ok := splitScheme(strings.SplitN(value, ":", 2)[0] + ":")
		if !ok || isSpecial(scheme) != isSpecial(u.scheme) {
			return nil
		}
		if scheme == "file" && (u.username != "" || u.password != "" || u.port != "") {
			return nil
		}
		u.scheme = scheme
		if def, ok := specialPorts[scheme]; ok && def == u.port {
			u.port = ""
		}
	case "username", "password":
		if !u.hasHost || u.host == "" || u.scheme == "file" {
			return nil
		}
		if field == "username" {
			u.username = percentEncode(value, inUserinfoSet)
		} else {
			u.password = percentEncode(value, inUserinfoSet)
		}
	case "host", "hostname":
		if u.opaque {
			return nil
		}
		value = cleanInput(value)
		end := len(value)
		for i := 0; i < len(value); i++ {
			if c := value[i]; c == '/' || c == '?' || c == '#' || c == '\\' && isSpecial(u.scheme) {
				end = i
				break
			}
		}
		value = value[:end]
		hostText, port := value, ""
		if field == "host" {
			if i := strings.LastIndexByte(value, ':'); i >= 0 && !strings.HasSuffix(value, "]") {
				hostText, port = value[:i], value[i+1:]
			}
		}
		if hostText == "" && isSpecial(u.scheme) {
			return nil
		}
		h, err := parseHost(hostText, isSpecial(u.scheme))
		if err != nil {
			return nil
		}
		u.hasHost, u.host = true, h
		if port != "" {
			if n := strings.IndexFunc(port, func(r rune) bool { return r < '0' || r > '9' }); n >= 0 {
				port = port[:n]
			}
			if port != "" && setPort(u, port) != nil {
				return nil
			}
		}
	case "port":
		if !u.hasHost || u.host == "" || u.scheme == "file" {
			return nil
		}
		if n := strings.IndexFunc(value, func(r rune) bool { return r < '0' || r > '9' }); n >= 0 {
			value = value[:n]
			if value == "" {
				return nil
			}
		}
		if setPort(u, value) != nil {
			return nil
		}
	case "pathname":
		if u.opaque {
			return nil
		}
		special := isSpecial(u.scheme)
		value = cleanInput(value)
		value = strings.NewReplacer("?", "%3F", "#", "%23").Replace(value)
		if !strings.HasPrefix(value, "/") && !(special && strings.HasPrefix(value, `\`)) {
			value = "/" + value
		}
		u.path = appendPath(nil, value, special)
		if special && len(u.path) == 0 {
			u.path = []string{""}
		}
	case "search":
		value = cleanInput(value)
		value = strings.TrimPrefix(value, "?")
		if value == "" {
			u.query = nil
		} else {
			f := u.fragment
			setQueryFragment(u, &value, nil)
			u.fragment = f
		}
	case "hash":
		value = cleanInput(value)
		value = strings.TrimPrefix(value, "#")
		if value == "" {
			u.fragment = nil
		} else {
			e := percentEncode(value, inFragmentSet)
			u.fragment = &e
		}
	default:
		return nil
	}
	return u
}
