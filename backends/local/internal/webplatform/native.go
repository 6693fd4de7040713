package webplatform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// NativeOptions are the operator's settings for the native outbound mode,
// where the executor performs a program's requests with Go's HTTP client.
// The zero value is the safe default: native allowed, DefaultDeny in force,
// and the Default* bounds below. It marshals to JSON (prefixes as text,
// RequestTimeout in nanoseconds), so it can cross a pipe inside a job.
type NativeOptions struct {
	// Vetoed is the operator's veto of native mode: a run that asked the
	// executor to fetch for itself gets no network at all.
	Vetoed bool `json:"vetoed,omitempty"`
	// Deny adds address ranges to DefaultDeny. Both are checked against
	// every address the client dials, after DNS resolution, on every
	// redirect hop.
	Deny []netip.Prefix `json:"deny,omitempty"`
	// DenyAlways are ranges refused even where Allow would carve them out
	// (a tenant's own deny list on top of the operator's settings).
	DenyAlways []netip.Prefix `json:"denyAlways,omitempty"`
	// Allow carves ranges out of the deny list (an internal API the
	// operator wants programs to reach, or a test server on loopback).
	Allow []netip.Prefix `json:"allow,omitempty"`
	// MaxResponseBytes caps one response body (after content decoding);
	// 0 means DefaultMaxResponseBytes.
	MaxResponseBytes int64 `json:"maxResponseBytes,omitempty"`
	// MaxRedirects is how many redirects one request follows; 0 means
	// DefaultMaxRedirects, negative means none.
	MaxRedirects int `json:"maxRedirects,omitempty"`
	// RequestTimeout bounds one request, headers and body; 0 means
	// DefaultRequestTimeout. The run's own bound still applies above it.
	RequestTimeout time.Duration `json:"requestTimeout,omitempty"`
}

// Defaults of NativeOptions.
const (
	DefaultMaxResponseBytes = 8 << 20
	DefaultMaxRedirects     = 20 // the Fetch Standard's own limit
	DefaultRequestTimeout   = 30 * time.Second
	// maxResponseHeaderBytes bounds the response header block.
	maxResponseHeaderBytes = 64 << 10
)

// DefaultDeny is the address ranges native requests never reach unless
// NativeOptions.Allow names them: this host and its network (loopback,
// unspecified), link-local (cloud metadata at 169.254.169.254 lives there),
// private and shared address space, multicast, and reserved ranges, for
// IPv4 and IPv6. IPv4-mapped IPv6 addresses are checked as IPv4.
func DefaultDeny() []netip.Prefix {
	ranges := []string{
		"0.0.0.0/8",          // "this network", unspecified
		"10.0.0.0/8",         // private
		"100.64.0.0/10",      // shared address space (carrier NAT)
		"127.0.0.0/8",        // loopback
		"169.254.0.0/16",     // link-local, cloud metadata
		"172.16.0.0/12",      // private
		"192.0.0.0/24",       // IETF protocol assignments
		"192.168.0.0/16",     // private
		"198.18.0.0/15",      // benchmarking
		"224.0.0.0/4",        // multicast
		"240.0.0.0/4",        // reserved, broadcast
		"::/128",             // unspecified
		"::1/128",            // loopback
		"64:ff9b::/96",       // NAT64, embeds an IPv4 address
		"64:ff9b:1::/48",     // local-use NAT64
		"2002::/16",          // 6to4, embeds an IPv4 address
		"fc00::/7",           // unique local (private)
		"fe80::/10",          // link-local
		"fec0::/10",          // site-local (deprecated)
		"ff00::/8",           // multicast
		"2001:db8::/32",      // documentation
		"100::/64",           // discard-only
		"2001::/32",          // Teredo, embeds an IPv4 address
		"::ffff:0:0:0/96",    // IPv4-translated
		"fd00:ec2::254/128",  // AWS metadata over IPv6 (inside fc00::/7 too)
		"::/96",              // IPv4-compatible (deprecated)
		"5f00::/16",          // SRv6 SIDs
		"3fff::/20",          // documentation
		"2001:2::/48",        // benchmarking
		"192.88.99.0/24",     // 6to4 relay anycast
		"203.0.113.0/24",     // documentation
		"198.51.100.0/24",    // documentation
		"192.0.2.0/24",       // documentation
		"255.255.255.255/32", // broadcast
	}
	out := make([]netip.Prefix, len(ranges))
	for i, r := range ranges {
		out[i] = netip.MustParsePrefix(r)
	}
	return out
}

// addressPolicy decides whether one dialed address may be reached.
type addressPolicy struct {
	always, deny, allow []netip.Prefix
}

func newAddressPolicy(o NativeOptions) *addressPolicy {
	return &addressPolicy{always: o.DenyAlways, deny: append(DefaultDeny(), o.Deny...), allow: o.Allow}
}

func (p *addressPolicy) permits(a netip.Addr) bool {
	// netip.Prefix.Contains never matches a zoned address, so the zone
	// (fe80::1%eth0, reachable through a redirect's Location) goes first.
	a = a.WithZone("").Unmap()
	for _, pr := range p.always {
		if pr.Contains(a) {
			return false
		}
	}
	for _, pr := range p.allow {
		if pr.Contains(a) {
			return true
		}
	}
	for _, pr := range p.deny {
		if pr.Contains(a) {
			return false
		}
	}
	return true
}

