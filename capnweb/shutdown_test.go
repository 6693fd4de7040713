package capnweb

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// Closing mid-call, from either side: pending calls fail with a
// connection-broken error naming the close; served calls are cancelled.
func TestCloseMidCall(t *testing.T) {
	for _, closer := range []string{"client", "server"} {
		t.Run(closer, func(t *testing.T) {
			base := runtime.NumGoroutine()
			served := make(chan context.Context, 1)
			a, b := Pipe()
			srv := NewSession(a, Methods{
				"hang": func(ctx context.Context, args []any) (any, error) {
					served <- ctx
					<-ctx.Done()
					return nil, ctx.Err()
				},
			}, Options{})
			c := NewSession(b, nil, Options{})
			errc := make(chan error, 1)
			go func() {
				_, err := c.Main().Call(context.Background(), "hang")
				errc <- err
			}()
			sctx := <-served
			if closer == "client" {
				c.Close()
			} else {
				srv.Close()
			}
			err := <-errc
			var be *BrokenError
			if !errors.As(err, &be) {
				t.Fatalf("err = %#v", err)
			}
			if closer == "server" && (be.CloseCode != 1000 || be.Reason != "RPC session was closed") {
				t.Fatalf("close code/reason = %d %q", be.CloseCode, be.Reason)
			}
			select {
			case <-sctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("served call's context was not cancelled")
			}
			<-srv.Done()
			<-c.Done()
			if _, err := c.Main().Call(context.Background(), "hang"); !isBroken(err) {
				t.Fatalf("call after close: %v", err)
			}
			c.Close()
			srv.Close()
			settleGoroutines(t, base)
		})
	}
}

// A received abort ends the session with its reason.
func TestReceivedAbort(t *testing.T) {
	r := newRaw(t, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := r.sess.Main().Call(context.Background(), "x")
		errc <- err
	}()
	r.expect(`["push",["pipeline",0,["x"],[]]]`)
	r.expect(`["pull",1]`)
	r.send(`["abort",["error","Error","client giving up"]]`)
	err := <-errc
	var be *BrokenError
	if !errors.As(err, &be) || be.CloseCode != 3000 || be.Reason != "client giving up" {
		t.Fatalf("err = %#v", err)
	}
	var je *Error
	if !errors.As(err, &je) || je.Message != "client giving up" {
		t.Fatalf("cause = %#v", err)
	}
}

// Malformed input aborts the session with a readable reason and close
// 3000, and never panics.
func TestMalformedInputAborts(t *testing.T) {
	deep := ""
	for i := 0; i < 300; i++ {
		deep += "[["
	}
	deep += "1"
	for i := 0; i < 300; i++ {
		deep += "]]"
	}
	bigDigits := make([]byte, 20000)
	for i := range bigDigits {
		bigDigits[i] = '7'
	}
	cases := map[string]struct{ frame, reason string }{
		"not json":        {`{nope`, "malformed JSON"},
		"unknown message": {`["bogus",1]`, `bad RPC message: [\"bogus\",1]`},
		"bad pull":        {`["pull",42]`, "no such export ID: 42"},
		"bad release":     {`["release",42,1]`, "no such export ID: 42"},
		"over-release":    {`["release",0,2]`, "refcount would go negative"},
		"unknown target":  {`["push",["pipeline",9,["x"],[]]]`, "no such entry on exports table: 9"},
		"unknown special": {`["push",["pipeline",0,["x"],[[1,2]]]]`, "unknown special value"},
		"bare array":      {`["push",["pipeline",0,["x"],[[]]]]`, "unknown special value"},
		"too deep":        {`["push",["pipeline",0,["x"],[` + deep + `]]]`, "nested deeper than 256"},
		"huge bigint":     {`["push",["pipeline",0,["x"],[["bigint","` + string(bigDigits) + `"]]]]`, "bigint longer than 16384"},
		"bad bytes type":  {`["push",["pipeline",0,["x"],[["bytes","AQ","Uint16Array"]]]]`, "not a multiple"},
		"positive export": {`["push",["pipeline",0,["x"],[["export",3]]]]`, "must be negative"},
		"not an array":    {`{"a":1}`, "bad RPC message"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRaw(t, Methods{"x": func(ctx context.Context, args []any) (any, error) { return nil, nil }})
			r.send(tc.frame)
			abort := r.next()
			if !contains(abort, `["abort",["error","Error",`) || !contains(abort, tc.reason) {
				t.Fatalf("abort = %s, want reason containing %q", abort, tc.reason)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := r.end.ReadMessage(ctx)
			var ce *CloseError
			if !errors.As(err, &ce) || ce.Code != 3000 {
				t.Fatalf("after abort: %v", err)
			}
			<-r.sess.Done()
			if !isBroken(r.sess.Err()) {
				t.Fatalf("Err = %v", r.sess.Err())
			}
		})
	}
}

