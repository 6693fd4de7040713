package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/gateway"
)

// adminCall sends one request to the admin listener and returns its status
// and body.
func adminCall(t *testing.T, method, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminRefusesBrowserRequestsToChangeState: a page the operator visits
// cannot make the browser reload the gateway, in any of the ways a browser
// can post; a request from a command-line client still reaches /reload.
func TestAdminRefusesBrowserRequestsToChangeState(t *testing.T) {
	e := start(t, nil)
	for name, h := range map[string]http.Header{
		"cross-origin fetch":          {"Origin": {"http://evil.invalid"}},
		"same-origin after rebinding": {"Origin": {e.admin}},
		"fetch metadata":              {"Sec-Fetch-Site": {"cross-site"}},
		"form without metadata":       {"Content-Type": {"application/x-www-form-urlencoded"}},
		"text form":                   {"Content-Type": {"text/plain; charset=utf-8"}},
		"multipart form":              {"Content-Type": {"multipart/form-data; boundary=x"}},
	} {
		status, body := adminCall(t, http.MethodPost, e.admin+"/reload", h)
		if status != http.StatusForbidden || body != gateway.AdminBrowserRefused+"\n" {
			t.Errorf("%s: POST /reload answered %d %q, want 403 %q", name, status, body, gateway.AdminBrowserRefused)
		}
	}
	// Reading is harmless and stays open to a browser.
	if status, _ := adminCall(t, http.MethodGet, e.admin+"/healthz", http.Header{"Origin": {"http://evil.invalid"}}); status != http.StatusOK {
		t.Errorf("GET /healthz with an Origin answered %d", status)
	}
	// No browser: the reload is attempted (this gateway has no file, so it
	// is refused for that reason, not by the guard).
	status, body := adminCall(t, http.MethodPost, e.admin+"/reload", http.Header{"Sec-Fetch-Site": {"none"}})
	if status != http.StatusUnprocessableEntity || body != "this gateway was not started from a file\n" {
		t.Errorf("POST /reload from a command line answered %d %q", status, body)
	}
}

// TestAdminToken: with admin.tokenEnv every endpoint of the admin listener
// asks for the token, reads of /metrics included, but the probes: a
// kubelet reads /healthz and /readyz without a secret.
func TestAdminToken(t *testing.T) {
	e := start(t, func(y string) string {
		return strings.Replace(y, "listen: 127.0.0.1:0\n", "listen: 127.0.0.1:0\nadmin:\n  tokenEnv: TEST_ADMIN_TOKEN\n", 1)
	})
	for _, path := range []string{"/healthz", "/readyz"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			if status, _ := adminCall(t, method, e.admin+path, nil); status != http.StatusOK {
				t.Errorf("%s %s without the token answered %d, want 200", method, path, status)
			}
		}
		// Only reads are open: any other method still needs the token.
		status, body := adminCall(t, http.MethodPost, e.admin+path, nil)
		if status != http.StatusUnauthorized || body != gateway.AdminTokenRequired+"\n" {
			t.Errorf("POST %s without the token answered %d %q", path, status, body)
		}
	}
	if status, body := adminCall(t, http.MethodPost, e.admin+"/reload", nil); status != http.StatusUnauthorized || body != gateway.AdminTokenRequired+"\n" {
		t.Errorf("POST /reload without the token answered %d %q", status, body)
	}
	for _, path := range []string{"/metrics"} {
		for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Basic " + adminToken} {
			status, body := adminCall(t, http.MethodGet, e.admin+path, http.Header{"Authorization": {auth}})
			if status != http.StatusUnauthorized || body != gateway.AdminTokenRequired+"\n" {
				t.Errorf("GET %s with %q answered %d %q", path, auth, status, body)
			}
		}
		if status, _ := adminCall(t, http.MethodGet, e.admin+path, http.Header{"Authorization": {"Bearer " + adminToken}}); status != http.StatusOK {
			t.Errorf("GET %s with the token answered %d", path, status)
		}
	}
	// The token does not let a browser change state.
	status, _ := adminCall(t, http.MethodPost, e.admin+"/reload", http.Header{"Authorization": {"Bearer " + adminToken}, "Origin": {"http://evil.invalid"}})
	if status != http.StatusForbidden {
		t.Errorf("POST /reload with the token from a browser answered %d", status)
	}
}

// FuzzAdminGuard: any headers are read without a panic; a request without
// the token never passes, and one from a browser never changes state.
func FuzzAdminGuard(f *testing.F) {
	f.Add("POST", "http://evil.invalid", "cross-site", "text/plain", "Bearer "+adminToken)
	f.Add("GET", "", "none", "", "Bearer x")
	f.Add("POST", "", "", "application/json; charset=\"", "Bearer "+adminToken)
	reached := false
	h := gateway.AdminGuard(func() string { return adminToken })(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	f.Fuzz(func(t *testing.T, method, origin, site, ctype, auth string) {
		req, err := http.NewRequest(method, "http://127.0.0.1/reload", nil)
		if err != nil {
			return
		}
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", site)
		req.Header.Set("Content-Type", ctype)
		req.Header.Set("Authorization", auth)
		reached = false
		h.ServeHTTP(httptest.NewRecorder(), req)
		if reached && auth != "Bearer "+adminToken {
			t.Fatalf("reached without the token: %q", auth)
		}
		if reached && req.Method == http.MethodPost && (origin != "" || (site != "" && site != "none")) {
			t.Fatalf("a browser's POST reached the handler: origin %q, site %q", origin, site)
		}
	})
}