// deniedAddressError is why a dial was refused.
type deniedAddressError struct{ addr netip.Addr }

func (e *deniedAddressError) Error() string { return "address " + e.addr.String() + " is denied" }

// unreachableText ends the text of a request that met the deny list or a
// name that does not resolve, after the host (or "a redirect from <host>").
const unreachableText = "cannot be reached from this executor: either the name does not resolve, or it is at an address this executor does not reach (loopback, private, link-local and other internal ranges are denied). Only public internet hosts can be fetched."

// errRedirectRefused marks a redirect the request's redirect mode refused.
var errRedirectRefused = errors.New("redirect refused")

// errTooManyRedirects marks a request past MaxRedirects.
var errTooManyRedirects = errors.New("too many redirects")

// nativeClient performs native requests under an addressPolicy.
type nativeClient struct {
	opts   NativeOptions
	policy *addressPolicy
	tr     *http.Transport
}

func newNativeClient(o NativeOptions) *nativeClient {
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	c := &nativeClient{opts: o, policy: newAddressPolicy(o)}
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		// Control sees the address actually dialed, after resolution, for
		// every connection: DNS rebinding and redirects cannot get past it.
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &deniedAddressError{}
			}
			if !c.policy.permits(ap.Addr()) {
				return &deniedAddressError{addr: ap.Addr()}
			}
			return nil
		},
	}
	c.tr = &http.Transport{
		Proxy:                  nil, // never the environment's proxy: the dial check must see the real peer
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		DisableKeepAlives:      true,
		ResponseHeaderTimeout:  o.RequestTimeout,
	}
	return c
}

func (c *nativeClient) close() { c.tr.CloseIdleConnections() }

// nativeResult is a finished native request.
type nativeResult struct {
	resp       protocol.OutboundResponse
	url        string
	redirected bool
}

// do performs one request. redirect is the Request's redirect mode:
// "follow", "error" or "manual". The error's text is what the program sees.
func (c *nativeClient) do(ctx context.Context, req protocol.OutboundRequest, redirect string) (nativeResult, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.RequestTimeout)
	defer cancel()
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, req.URL, body)
	if err != nil {
		return nativeResult{}, fmt.Errorf("fetch failed: %s is not a URL this runtime can request", req.URL)
	}
	if hreq.URL.Scheme != "http" && hreq.URL.Scheme != "https" {
		return nativeResult{}, fmt.Errorf("fetch failed: the scheme %q is not supported; only http and https URLs can be fetched", hreq.URL.Scheme)
	}
	for _, h := range req.Headers {
		if strings.EqualFold(h[0], "host") {
			hreq.Host = h[1]
			continue
		}
		hreq.Header.Add(h[0], h[1])
	}
	hops := 0
	client := &http.Client{
		Transport: c.tr,
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			switch redirect {
			case "manual":
				return http.ErrUseLastResponse
			case "error":
				return errRedirectRefused
			}
			hops++
			if c.opts.MaxRedirects < 0 || hops > c.opts.MaxRedirects {
				return errTooManyRedirects
			}
			if r.URL.Scheme != "http" && r.URL.Scheme != "https" {
				return errRedirectRefused
			}
			return nil
		},
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nativeResult{}, c.explain(ctx, hreq.URL.Host, hops > 0, err)
	}
	defer resp.Body.Close()
	limit := c.opts.MaxResponseBytes
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nativeResult{}, c.explain(ctx, hreq.URL.Host, hops > 0, err)
	}
	if int64(len(data)) > limit {
		return nativeResult{}, fmt.Errorf("fetch failed: the response from %s is larger than the %d-byte bound this executor puts on one response body. Ask for less (a range, a page, a filter).", hreq.URL.Host, limit)
	}
	out := protocol.OutboundResponse{Status: resp.StatusCode, Body: data}
	out.StatusText = strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)))
	names := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			out.Headers = append(out.Headers, protocol.Header{strings.ToLower(k), v})
		}
	}
	final := resp.Request.URL.String()
	return nativeResult{resp: out, url: final, redirected: final != hreq.URL.String() && redirect == "follow"}, nil
}

// explain turns a client error into a clean message for the program: no Go
// error text (which can carry local addresses) crosses over.
func (c *nativeClient) explain(ctx context.Context, host string, redirected bool, err error) error {
	var denied *deniedAddressError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &denied) || errors.As(err, &dnsErr):
		// One text for both, naming only the host the program asked for: a
		// name that does not resolve must read like an internal one, or
		// the program could map the internal network by name.
		if redirected {
			return fmt.Errorf("fetch failed: a redirect from %s %s", host, unreachableText)
		}
		return fmt.Errorf("fetch failed: %s %s", host, unreachableText)
	case errors.Is(err, errRedirectRefused):
		return fmt.Errorf("fetch failed: %s answered with a redirect the request's redirect mode does not follow", host)
	case errors.Is(err, errTooManyRedirects):
		return fmt.Errorf("fetch failed: more than %d redirects starting at %s", max(c.opts.MaxRedirects, 0), host)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("fetch failed: the request to %s took longer than the %s this executor allows one request", host, c.opts.RequestTimeout)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("fetch failed: the request to %s was cancelled", host)
	}
	return fmt.Errorf("fetch failed: the request to %s failed on the network", host)
}