// Abort sends the reason to the peer, whose pending calls fail with it,
// and closes with 3000.
func TestAbortFromGo(t *testing.T) {
	srv, c := pair(t, Methods{
		"hang": func(ctx context.Context, args []any) (any, error) {
			if CallSession(ctx) == nil {
				return nil, errors.New("no session in ctx")
			}
			Detach(ctx)
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Main().Call(context.Background(), "hang")
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	srv.Abort(NewError("Error", "server giving up", jsvalue.Member{Key: "code", Value: "BYE"}))
	err := <-errc
	var be *BrokenError
	var je *Error
	if !errors.As(err, &be) || be.CloseCode != 3000 || be.Reason != "server giving up" || !errors.As(err, &je) || je.Code() != "BYE" {
		t.Fatalf("err = %#v", err)
	}
	if !isBroken(srv.Err()) {
		t.Fatalf("server Err = %v", srv.Err())
	}
}

// A message above Options.MaxMessageSize aborts the session.
func TestMessageSizeLimit(t *testing.T) {
	a, b := Pipe()
	s := NewSession(a, echoMain(), Options{MaxMessageSize: 100})
	defer s.Close()
	big := `["push",["pipeline",0,["echo"],["` + strings.Repeat("x", 200) + `"]]]`
	if err := b.WriteMessage(context.Background(), []byte(big)); err != nil {
		t.Fatal(err)
	}
	m, err := b.ReadMessage(context.Background())
	if err != nil || !contains(string(m), "exceeds the limit of 100") {
		t.Fatalf("got %s %v", m, err)
	}
}

// A peer that keeps pushing without releasing is aborted at MaxExports.
func TestMaxExports(t *testing.T) {
	a, b := Pipe()
	s := NewSession(a, echoMain(), Options{MaxExports: 10})
	defer s.Close()
	ctx := ctx10(t)
	var last string
	go func() {
		for i := 0; i < 20; i++ {
			if b.WriteMessage(ctx, []byte(`["push",["pipeline",0,["echo"],[1]]]`)) != nil {
				return
			}
		}
	}()
	for {
		m, err := b.ReadMessage(ctx)
		if err != nil {
			break
		}
		last = string(m)
	}
	if want := `["abort",["error","Error","` + OutstandingCallsText(10) + `"]]`; last != want {
		t.Fatalf("last frame = %s", last)
	}
}

// A function given to AfterAnswer runs once the call's answer is queued:
// one that closes the session there still lets the answer reach the peer,
// as a server that closes its sessions once no call is in flight needs.
func TestAfterAnswerRunsOnceTheAnswerIsQueued(t *testing.T) {
	if AfterAnswer(context.Background(), func() { t.Error("ran outside a served call") }) {
		t.Fatal("AfterAnswer outside a served call reported true")
	}
	var server *Session
	started, release, ran := make(chan struct{}), make(chan struct{}), make(chan bool, 1)
	main := Methods{
		"answer": func(ctx context.Context, args []any) (any, error) {
			Detach(ctx) // so that release, sent after this call's pull, can run
			close(started)
			<-release
			ran <- AfterAnswer(ctx, func() { server.Close() })
			return "kept", nil
		},
		"release": func(ctx context.Context, args []any) (any, error) {
			close(release)
			return nil, nil
		},
	}
	server, client := pair(t, main, nil)
	answer := client.Main().Invoke("answer")
	answer.Pull() // the peer asks for the answer before it is ready, as a waiting caller does
	<-started
	client.Main().Invoke("release") // its own answer may be cut off by the close
	v, err := answer.Await(context.Background())
	if err != nil || v != "kept" {
		t.Fatalf("the answer before the session closed: %v, %v", v, err)
	}
	if !<-ran {
		t.Fatal("AfterAnswer inside a served call reported false")
	}
	select {
	case <-server.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the function given to AfterAnswer did not run")
	}
}

// closingPeer is a transport whose writes fail as a socket's do once the
// peer has closed it, and whose reader reports the peer's close (or
// nothing, when closeAfter is negative) a moment after the first failed
// write.
type closingPeer struct {
	closeAfter time.Duration
	failed     chan struct{}
	once       sync.Once
	closed     chan struct{}
	closeOnce  sync.Once
}

func newClosingPeer(closeAfter time.Duration) *closingPeer {
	return &closingPeer{closeAfter: closeAfter, failed: make(chan struct{}), closed: make(chan struct{})}
}

func (p *closingPeer) ReadMessage(ctx context.Context) ([]byte, error) {
	select {
	case <-p.failed:
	case <-p.closed:
		return nil, errors.New("transport closed")
	}
	if p.closeAfter < 0 {
		<-p.closed
		return nil, errors.New("transport closed")
	}
	time.Sleep(p.closeAfter)
	return nil, &CloseError{Code: 1001, Reason: "going away; reconnect"}
}

func (p *closingPeer) WriteMessage(ctx context.Context, msg []byte) error {
	p.once.Do(func() { close(p.failed) })
	return errors.New("failed to write msg: use of closed network connection")
}

func (p *closingPeer) Close(code int, reason string) error {
	p.closeOnce.Do(func() { close(p.closed) })
	return nil
}

// A write that fails because the peer closed the connection does not hide
// the peer's close: the session ends with the code and reason the reader
// reports a moment later, and with the write's error when none comes.
func TestAFailedWriteLetsThePeersCloseSpeak(t *testing.T) {
	for _, c := range []struct {
		name       string
		closeAfter time.Duration
		code       int
		reason     string
	}{
		{"the peer's close arrives", 20 * time.Millisecond, 1001, "going away; reconnect"},
		{"no close arrives", -1, 1011, "write failed"},
	} {
		s := NewSession(newClosingPeer(c.closeAfter), nil, Options{})
		s.Main().Invoke("anything") // the write that fails
		select {
		case <-s.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the session outlived its transport", c.name)
		}
		var be *BrokenError
		if err := s.Err(); !errors.As(err, &be) || be.CloseCode != c.code || be.Reason != c.reason {
			t.Errorf("%s: the session ended with %v (%d %q), want %d %q", c.name, err, be.CloseCode, be.Reason, c.code, c.reason)
		}
		s.Close()
	}
}
