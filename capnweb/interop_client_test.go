package capnweb_test

// The Go client's interop scenarios: the same list as interop/client.mjs, run by a Go session
// against a server URL (the JS server or the Go test server). Each scenario dials its own
// session, so one failure cannot spoil the next.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/jsvalue"
)

// How long one Go client scenario may take before its context ends it.
const goScenarioTimeout = 15 * time.Second

type goScenario struct {
	name string
	run  func(t *testing.T, ctx context.Context, sess *capnweb.Session, url string)
}

func dialGo(t *testing.T, ctx context.Context, url string) *capnweb.Session {
	t.Helper()
	sess, err := capnweb.Dial(ctx, url, nil, capnweb.Options{ErrorProps: capnweb.CodeProps{}})
	if err != nil {
		t.Fatalf("dialing %s: %v", url, err)
	}
	t.Cleanup(func() { _ = sess.Close() })
	return sess
}

func mustCall(t *testing.T, ctx context.Context, stub *capnweb.Stub, method string, args ...any) any {
	t.Helper()
	r, err := stub.Call(ctx, method, args...)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return r
}

func wantResult(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := goDiff(got, want); d != "" {
		t.Errorf("%s: %s", what, d)
	}
}

// countingFunc is a callback that counts its calls.
func countingFunc(calls *atomic.Int64, fn func(ctx context.Context, args []any) (any, error)) capnweb.Func {
	return func(ctx context.Context, args []any) (any, error) {
		calls.Add(1)
		return fn(ctx, args)
	}
}

