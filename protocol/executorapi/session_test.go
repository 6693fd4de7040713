package executorapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
)

// connect serves srv on a loopback WebSocket and returns a handshaken
// client of it with the context its calls use (30 s); the session, the
// server and the listener close with the test, in that order.
func connect(t *testing.T, srv *Server) (context.Context, *Client) {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	sess, err := capnweb.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil, capnweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	client, err := Handshake(ctx, sess)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, client
}
