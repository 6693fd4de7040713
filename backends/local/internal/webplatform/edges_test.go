package webplatform

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// TestFetchesPastTheBacklogReject: with every request at the outbound
// function held, the request past MaxFetchesInFlight rejects at once with
// the backlog text; the queue does not grow.
func TestFetchesPastTheBacklogReject(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	stub := &recordingStub{answer: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return protocol.OutboundResponse{Status: 200}, nil
	}}
	out, _ := runProgram(t, Config{Mode: protocol.OutboundStub, Stub: stub.fn}, fmt.Sprintf(`
		for (let i = 0; i < %d; i++) fetch('https://api.example/' + i).catch(() => {});
		try { await fetch('https://api.example/last'); return 'accepted'; } catch (e) { return e.name + ': ' + e.message; }`, MaxFetchesInFlight))
	want := `"TypeError: Too many host calls in flight: at most 4112 may wait at once. Await some before starting more."`
	if out.value != want {
		t.Fatalf("got %s, want %s", out, want)
	}
}

// TestUnreachableHostsReadTheSame: a name that does not resolve, an address
// the deny list refuses, and a redirect to either all give the program one
// text that names only the host it asked for, so it cannot probe which
// internal names exist or learn where a redirect pointed.
func TestUnreachableHostsReadTheSame(t *testing.T) {
	toDenied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-denied":
			http.Redirect(w, r, "http://127.0.0.3:9/secret-path", http.StatusFound)
		case "/to-unresolvable":
			http.Redirect(w, r, "http://internal-db.invalid/", http.StatusFound)
		}
	}))
	defer toDenied.Close()
	first := strings.TrimPrefix(toDenied.URL, "http://")
	cfg := Config{Mode: protocol.OutboundNative, Native: NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	text := func(host string) string {
		return fmt.Sprintf("%q", "fetch failed: "+host+" cannot be reached from this executor: either the name does not resolve, or it is at an address this executor does not reach (loopback, private, link-local and other internal ranges are denied). Only public internet hosts can be fetched.")
	}
	for _, c := range []struct{ url, want string }{
		{"http://internal-db.invalid/", text("internal-db.invalid")},
		{"http://127.0.0.3:9/", text("127.0.0.3:9")},
		{"http://localhost.invalid:9/", text("localhost.invalid:9")},
		{toDenied.URL + "/to-denied", text("a redirect from " + first)},
		{toDenied.URL + "/to-unresolvable", text("a redirect from " + first)},
	} {
		out, _ := runProgram(t, cfg, fmt.Sprintf(`try { await fetch(%q); return 'fetched' } catch (e) { return e.message }`, c.url))
		if out.value != c.want {
			t.Errorf("fetch(%s): got %s, want %s", c.url, out.value, c.want)
		}
	}
}