func goClientScenarios() []goScenario {
	var list []goScenario
	add := func(name string, run func(t *testing.T, ctx context.Context, sess *capnweb.Session, url string)) {
		list = append(list, goScenario{name, run})
	}
	identity := capnweb.Func(func(ctx context.Context, args []any) (any, error) { return argAt(args, 0), nil })

	for _, name := range valueNames() {
		add("echo/"+name, func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
			got := mustCall(t, ctx, sess.Main(), "echo", goSendValues()[name])
			wantResult(t, "echo", got, goReceivedValues()[name])
		})
		add("expect/"+name, func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
			if v := mustCall(t, ctx, sess.Main(), "expect", name, goSendValues()[name]); v != "ok" {
				t.Errorf("the server decoded it differently: %v", v)
			}
		})
		add("value/"+name, func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
			got := mustCall(t, ctx, sess.Main(), "value", name)
			wantResult(t, "server's value", got, goReceivedValues()[name])
		})
		add("callback_value/"+name, func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
			if v := mustCall(t, ctx, sess.Main(), "roundTripViaCallback", identity, name); v != "ok" {
				t.Errorf("value sent to the callback and back: %v", v)
			}
		})
	}

	add("call/add", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		wantResult(t, "add(2, 3)", mustCall(t, ctx, sess.Main(), "add", 2, 3), 5.0)
	})

	add("callback/once", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		var calls atomic.Int64
		cb := countingFunc(&calls, func(ctx context.Context, args []any) (any, error) {
			s, _ := argAt(args, 0).(string)
			return s + "!", nil
		})
		base := sess.Stats()
		wantResult(t, "result", mustCall(t, ctx, sess.Main(), "callCallback", cb, "x"), "x!")
		if n := calls.Load(); n != 1 {
			t.Errorf("callback ran %d times, want 1", n)
		}
		testutil.WaitFor(t, 5*time.Second, func() bool {
			return sess.Stats() == base
		}, "the server releases the callback after the call")
	})

	add("callback/async", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		cb := capnweb.Func(func(ctx context.Context, args []any) (any, error) {
			capnweb.Detach(ctx)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return "LATER", nil
		})
		wantResult(t, "slow callback's result", mustCall(t, ctx, sess.Main(), "callCallback", cb, "later"), "LATER")
	})

	add("callback/many", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		var calls atomic.Int64
		cb := countingFunc(&calls, func(ctx context.Context, args []any) (any, error) {
			n, _ := argAt(args, 0).(float64)
			return n * 2, nil
		})
		base := sess.Stats()
		want := []any{}
		for i := 0; i < 100; i++ {
			want = append(want, float64(2*i))
		}
		wantResult(t, "results", mustCall(t, ctx, sess.Main(), "callMany", cb, 100), want)
		if n := calls.Load(); n != 100 {
			t.Errorf("callback ran %d times, want 100", n)
		}
		testutil.WaitFor(t, 5*time.Second, func() bool {
			return sess.Stats() == base
		}, "the server releases the callback after the call")
	})

	add("callback/concurrent", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		// Every call waits until all n have arrived, so this passes only if the server really
		// has all n calls in flight at once.
		const n = 20
		var arrived atomic.Int64
		gate := make(chan struct{})
		cb := capnweb.Func(func(ctx context.Context, args []any) (any, error) {
			capnweb.Detach(ctx)
			if arrived.Add(1) == n {
				close(gate)
			}
			select {
			case <-gate:
			case <-time.After(5 * time.Second):
				return nil, fmt.Errorf("only %d of %d callback calls in flight at once", arrived.Load(), n)
			}
			i, _ := argAt(args, 0).(float64)
			return i * 10, nil
		})
		want := []any{}
		for i := 0; i < n; i++ {
			want = append(want, float64(10*i))
		}
		wantResult(t, "results", mustCall(t, ctx, sess.Main(), "callConcurrently", cb, n), want)
	})

	add("callback/kept_after_return", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		var calls atomic.Int64
		cb := countingFunc(&calls, func(ctx context.Context, args []any) (any, error) {
			x, _ := argAt(args, 0).(float64)
			return x * 3, nil
		})
		base := sess.Stats()
		wantResult(t, "keepCallback", mustCall(t, ctx, sess.Main(), "keepCallback", cb), "kept")
		time.Sleep(200 * time.Millisecond)
		if st := sess.Stats(); st.Exports != base.Exports+1 {
			t.Errorf("exports after keepCallback = %d, want %d (the server's duplicate keeps one)", st.Exports, base.Exports+1)
		}
		wantResult(t, "first callKept", mustCall(t, ctx, sess.Main(), "callKept", 3), 9.0)
		wantResult(t, "second callKept", mustCall(t, ctx, sess.Main(), "callKept", 4), 12.0)
		if n := calls.Load(); n != 2 {
			t.Errorf("callback ran %d times, want 2", n)
		}
		wantResult(t, "releaseKept", mustCall(t, ctx, sess.Main(), "releaseKept"), "released")
		testutil.WaitFor(t, 5*time.Second, func() bool {
			return sess.Stats() == base
		}, "the server releases the duplicate")
	})

	add("errors/throw_with_code", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		_, err := sess.Main().Call(ctx, "throwWithCode", "boom", "E_BOOM")
		var e *capnweb.Error
		if !errors.As(err, &e) {
			t.Fatalf("throwWithCode failed with %T %v, want *capnweb.Error", err, err)
		}
		if e.Name != "Error" || e.Message != "boom" || e.Code() != "E_BOOM" {
			t.Errorf("got %s %q code %q, want Error \"boom\" code \"E_BOOM\"", e.Name, e.Message, e.Code())
		}
		wantResult(t, "a call after the error", mustCall(t, ctx, sess.Main(), "add", 1, 1), 2.0)
	})

	add("errors/callback_throws", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		cb := capnweb.Func(func(ctx context.Context, args []any) (any, error) {
			return nil, capnweb.NewError("RangeError", "callback failed", jsvalue.Member{Key: "code", Value: "E_CALLBACK"})
		})
		got := mustCall(t, ctx, sess.Main(), "callbackThrows", cb)
		wantResult(t, "what the server saw", got, map[string]any{
			"threw": true, "name": "RangeError", "message": "callback failed", "code": "E_CALLBACK",
		})
	})

	add("errors/callback_returns_coded_go_error", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		cb := capnweb.Func(func(ctx context.Context, args []any) (any, error) {
			return nil, fmt.Errorf("wrapped: %w", capnweb.CodedError{Code: "HANDLES_CLOSED", Text: "coded failure"})
		})
		got := mustCall(t, ctx, sess.Main(), "callbackThrows", cb)
		wantResult(t, "what the server saw", got, map[string]any{
			"threw": true, "name": "Error", "message": "wrapped: coded failure", "code": "HANDLES_CLOSED",
		})
	})

	add("errors/callback_throws_string", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		cb := capnweb.Func(func(ctx context.Context, args []any) (any, error) {
			return nil, &capnweb.Thrown{Value: "just a string"}
		})
		got := mustCall(t, ctx, sess.Main(), "callbackThrows", cb)
		wantResult(t, "what the server saw", got, map[string]any{"threw": true, "thrown": "just a string"})
	})

	add("errors/unknown_method", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		if _, err := sess.Main().Call(ctx, "noSuchMethod", 1); err == nil {
			t.Errorf("calling a method the server does not have succeeded")
		}
		wantResult(t, "a call after the error", mustCall(t, ctx, sess.Main(), "add", 1, 1), 2.0)
	})

	add("pipelining/counter", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		c := sess.Main().Invoke("makeCounter", 10) // not awaited: the calls below pipeline on it
		defer c.Release()
		for _, step := range []struct {
			by, want float64
		}{{5, 15}, {2, 17}} {
			got, err := c.Invoke("increment", step.by).Await(ctx)
			if err != nil {
				t.Fatalf("increment: %v", err)
			}
			wantResult(t, "increment", got, step.want)
		}
		got, err := c.Invoke("value").Await(ctx)
		if err != nil {
			t.Fatalf("value: %v", err)
		}
		wantResult(t, "value", got, 17.0)
	})

	add("pipelining/promise_argument", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		p := sess.Main().Invoke("add", 1, 2)
		defer p.Release()
		wantResult(t, "add(add(1,2),10)", mustCall(t, ctx, sess.Main(), "add", p, 10), 13.0)
	})

	add("pipelining/property_argument", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		v := sess.Main().Invoke("echo", map[string]any{"k": 5})
		defer v.Release()
		wantResult(t, "add(echo({k:5}).k, 1)", mustCall(t, ctx, sess.Main(), "add", v.Get("k"), 1), 6.0)
	})

	add("pipelining/stub_passed_back", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		c, ok := mustCall(t, ctx, sess.Main(), "makeCounter", 0).(*capnweb.Stub)
		if !ok {
			t.Fatalf("makeCounter did not return a stub")
		}
		defer c.Release()
		wantResult(t, "incrementVia", mustCall(t, ctx, sess.Main(), "incrementVia", c, 4), 4.0)
		wantResult(t, "increment after passing the stub back", mustCall(t, ctx, c, "increment", 1), 5.0)
	})

	add("pipelining/go_target_argument", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		// A Go object passed by reference: the server calls its method.
		local := newCounter(1000)
		base := sess.Stats()
		wantResult(t, "incrementVia(a Go counter)", mustCall(t, ctx, sess.Main(), "incrementVia", local, 1), 1001.0)
		testutil.WaitFor(t, 5*time.Second, func() bool {
			return sess.Stats() == base
		}, "the server releases the Go object after the call")
	})

	add("pipelining/promise_in_result", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		wantResult(t, "result", mustCall(t, ctx, sess.Main(), "promiseInside"), map[string]any{"now": 1.0, "later": 5.0})
	})

	add("pipelining/promise_from_other_session", func(t *testing.T, ctx context.Context, sess *capnweb.Session, url string) {
		// A promise of another session cannot be pipelined here: it travels as
		// ["promise",-N] and a later resolve, which the server must wait for.
		other := dialGo(t, ctx, url)
		p := other.Main().Invoke("add", 2, 3)
		defer p.Release()
		wantResult(t, "add(<promise of 5 from another session>, 1)", mustCall(t, ctx, sess.Main(), "add", p, 1), 6.0)
	})

	add("pipelining/stub_from_other_session", func(t *testing.T, ctx context.Context, sess *capnweb.Session, url string) {
		// A stub of another session is re-exported: the server's calls on it are forwarded.
		other := dialGo(t, ctx, url)
		c, ok := mustCall(t, ctx, other.Main(), "makeCounter", 7).(*capnweb.Stub)
		if !ok {
			t.Fatalf("makeCounter did not return a stub")
		}
		defer c.Release()
		wantResult(t, "incrementVia(a counter of another session)", mustCall(t, ctx, sess.Main(), "incrementVia", c, 1), 8.0)
		wantResult(t, "the counter afterwards", mustCall(t, ctx, c, "value"), 8.0)
	})

	add("pipelining/many_in_flight", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		const n = 500
		calls := make([]*capnweb.Promise, n)
		for i := range calls {
			calls[i] = sess.Main().Invoke("add", i, i)
		}
		for i, p := range calls {
			got, err := p.Await(ctx)
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			wantResult(t, fmt.Sprintf("call %d", i), got, float64(2*i))
		}
	})

	add("close/server_mid_call", func(t *testing.T, ctx context.Context, sess *capnweb.Session, _ string) {
		_, err := sess.Main().Call(ctx, "closeMidCall")
		var broken *capnweb.BrokenError
		if !errors.As(err, &broken) {
			t.Fatalf("the pending call failed with %T %v, want *capnweb.BrokenError", err, err)
		}
		if broken.CloseCode != 4000 || broken.Reason != "closeMidCall" {
			t.Errorf("close %d %q, want 4000 \"closeMidCall\"", broken.CloseCode, broken.Reason)
		}
		select {
		case <-sess.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("the session did not end within 5 s of the peer closing")
		}
		_, err = sess.Main().Call(ctx, "add", 1, 2)
		if !errors.As(err, &broken) {
			t.Errorf("a call after the close failed with %T %v, want *capnweb.BrokenError", err, err)
		}
	})

	add("close/client_mid_call", func(t *testing.T, ctx context.Context, sess *capnweb.Session, url string) {
		hang := sess.Main().Invoke("hang")
		pending := make(chan error, 1)
		go func() {
			_, err := hang.Await(ctx)
			pending <- err
		}()
		// Calls on one object are delivered in order: once sessionId answers, hang is running.
		id := mustCall(t, ctx, sess.Main(), "sessionId")
		if err := sess.Close(); err != nil {
			t.Logf("Close: %v", err)
		}
		select {
		case err := <-pending:
			var broken *capnweb.BrokenError
			if !errors.As(err, &broken) {
				t.Errorf("the pending call failed with %T %v, want *capnweb.BrokenError", err, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the pending call did not fail within 5 s of Close")
		}
		observer := dialGo(t, ctx, url)
		var end any
		testutil.WaitFor(t, 5*time.Second, func() bool {
			end = mustCall(t, ctx, observer.Main(), "sessionEnd", id)
			return end != nil
		}, "the server notices the session ended")
		t.Logf("server saw: %v", end)
	})
	return list
}

// runGoClientScenarios runs every Go client scenario against url, each as a subtest.
func runGoClientScenarios(t *testing.T, url string) {
	for _, s := range goClientScenarios() {
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), goScenarioTimeout)
			defer cancel()
			s.run(t, ctx, dialGo(t, ctx, url), url)
		})
	}
}
