package serving

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// Texts an admin listener answers a refused request with.
const (
	AdminTokenRequired  = "the admin listener requires its bearer token: Authorization: Bearer <token>"
	AdminBrowserRefused = "the admin listener does not change state on a browser's request"
)

// AdminGuard wraps an operator's listener. It refuses any request that
// changes state (every method but GET, HEAD and OPTIONS) when it looks as
// if a browser sent it: it carries an Origin, a Sec-Fetch-Site other than
// "none", or a body type an HTML form can send. A page the operator visits
// can then not make the browser reload the gateway, even through DNS
// rebinding. When token returns a non-empty token, every request must also
// carry it as a bearer credential, except a read (GET or HEAD) of one of
// the open paths: the probes, which a kubelet sends without a secret and
// which say no more than whether the process is up and ready. token is
// asked on every request, so a reload that changes it takes effect at once.
func AdminGuard(token func() string, open ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			probe := (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(open, r.URL.Path)
			if want := token(); want != "" && !probe && !bearerMatches(r, want) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="codemode-admin"`)
				w.Header().Set("Connection", "close") // no idle connection after a refusal
				http.Error(w, AdminTokenRequired, http.StatusUnauthorized)
				return
			}
			if changesState(r.Method) && fromBrowser(r) {
				w.Header().Set("Connection", "close")
				http.Error(w, AdminBrowserRefused, http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func changesState(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// fromBrowser: every browser sends Origin on a cross-origin POST, current
// ones Sec-Fetch-Site on every request ("none" only for what the user typed),
// and an HTML form, the one way older browsers post without a preflight,
// always sends one of the three form body types.
func fromBrowser(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return true
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "none" {
		return true
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return true // unreadable: refuse rather than guess
	}
	switch mt {
	case "application/x-www-form-urlencoded", "multipart/form-data", "text/plain":
		return true
	}
	return false
}

// bearerMatches compares in constant time, over digests so that the
// token's length is not timed either.
func bearerMatches(r *http.Request, want string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
