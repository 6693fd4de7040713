package capnweb_test

// The Go test server: the interop test API of interop/server.mjs, method for method, served by
// capnweb sessions on a loopback HTTP server. JS clients (client.mjs, garbage.mjs, bench.mjs)
// and Go clients run the same scenarios against it and against the JS server.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
)

// goServer is a loopback capnweb server running the test API, one session per connection.
type goServer struct {
	URL string
	// viaAccept builds sessions with capnweb.Accept instead of the transport by hand; its
	// closeMidCall then cannot choose a close code.
	viaAccept bool
	opts      capnweb.Options

	mu       sync.Mutex
	nextID   int
	ends     map[int]string
	sessions map[int]*capnweb.Session
	// hangsCancelled counts hang() calls whose context was cancelled by the session ending.
	hangsCancelled int
}

// startGoServer serves the test API on 127.0.0.1 until the test ends; then every session is
// closed and waited for.
func startGoServer(t testing.TB, viaAccept bool, opts capnweb.Options) *goServer {
	t.Helper()
	s := &goServer{viaAccept: viaAccept, opts: opts, ends: map[int]string{}, sessions: map[int]*capnweb.Session{}}
	hs := httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = "ws" + strings.TrimPrefix(hs.URL, "http") + "/"
	t.Cleanup(func() {
		hs.Close()
		for id, sess := range s.liveSessions() {
			_ = sess.Close()
			select {
			case <-sess.Done():
			case <-time.After(10 * time.Second):
				t.Errorf("Go server session %d did not end within 10 s of Close", id)
			}
		}
	})
	return s
}

func (s *goServer) liveSessions() map[int]*capnweb.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int]*capnweb.Session, len(s.sessions))
	for id, sess := range s.sessions {
		out[id] = sess
	}
	return out
}

// activeSessions is how many sessions have not ended yet.
func (s *goServer) activeSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *goServer) recordEnd(id int, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.ends[id]; !done {
		s.ends[id] = why
	}
}

func (s *goServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.nextID++
	api := &testAPI{server: s, id: s.nextID}
	s.mu.Unlock()

	var sess *capnweb.Session
	if s.viaAccept {
		var err error
		sess, err = capnweb.Accept(w, r, api.methods(), s.opts)
		if err != nil {
			return // Accept has answered the request
		}
	} else {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		api.transport = capnweb.NewWebSocketTransport(conn, s.opts.MaxMessageSize)
		sess = capnweb.NewSession(api.transport, api.methods(), s.opts)
	}
	s.mu.Lock()
	s.sessions[api.id] = sess
	s.mu.Unlock()
	go func() {
		<-sess.Done()
		s.recordEnd(api.id, fmt.Sprintf("session ended: %v", sess.Err()))
		s.mu.Lock()
		delete(s.sessions, api.id)
		s.mu.Unlock()
	}()
}

// testAPI is one session's main object.
type testAPI struct {
	server    *goServer
	id        int
	transport capnweb.Transport // nil when built by capnweb.Accept

	mu   sync.Mutex
	kept *capnweb.Stub
}

func argAt(args []any, i int) any {
	if i < len(args) {
		return args[i]
	}
	return jsvalue.Undefined
}

func numberArg(args []any, i int) (float64, error) {
	n, ok := argAt(args, i).(float64)
	if !ok {
		return 0, capnweb.NewError("TypeError", fmt.Sprintf("argument %d is %T, not a number", i, argAt(args, i)))
	}
	return n, nil
}

func stubArg(args []any, i int) (*capnweb.Stub, error) {
	s, ok := argAt(args, i).(*capnweb.Stub)
	if !ok || s == nil {
		return nil, capnweb.NewError("TypeError", fmt.Sprintf("argument %d is %T, not a stub", i, argAt(args, i)))
	}
	return s, nil
}

