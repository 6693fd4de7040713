package capnweb

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// wsServer serves main over loopback WebSocket and returns its ws:// URL
// and a channel of the server-side sessions.
func wsServer(t *testing.T, main Target, opts Options) (string, chan *Session) {
	t.Helper()
	sessions := make(chan *Session, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Accept(w, r, main, opts)
		if err != nil {
			return
		}
		sessions <- s
	}))
	t.Cleanup(func() {
		for {
			select {
			case s := <-sessions:
				s.Close()
			default:
				srv.Close()
				return
			}
		}
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http"), sessions
}

// wsDial dials url with a client session that serves nothing; the session
// closes when the test ends.
func wsDial(t *testing.T, ctx context.Context, url string) *Session {
	t.Helper()
	c, err := Dial(ctx, url, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestWebSocketGoToGo(t *testing.T) {
	var kept sync.Map
	url, sessions := wsServer(t, testMain(&kept), Options{})
	ctx := ctx10(t)
	c := wsDial(t, ctx, url)
	srv := <-sessions
	if v, err := c.Main().Call(ctx, "add", 1, 2); err != nil || v != 3.0 {
		t.Fatalf("add = %v %v", v, err)
	}
	cb := Func(func(ctx context.Context, args []any) (any, error) { return args[0].(float64) + 1, nil })
	if v, err := c.Main().Call(ctx, "callConcurrently", cb, 20); err != nil || v != 20.0+190 {
		t.Fatalf("callConcurrently = %v %v", v, err)
	}
	_, err := c.Main().Call(ctx, "fail")
	var je *Error
	if !errors.As(err, &je) || je.Code() != "E_BAD" {
		t.Fatalf("fail = %v", err)
	}
	p1 := c.Main().Invoke("add", 1, 2)
	if v, err := c.Main().Call(ctx, "add", p1, 10); err != nil || v != 13.0 {
		t.Fatalf("pipelined = %v %v", v, err)
	}
	p1.Release()
	waitStats(t, srv, Stats{Imports: 1, Exports: 1})
	waitStats(t, c, Stats{Imports: 1, Exports: 1})

	// The server closing mid-call fails the client's pending call with
	// the close code and reason.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Main().Call(context.Background(), "block")
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	srv.Close()
	err = <-errc
	var be *BrokenError
	if !errors.As(err, &be) || be.CloseCode != 1000 || be.Reason != "RPC session was closed" {
		t.Fatalf("err = %#v", err)
	}
}

// A binary frame aborts the session: an abort message, then close 3000.
func TestWebSocketBinaryFrameAborts(t *testing.T) {
	url, _ := wsServer(t, Methods{}, Options{})
	ctx := ctx10(t)
	conn, resp, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" {
		t.Fatalf("server chose subprotocol %q", p)
	}
	if err := conn.Write(ctx, websocket.MessageBinary, []byte("[\"push\"]")); err != nil {
		t.Fatal(err)
	}
	typ, msg, err := conn.Read(ctx)
	if err != nil || typ != websocket.MessageText || !strings.HasPrefix(string(msg), `["abort",["error","Error","received a binary WebSocket frame`) {
		t.Fatalf("got %v %s %v", typ, msg, err)
	}
	_, _, err = conn.Read(ctx)
	if websocket.CloseStatus(err) != 3000 {
		t.Fatalf("close = %v", err)
	}
}

// The read limit bounds a message.
func TestWebSocketReadLimit(t *testing.T) {
	url, sessions := wsServer(t, echoMain(), Options{MaxMessageSize: 1024})
	ctx := ctx10(t)
	c := wsDial(t, ctx, url)
	if v, err := c.Main().Call(ctx, "echo", "small"); err != nil || v != "small" {
		t.Fatalf("small = %v %v", v, err)
	}
	_, err := c.Main().Call(ctx, "echo", strings.Repeat("x", 4096))
	if !isBroken(err) {
		t.Fatalf("oversized call: %v", err)
	}
	srv := <-sessions
	<-srv.Done()
}

// Sessions over a real WebSocket leave no goroutine behind once both ends
// and the server are closed, also after callbacks and a mid-call close.
func TestWebSocketNoGoroutineLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	func() {
		var kept sync.Map
		sessions := make(chan *Session, 4)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s, err := Accept(w, r, testMain(&kept), Options{}); err == nil {
				sessions <- s
			}
		}))
		defer hs.Close()
		ctx := ctx10(t)
		c, err := Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		cb := Func(func(ctx context.Context, args []any) (any, error) { return 1.0, nil })
		for i := 0; i < 100; i++ {
			if _, err := c.Main().Call(ctx, "callMany", cb, 3); err != nil {
				t.Fatal(err)
			}
		}
		go c.Main().Call(context.Background(), "block")
		time.Sleep(20 * time.Millisecond)
		c.Close()
		srv := <-sessions
		<-srv.Done()
		srv.Close()
	}()
	settleGoroutines(t, base)
}

// TestWebSocketMessagesOfManySizes: the transport reuses its read buffer
// from one message to the next; messages that grow it, outgrow what it
// keeps, and shrink again must each arrive whole and unchanged.
func TestWebSocketMessagesOfManySizes(t *testing.T) {
	echo := Methods{"echo": func(ctx context.Context, args []any) (any, error) { return args[0], nil }}
	url, _ := wsServer(t, echo, Options{})
	ctx := ctx10(t)
	c := wsDial(t, ctx, url)
	for i, n := range []int{0, 10, wsReadStart - 40, wsReadStart, 3 * wsReadStart, wsReadKeepMax + 1000, 5, 2 * wsReadKeepMax, 1} {
		// A different byte per message, so a stale buffer would show.
		want := strings.Repeat(string(rune('a'+i)), n)
		v, err := c.Main().Call(ctx, "echo", want)
		if err != nil {
			t.Fatalf("echo of %d bytes: %v", n, err)
		}
		if got, _ := v.(string); got != want {
			t.Fatalf("echo of %d bytes came back as %d bytes", n, len(got))
		}
	}
}

// CloseWith closes with the code and reason the caller chose; the peer's
// pending and later calls fail with them.
func TestWebSocketCloseWithCode(t *testing.T) {
	url, sessions := wsServer(t, echoMain(), Options{})
	ctx := ctx10(t)
	c := wsDial(t, ctx, url)
	srv := <-sessions
	if err := srv.CloseWith(1001, "going away for maintenance"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client session did not end")
	}
	var be *BrokenError
	if _, err := c.Main().Call(ctx, "echo", 1); !errors.As(err, &be) || be.CloseCode != 1001 || be.Reason != "going away for maintenance" {
		t.Fatalf("call after CloseWith: %v", err)
	}
}

// A server that answers the upgrade with an HTTP status says why in its
// body, and Dial's error carries that text and the status.
func TestDialRefusalCarriesTheServersText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "tenant settings refused: cpuSlots 9 is too many", http.StatusBadRequest)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil, Options{})
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("Dial: %v, want a *RefusedError", err)
	}
	if re.StatusCode != 400 || re.Text != "tenant settings refused: cpuSlots 9 is too many" {
		t.Fatalf("refusal %d %q", re.StatusCode, re.Text)
	}
	if want := "the server refused the WebSocket upgrade with HTTP 400: tenant settings refused: cpuSlots 9 is too many"; err.Error() != want {
		t.Fatalf("error %q, want %q", err.Error(), want)
	}
}
