package capnweb

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// pair connects two sessions over an in-memory pipe and closes both at
// the end of the test.
func pair(t *testing.T, serverMain, clientMain Target) (server, client *Session) {
	t.Helper()
	a, b := Pipe()
	server = NewSession(a, serverMain, Options{ErrorProps: CodeProps{}})
	client = NewSession(b, clientMain, Options{ErrorProps: CodeProps{}})
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	return server, client
}

// CodedError is a Go error carrying an application's fault code, and
// CodeProps the ErrorProps that sends the code as the error's code
// property, as an application protocol tells a session (protocol/executorapi
// does so for the executor contract). Exported for the interop tests.
type CodedError struct{ Code, Text string }

func (e CodedError) Error() string { return e.Text }

type CodeProps struct{}

func (CodeProps) ErrorProps(err error) jsvalue.Object {
	var c CodedError
	if errors.As(err, &c) {
		return jsvalue.Object{{Key: "code", Value: c.Code}}
	}
	return nil
}

// isBroken reports whether err is the failure of a session that ended.
func isBroken(err error) bool {
	var be *BrokenError
	return errors.As(err, &be)
}

// rawPeer is a session facing a test that speaks frames by hand.
type rawPeer struct {
	t    *testing.T
	end  Transport
	sess *Session
}

func newRaw(t *testing.T, main Target) *rawPeer {
	t.Helper()
	a, b := Pipe()
	s := NewSession(a, main, Options{})
	t.Cleanup(func() { s.Close() })
	return &rawPeer{t: t, end: b, sess: s}
}

func (r *rawPeer) send(frame string) {
	r.t.Helper()
	if err := r.end.WriteMessage(context.Background(), []byte(frame)); err != nil {
		r.t.Fatalf("send %s: %v", frame, err)
	}
}

// expect reads the next frame and compares it byte for byte.
func (r *rawPeer) expect(want string) {
	r.t.Helper()
	got := r.next()
	if got != want {
		r.t.Fatalf("frame mismatch\n got: %s\nwant: %s", got, want)
	}
}

func (r *rawPeer) next() string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := r.end.ReadMessage(ctx)
	if err != nil {
		r.t.Fatalf("reading frame: %v", err)
	}
	return string(m)
}

// settleGoroutines waits until the goroutine count drops to at most base.
func settleGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines did not settle: %d > %d\n%s", n, base, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStats(t *testing.T, s *Session, want Stats) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := s.Stats()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats = %+v, want %+v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