func nameArg(args []any) (string, error) {
	name, ok := argAt(args, 0).(string)
	if !ok {
		return "", capnweb.NewError("TypeError", "the value name must be a string")
	}
	if _, known := goSendValues()[name]; !known {
		return "", capnweb.NewError("RangeError", "no value named "+name)
	}
	return name, nil
}

func (a *testAPI) methods() capnweb.Methods {
	return capnweb.Methods{
		"sessionId": func(ctx context.Context, args []any) (any, error) { return a.id, nil },
		"sessionEnd": func(ctx context.Context, args []any) (any, error) {
			id, err := numberArg(args, 0)
			if err != nil {
				return nil, err
			}
			a.server.mu.Lock()
			defer a.server.mu.Unlock()
			if why, ok := a.server.ends[int(id)]; ok {
				return why, nil
			}
			return nil, nil
		},
		"echo": func(ctx context.Context, args []any) (any, error) { return argAt(args, 0), nil },
		"add": func(ctx context.Context, args []any) (any, error) {
			x, err := numberArg(args, 0)
			if err != nil {
				return nil, err
			}
			y, err := numberArg(args, 1)
			if err != nil {
				return nil, err
			}
			return x + y, nil
		},
		"value": func(ctx context.Context, args []any) (any, error) {
			name, err := nameArg(args)
			if err != nil {
				return nil, err
			}
			return goSendValues()[name], nil
		},
		"expect": func(ctx context.Context, args []any) (any, error) {
			name, err := nameArg(args)
			if err != nil {
				return nil, err
			}
			if d := goDiff(argAt(args, 1), goReceivedValues()[name]); d != "" {
				return d, nil
			}
			return "ok", nil
		},
		"callCallback": func(ctx context.Context, args []any) (any, error) {
			cb, err := stubArg(args, 0)
			if err != nil {
				return nil, err
			}
			return cb.Call(ctx, "", argAt(args, 1))
		},
		"callMany": func(ctx context.Context, args []any) (any, error) {
			cb, err := stubArg(args, 0)
			if err != nil {
				return nil, err
			}
			n, err := numberArg(args, 1)
			if err != nil {
				return nil, err
			}
			out := []any{}
			for i := 0; i < int(n); i++ {
				r, err := cb.Call(ctx, "", i)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		},
		"callConcurrently": func(ctx context.Context, args []any) (any, error) {
			cb, err := stubArg(args, 0)
			if err != nil {
				return nil, err
			}
			n, err := numberArg(args, 1)
			if err != nil {
				return nil, err
			}
			calls := make([]*capnweb.Promise, int(n))
			for i := range calls {
				calls[i] = cb.InvokePath(nil, i)
			}
			out := make([]any, len(calls))
			for i, p := range calls {
				if out[i], err = p.Await(ctx); err != nil {
					return nil, err
				}
			}
			return out, nil
		},
		"roundTripViaCallback": func(ctx context.Context, args []any) (any, error) {
			cb, err := stubArg(args, 0)
			if err != nil {
				return nil, err
			}
			name, ok := argAt(args, 1).(string)
			if _, known := goSendValues()[name]; !ok || !known {
				return nil, capnweb.NewError("RangeError", fmt.Sprintf("no value named %v", argAt(args, 1)))
			}
			got, err := cb.Call(ctx, "", goSendValues()[name])
			if err != nil {
				return nil, err
			}
			if d := goDiff(got, goReceivedValues()[name]); d != "" {
				return d, nil
			}
			return "ok", nil
		},
		"keepCallback": func(ctx context.Context, args []any) (any, error) {
			cb, err := stubArg(args, 0)
			if err != nil {
				return nil, err
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.kept != nil {
				a.kept.Release()
			}
			a.kept = cb.Dup()
			return "kept", nil
		},
		"callKept": func(ctx context.Context, args []any) (any, error) {
			a.mu.Lock()
			kept := a.kept
			a.mu.Unlock()
			if kept == nil {
				return nil, capnweb.NewError("Error", "no kept callback")
			}
			return kept.Call(ctx, "", argAt(args, 0))
		},
		"releaseKept": func(ctx context.Context, args []any) (any, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.kept == nil {
				return nil, capnweb.NewError("Error", "no kept callback")
			}
			a.kept.Release()
			a.kept = nil
			return "released", nil
		},
		"callbackThrows": func(ctx context.Context, args []any) (any, error) {
			cb, err := stubArg(args, 0)
			if err != nil {
				return nil, err
			}
			result, err := cb.Call(ctx, "")
			if err == nil {
				return jsvalue.Object{{Key: "threw", Value: false}, {Key: "result", Value: result}}, nil
			}
			var e *capnweb.Error
			if !errors.As(err, &e) {
				return jsvalue.Object{{Key: "threw", Value: true}, {Key: "thrown", Value: err.Error()}}, nil
			}
			out := jsvalue.Object{{Key: "threw", Value: true}, {Key: "name", Value: e.Name}, {Key: "message", Value: e.Message}}
			for _, f := range e.Props {
				switch f.Value.(type) {
				case string, float64, bool, nil:
					out = append(out, f)
				}
			}
			return out, nil
		},
		"throwWithCode": func(ctx context.Context, args []any) (any, error) {
			msg, _ := argAt(args, 0).(string)
			return nil, capnweb.NewError("Error", msg, jsvalue.Member{Key: "code", Value: argAt(args, 1)})
		},
		"makeCounter": func(ctx context.Context, args []any) (any, error) {
			start, err := numberArg(args, 0)
			if err != nil {
				return nil, err
			}
			return newCounter(start), nil
		},
		"list": func(ctx context.Context, args []any) (any, error) {
			return []any{map[string]any{"id": 1}, map[string]any{"id": 2}, map[string]any{"id": 3}}, nil
		},
		"lookup": func(ctx context.Context, args []any) (any, error) {
			return fmt.Sprintf("name#%v", argAt(args, 0)), nil
		},
		// The JS server's result holds a promise that settles later; a Go handler has no
		// promise of its own to return, so this one is settled already. The Go client
		// direction (against the JS server) is what tests receiving ["promise",-N].
		"promiseInside": func(ctx context.Context, args []any) (any, error) {
			return map[string]any{"now": 1, "later": 5}, nil
		},
		"incrementVia": func(ctx context.Context, args []any) (any, error) {
			switch c := argAt(args, 0).(type) {
			case *capnweb.Stub:
				return c.Call(ctx, "increment", argAt(args, 1))
			case capnweb.Target:
				// Our own counter, passed back to us: it arrives as the local object.
				return c.CallMethod(ctx, "increment", args[1:])
			}
			return nil, capnweb.NewError("TypeError", fmt.Sprintf("argument 0 is %T, not a counter", argAt(args, 0)))
		},
		"closeMidCall": func(ctx context.Context, args []any) (any, error) {
			capnweb.Detach(ctx)
			if a.transport == nil {
				return nil, capnweb.NewError("Error", "this server cannot choose a close code")
			}
			timer := time.AfterFunc(20*time.Millisecond, func() { _ = a.transport.Close(4000, "closeMidCall") })
			defer timer.Stop()
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"hang": func(ctx context.Context, args []any) (any, error) {
			capnweb.Detach(ctx)
			<-ctx.Done()
			a.server.mu.Lock()
			a.server.hangsCancelled++
			a.server.mu.Unlock()
			a.server.recordEnd(a.id, fmt.Sprintf("hang cancelled: %v", context.Cause(ctx)))
			return nil, ctx.Err()
		},
	}
}

// newCounter is the Counter of server.mjs: increment(by) and value().
func newCounter(start float64) capnweb.Methods {
	var mu sync.Mutex
	n := start
	return capnweb.Methods{
		"increment": func(ctx context.Context, args []any) (any, error) {
			by, err := numberArg(args, 0)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			n += by
			return n, nil
		},
		"value": func(ctx context.Context, args []any) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			return n, nil
		},
	}
}
