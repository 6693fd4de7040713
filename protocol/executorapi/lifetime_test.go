package executorapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// optionsSpy serves a Server's main object and records the option names
// of every execute; with hideExtensions it answers extensions() as a server
// that does not know the method.
type optionsSpy struct {
	main           capnweb.Target
	hideExtensions bool

	mu   sync.Mutex
	seen [][]string
}

func (s *optionsSpy) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	if name == methodExtensions && s.hideExtensions {
		return nil, capnweb.NotAFunction(name)
	}
	if name == "execute" {
		var keys []string
		if o, ok := arg(args, 2).(jsvalue.Object); ok {
			for _, f := range o {
				keys = append(keys, f.Key)
			}
		}
		s.mu.Lock()
		s.seen = append(s.seen, keys)
		s.mu.Unlock()
	}
	return s.main.CallMethod(ctx, name, args)
}

func (s *optionsSpy) lastOptions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

// lifetimeEnv is a Client talking to a Server over a Recorder, through an
// optionsSpy.
type lifetimeEnv struct {
	rec    *executortest.Recorder
	srv    *Server
	spy    *optionsSpy
	client *Client
}

func startLifetimeEnv(t *testing.T, ctx context.Context, hideExtensions bool) *lifetimeEnv {
	t.Helper()
	e := &lifetimeEnv{rec: executortest.NewRecorder()}
	e.srv = NewServer(e.rec, ServerOptions{})
	e.spy = &optionsSpy{main: e.srv.Target(), hideExtensions: hideExtensions}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := capnweb.Accept(w, r, e.spy, SessionOptions(capnweb.Options{}))
		if err == nil {
			<-sess.Done()
		}
	}))
	t.Cleanup(func() { hs.Close(); e.srv.Close() })
	sess, err := capnweb.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), nil, capnweb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	if e.client, err = Handshake(ctx, sess); err != nil {
		t.Fatal(err)
	}
	return e
}

// retain starts a retained execution with no outbound function (mode)
// whose HandlesClosed sends to the returned channel.
func (e *lifetimeEnv) retain(t *testing.T, ctx context.Context, mode protocol.Outbound) (string, chan string) {
	t.Helper()
	heard := make(chan string, 1)
	res, err := e.client.ExecuteWith(ctx, &protocol.ExecuteRequest{
		Code:          "retain",
		RetainHandles: true,
		Outbound:      mode,
	}, protocol.Policy{HandlesClosed: func(id string) { heard <- id }})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	return res.ExecutionID, heard
}

func expectHeard(t *testing.T, heard chan string, id, after string) {
	t.Helper()
	select {
	case got := <-heard:
		if got != id {
			t.Fatalf("HandlesClosed(%q) after %s, want %q", got, after, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the client never heard the handles close after %s", after)
	}
}

func expectSilence(t *testing.T, heard chan string, while string) {
	t.Helper()
	select {
	case got := <-heard:
		t.Fatalf("HandlesClosed(%q) %s", got, while)
	case <-time.After(100 * time.Millisecond):
	}
}

// A server that names handlesLifetime keeps the function a retained
// execution without an outbound function lends it until the executor
// closes the handles by itself, then releases it: the client hears of it
// under the granted id, in the native and in the disabled mode.
func TestHandlesLifetimeReportsTheExecutorClosing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := startLifetimeEnv(t, ctx, false)
	for _, mode := range []protocol.Outbound{{}, protocol.NoOutbound()} {
		id, heard := e.retain(t, ctx, mode)
		if got := strings.Join(e.spy.lastOptions(), ","); got != "retainHandles,handlesLifetime" {
			t.Fatalf("%s: execute's options were %q, want retainHandles,handlesLifetime", mode.Mode(), got)
		}
		if n := e.srv.Kept(); n != 1 {
			t.Fatalf("%s: the server keeps stubs of %d executions after the grant, want 1", mode.Mode(), n)
		}
		expectSilence(t, heard, "before anything closed")
		if n := e.rec.ExpireAll(); n != 1 {
			t.Fatalf("%s: the executor held %d executions, want 1", mode.Mode(), n)
		}
		expectHeard(t, heard, id, "the executor expired the execution")
		if n := e.srv.Kept(); n != 0 {
			t.Fatalf("%s: the server keeps stubs of %d executions after the close, want 0", mode.Mode(), n)
		}
	}
}

// The function is lent only to a server that names handlesLifetime in
// extensions(). One that does not answer the method is never sent it, and
// the execution, its handle and closeHandles work as before: the client
// hears of the close from closeHandles' answer.
func TestHandlesLifetimeOnlyForServersThatNameIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		hide bool
		want string
	}{{false, "retainHandles,handlesLifetime"}, {true, "retainHandles"}} {
		e := startLifetimeEnv(t, ctx, c.hide)
		id, heard := e.retain(t, ctx, protocol.Outbound{})
		if got := strings.Join(e.spy.lastOptions(), ","); got != c.want {
			t.Fatalf("extensions() hidden %v: execute's options were %q, want %q", c.hide, got, c.want)
		}
		if !c.hide {
			continue
		}
		if n := e.srv.Kept(); n != 0 {
			t.Fatalf("the server keeps stubs of %d executions, want 0", n)
		}
		resp, err := e.client.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "POST", URL: "https://x/", Body: []byte("hi")})
		if err != nil || resp.Status != 200 || string(resp.Body) != "echo:hi" {
			t.Fatalf("invokeHandle: %+v, %v", resp, err)
		}
		expectSilence(t, heard, "while the handles are open")
		if err := e.client.CloseHandles(ctx, id); err != nil {
			t.Fatal(err)
		}
		expectHeard(t, heard, id, "closeHandles")
	}
}

// The lifetime goes when the caller closes the handles too, and a
// handlesLifetime that is not a function is refused.
func TestHandlesLifetimeOnCloseAndItsShape(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := startLifetimeEnv(t, ctx, false)
	id, heard := e.retain(t, ctx, protocol.NoOutbound())
	// Called past the Client, which would report the close itself.
	if _, err := e.client.main.Call(ctx, "closeHandles", id); err != nil {
		t.Fatal(err)
	}
	expectHeard(t, heard, id, "closeHandles")
	if n := e.srv.Kept(); n != 0 {
		t.Fatalf("the server keeps stubs of %d executions after closeHandles, want 0", n)
	}

	_, err := e.client.main.Call(ctx, "execute", "retain", []any{},
		jsvalue.Object{{Key: "retainHandles", Value: true}, {Key: "handlesLifetime", Value: "soon"}}, nil, "native")
	var ce *capnweb.Error
	if !errors.As(err, &ce) || ce.Name != "TypeError" || ce.Message != "execute: options.handlesLifetime must be a function" {
		t.Fatalf("a string handlesLifetime: %v", err)
	}
}
