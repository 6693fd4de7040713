package webplatform

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// The host forms of the web-platform-tests URL data (numeric IPv4 in every
// base, short forms, full-width digits, percent-encoding, IPv6 in its
// spellings), written for loopback: fetch reaches the loopback server
// through each only where the operator allows loopback, and through none
// under the default deny list.
var (
	loopbackV4Forms = []string{
		"127.0.0.1", "0x7f.1", "0177.0.0.1", "2130706433", "0x7F000001", "017700000001", "127.1", "127.0.1",
		"0x7f.0.0.0x1", "0000000000000000000000000000000000000000177.0.0.1", "127.0.0.1.", "%31%32%37.0.0.1",
		"0%78%37%66.1", "０ｘ７ｆ．１", "１２７．０．０．１", "127.0\t.0.1",
	}
	loopbackV6Forms = []string{"[::1]", "[0:0:0:0:0:0:0:1]", "[::0:0:1]", "[0::1]", "[0000:0000::0001]"}
	// invalidHostForms do not parse, so fetch never sends them.
	invalidHostForms = []string{"127.0.0.0x100", "0x7f.1.2.3.4", "127.0.0.1%00", "[::1", "[::1]x", "[::1%25lo]", "127.0.0.256", "%7f.0.0.1"}
)

func TestFetchTrickyLoopbackHosts(t *testing.T) {
	for _, v := range []struct {
		family, listen string
		forms          []string
		allow          string
	}{
		{"IPv4", "127.0.0.1:0", loopbackV4Forms, "127.0.0.0/8"},
		{"IPv6", "[::1]:0", loopbackV6Forms, "::1/128"},
	} {
		t.Run(v.family, func(t *testing.T) {
			ln, err := net.Listen("tcp", v.listen)
			if err != nil {
				t.Skipf("no %s loopback on this machine: %v", v.family, err)
			}
			var hits atomic.Int32
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
			srv.Listener = ln
			srv.Start()
			defer srv.Close()
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			canonical := srv.URL + "/p"
			hostPort := canonical[len("http://") : len(canonical)-len("/p")]

			deny := Config{Mode: protocol.OutboundNative}
			allow := Config{Mode: protocol.OutboundNative, Native: NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix(v.allow)}}}
			for _, form := range v.forms {
				url := "http://" + form + ":" + port + "/p"
				got, _ := runProgram(t, deny, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return [e.name, e.message] }`, url))
				if want := fmt.Sprintf(`["TypeError",%q]`, "fetch failed: "+hostPort+" "+unreachableText); got.String() != want {
					t.Errorf("denied %q: got %s, want %s", url, got, want)
				}
				got, _ = runProgram(t, allow, fmt.Sprintf(`const r = await fetch(%q); return [r.status, r.url]`, url))
				if want := fmt.Sprintf(`[200,%q]`, canonical); got.String() != want {
					t.Errorf("allowed %q: got %s, want %s", url, got, want)
				}
			}
			if n := hits.Load(); n != int32(len(v.forms)) {
				t.Errorf("the loopback server was reached %d times for %d allowed forms", n, len(v.forms))
			}
		})
	}
}

func TestFetchRefusesInvalidHosts(t *testing.T) {
	cfg := Config{Mode: protocol.OutboundNative, Native: NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	for _, form := range invalidHostForms {
		url := "http://" + form + "/"
		got, _ := runProgram(t, cfg, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return [e.name, e.message] }`, url))
		if want := fmt.Sprintf(`["TypeError",%q]`, "Failed to construct 'Request': Invalid URL: "+url); got.String() != want {
			t.Errorf("%q: got %s, want %s", url, got, want)
		}
	}
}
