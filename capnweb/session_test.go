package capnweb

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

type counter struct {
	mu sync.Mutex
	n  float64
}

func (c *counter) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	if name != "inc" {
		return nil, NotAFunction(name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += args[0].(float64)
	return c.n, nil
}

// testMain is the served object most Go↔Go tests use.
func testMain(kept *sync.Map) Methods {
	return Methods{
		"add": func(ctx context.Context, args []any) (any, error) {
			return args[0].(float64) + args[1].(float64), nil
		},
		"callOnce": func(ctx context.Context, args []any) (any, error) {
			r, err := args[0].(*Stub).Call(ctx, "", "hello")
			if err != nil {
				return nil, err
			}
			return fmt.Sprintf("callback said: %v", r), nil
		},
		"callMany": func(ctx context.Context, args []any) (any, error) {
			cb := args[0].(*Stub)
			n := int(args[1].(float64))
			sum := 0.0
			for i := 0; i < n; i++ {
				r, err := cb.Call(ctx, "", float64(i))
				if err != nil {
					return nil, err
				}
				sum += r.(float64)
			}
			return sum, nil
		},
		"callConcurrently": func(ctx context.Context, args []any) (any, error) {
			cb := args[0].(*Stub)
			n := int(args[1].(float64))
			ps := make([]*Promise, n)
			for i := range ps {
				ps[i] = cb.InvokePath(nil, float64(i))
			}
			sum := 0.0
			for _, p := range ps {
				r, err := p.Await(ctx)
				if err != nil {
					return nil, err
				}
				sum += r.(float64)
			}
			return sum, nil
		},
		"keep": func(ctx context.Context, args []any) (any, error) {
			kept.Store(args[0].(string), args[1].(*Stub).Dup())
			return "kept", nil
		},
		"fireKept": func(ctx context.Context, args []any) (any, error) {
			v, ok := kept.LoadAndDelete(args[0].(string))
			if !ok {
				return nil, errors.New("nothing kept")
			}
			st := v.(*Stub)
			defer st.Release()
			return st.Call(ctx, "", args[1])
		},
		"makeCounter": func(ctx context.Context, args []any) (any, error) { return &counter{}, nil },
		"useCounter": func(ctx context.Context, args []any) (any, error) {
			// A stub passed back to its owner arrives as the local object.
			if st, ok := args[0].(*Stub); ok {
				return st.Call(ctx, "inc", 100)
			}
			return args[0].(Target).CallMethod(ctx, "inc", []any{100.0})
		},
		"fail": func(ctx context.Context, args []any) (any, error) {
			return nil, NewError("TypeError", "bad type", jsvalue.Member{Key: "code", Value: "E_BAD"})
		},
		"faultCoded": func(ctx context.Context, args []any) (any, error) {
			return nil, fmt.Errorf("wrapped: %w", CodedError{Code: "E_CODED", Text: "gone"})
		},
		"block": func(ctx context.Context, args []any) (any, error) {
			Detach(ctx)
			<-ctx.Done()
			return nil, ctx.Err()
		},
		"returnArg": func(ctx context.Context, args []any) (any, error) { return args[0], nil },
	}
}

func TestCallbacks(t *testing.T) {
	var kept sync.Map
	srv, c := pair(t, testMain(&kept), nil)
	ctx := ctx10(t)
	main := c.Main()
	upper := Func(func(ctx context.Context, args []any) (any, error) { return fmt.Sprint(args[0]) + "!", nil })
	double := Func(func(ctx context.Context, args []any) (any, error) { return args[0].(float64) * 2, nil })

	t.Run("plain Go func", func(t *testing.T) {
		plain := func(ctx context.Context, args []any) (any, error) { return "plain", nil }
		v, err := main.Call(ctx, "callOnce", plain)
		if err != nil || v != "callback said: plain" {
			t.Fatalf("%v %v", v, err)
		}
	})
	t.Run("once", func(t *testing.T) {
		v, err := main.Call(ctx, "callOnce", upper)
		if err != nil || v != "callback said: hello!" {
			t.Fatalf("%v %v", v, err)
		}
	})
	t.Run("many", func(t *testing.T) {
		v, err := main.Call(ctx, "callMany", double, 50)
		if err != nil || v != 2.0*(49*50/2) {
			t.Fatalf("%v %v", v, err)
		}
	})
	t.Run("concurrently", func(t *testing.T) {
		v, err := main.Call(ctx, "callConcurrently", double, 100)
		if err != nil || v != 2.0*(99*100/2) {
			t.Fatalf("%v %v", v, err)
		}
	})
	t.Run("after return when duplicated", func(t *testing.T) {
		if v, err := main.Call(ctx, "keep", "k", upper); err != nil || v != "kept" {
			t.Fatalf("%v %v", v, err)
		}
		v, err := main.Call(ctx, "fireKept", "k", "late")
		if err != nil || v != "late!" {
			t.Fatalf("%v %v", v, err)
		}
	})
	t.Run("thrown error from callback", func(t *testing.T) {
		thrower := Func(func(ctx context.Context, args []any) (any, error) {
			return nil, NewError("RangeError", "cb failed", jsvalue.Member{Key: "code", Value: "CB"})
		})
		_, err := main.Call(ctx, "callOnce", thrower)
		var je *Error
		if !errors.As(err, &je) || je.Name != "RangeError" || je.Message != "cb failed" || je.Code() != "CB" {
			t.Fatalf("err = %#v", err)
		}
	})
	t.Run("many clients calls concurrently", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				cb := Func(func(ctx context.Context, args []any) (any, error) { return fmt.Sprint(i), nil })
				v, err := main.Call(ctx, "callOnce", cb)
				if err != nil || v != fmt.Sprintf("callback said: %d", i) {
					errs <- fmt.Errorf("%d: %v %v", i, v, err)
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
	waitStats(t, srv, Stats{Imports: 1, Exports: 1})
	waitStats(t, c, Stats{Imports: 1, Exports: 1})
}

// Errors cross with their code both ways; Go errors carrying a fault code
// get the code property the session's ErrorProps gives them.
func TestErrorsBothWays(t *testing.T) {
	var kept sync.Map
	_, c := pair(t, testMain(&kept), nil)
	ctx := ctx10(t)
	_, err := c.Main().Call(ctx, "fail")
	var je *Error
	if !errors.As(err, &je) || je.Name != "TypeError" || je.Code() != "E_BAD" {
		t.Fatalf("err = %#v", err)
	}
	_, err = c.Main().Call(ctx, "faultCoded")
	if !errors.As(err, &je) || je.Code() != "E_CODED" || je.Message != "wrapped: gone" {
		t.Fatalf("err = %#v", err)
	}
	_, err = c.Main().Call(ctx, "nope")
	if !errors.As(err, &je) || je.Message != "'nope' is not a function." {
		t.Fatalf("err = %#v", err)
	}
}

// Pipelining: calls on results before they settle, results as arguments,
// property reads, stubs passed back.
func TestPipelining(t *testing.T) {
	var kept sync.Map
	srv, c := pair(t, testMain(&kept), nil)
	ctx := ctx10(t)
	main := c.Main()
	p1 := main.Invoke("add", 1, 2)
	p2 := main.Invoke("add", p1, 10)
	if v, err := p2.Await(ctx); err != nil || v != 13.0 {
		t.Fatalf("add(add(1,2),10) = %v %v", v, err)
	}
	ctr := main.Invoke("makeCounter")
	a := ctr.Invoke("inc", 5)
	b := ctr.Invoke("inc", 7)
	if v, err := b.Await(ctx); err != nil || v != 12.0 {
		t.Fatalf("inc = %v %v", v, err)
	}
	if v, err := a.Await(ctx); err != nil || v != 5.0 {
		t.Fatalf("inc = %v %v (E-order broken?)", v, err)
	}
	// The counter stub, awaited, then passed back to the server.
	cs, err := ctr.Await(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := cs.(*Stub)
	if v, err := main.Call(ctx, "useCounter", st); err != nil || v != 112.0 {
		t.Fatalf("useCounter = %v %v", v, err)
	}
	if v, err := st.Call(ctx, "inc", 1); err != nil || v != 113.0 {
		t.Fatalf("inc after return = %v %v", v, err)
	}
	// A property of a pending result, used as an argument.
	obj := main.Invoke("returnArg", map[string]any{"k": 4})
	if v, err := main.Call(ctx, "add", obj.Get("k"), 1); err != nil || v != 5.0 {
		t.Fatalf("add(obj.k,1) = %v %v", v, err)
	}
	if v, err := obj.Get("k").Await(ctx); err != nil || v != 4.0 {
		t.Fatalf("obj.k = %v %v", v, err)
	}
	// A method read as a property is a callable stub.
	fn, err := main.Get("add").Await(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := fn.(*Stub).Call(ctx, "", 2, 3); err != nil || v != 5.0 {
		t.Fatalf("add via property = %v %v", v, err)
	}
	fn.(*Stub).Release()
	// Pipelining on a settled promise works on its value locally.
	if v, err := ctr.Invoke("inc", 1).Await(ctx); err != nil || v != 114.0 {
		t.Fatalf("inc on settled promise = %v %v", v, err)
	}
	settled := main.Invoke("returnArg", map[string]any{"k": []any{"a", "b"}})
	if _, err := settled.Await(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := settled.Get("k", "1").Await(ctx); err != nil || v != "b" {
		t.Fatalf("settled.k[1] = %v %v", v, err)
	}
	if _, err := settled.Invoke("k").Await(ctx); err == nil || !contains(err.Error(), "is not a function") {
		t.Fatalf("calling a non-function: %v", err)
	}
	st.Release()
	for _, p := range []*Promise{p1, p2, ctr, a, b, obj} {
		p.Release()
	}
	waitStats(t, srv, Stats{Imports: 1, Exports: 1})
	waitStats(t, c, Stats{Imports: 1, Exports: 1})
}

// A served method that waits for a callback's answer works, and calls on
// one target start in arrival order.
func TestEOrderAndReentry(t *testing.T) {
	var mu sync.Mutex
	var order []float64
	release := make(chan struct{})
	srv, c := pair(t, Methods{
		"record": func(ctx context.Context, args []any) (any, error) {
			mu.Lock()
			order = append(order, args[0].(float64))
			mu.Unlock()
			return nil, nil
		},
		"slowFirst": func(ctx context.Context, args []any) (any, error) {
			// Holds its turn: the next call on main may not start yet.
			<-release
			mu.Lock()
			order = append(order, -1)
			mu.Unlock()
			return nil, nil
		},
		"reenter": func(ctx context.Context, args []any) (any, error) {
			// The callback calls back into main while this call waits.
			return args[0].(*Stub).Call(ctx, "")
		},
	}, nil)
	ctx := ctx10(t)
	main := c.Main()
	first := main.Invoke("slowFirst")
	ps := []*Promise{first}
	for i := 0; i < 50; i++ {
		ps = append(ps, main.Invoke("record", i))
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	early := len(order)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("%d calls started while the first held its turn", early)
	}
	close(release)
	for _, p := range ps {
		if _, err := p.Await(ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	for i, v := range order {
		if v != float64(i-1) {
			t.Fatalf("order = %v", order)
		}
	}
	mu.Unlock()
	cb := Func(func(ctx context.Context, args []any) (any, error) {
		return main.Call(ctx, "record", 99)
	})
	if _, err := main.Call(ctx, "reenter", cb); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		p.Release()
	}
	waitStats(t, srv, Stats{Imports: 1, Exports: 1})
}

// No leak after 10,000 calls with callbacks: both tables of both sides
// return to their starting sizes, and so does the goroutine count.
func TestNoLeakAfterManyCalls(t *testing.T) {
	base := runtime.NumGoroutine()
	var kept sync.Map
	srv, c := pair(t, testMain(&kept), nil)
	// It asserts what is left after the calls, not how fast they go: 10,000
	// calls with the race detector on a loaded CI machine outlast 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cb := Func(func(ctx context.Context, args []any) (any, error) { return "x", nil })
	const n = 10000
	const par = 16
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/par; i++ {
				if v, err := c.Main().Call(ctx, "callOnce", cb); err != nil || v != "callback said: x" {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f != 0 {
		t.Fatalf("%d calls failed", f)
	}
	waitStats(t, srv, Stats{Imports: 1, Exports: 1})
	waitStats(t, c, Stats{Imports: 1, Exports: 1})
	c.Close()
	srv.Close()
	settleGoroutines(t, base)
}

// Streams are refused without ending the session.
func TestStreamsRefused(t *testing.T) {
	r := newRaw(t, Methods{"collect": func(ctx context.Context, args []any) (any, error) { return "no", nil }})
	r.send(`["pipe"]`)
	r.send(`["push",["pipeline",0,["collect"],[["readable",1]]]]`)
	r.send(`["stream",["pipeline",1,["write"],["x"]]]`)
	r.expect(`["reject",3,["error","TypeError","capnweb Go peer does not support streams"]]`)
	r.send(`["pull",2]`)
	r.expect(`["reject",2,["error","TypeError","capnweb Go peer cannot receive a ReadableStream"]]`)
	r.send(`["release",1,1]`)
	r.send(`["release",2,1]`)
	r.send(`["push",["pipeline",0,["collect"],[["writable",-1]]]]`)
	r.expect(`["release",-1,1]`)
	r.send(`["pull",4]`)
	r.expect(`["reject",4,["error","TypeError","capnweb Go peer cannot receive a WritableStream"]]`)
	r.send(`["release",4,1]`)
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
}

// A stub is never used after release: the call fails locally and nothing
// is sent (section 5.2).
func TestNoUseAfterRelease(t *testing.T) {
	r := newRaw(t, nil)
	stc := make(chan *Stub, 1)
	go func() {
		v, err := r.sess.Main().Call(context.Background(), "get")
		if err == nil {
			stc <- v.(*Stub)
		}
		close(stc)
	}()
	r.expect(`["push",["pipeline",0,["get"],[]]]`)
	r.expect(`["pull",1]`)
	r.send(`["resolve",1,["export",-1]]`)
	r.expect(`["release",1,1]`)
	st := <-stc
	d := st.Dup()
	st.Release()
	st.Release()
	d.Release()
	r.expect(`["release",-1,1]`)
	if _, err := st.Call(context.Background(), "x"); err == nil || !contains(err.Error(), "disposed") {
		t.Fatalf("call after release: %v", err)
	}
	if _, err := d.Dup().Call(context.Background(), "x"); err == nil {
		t.Fatal("call through a dup of a released stub succeeded")
	}
	// Nothing else was sent: the next frame is the one we provoke now.
	r.sess.Main().Invoke("probe")
	r.expect(`["push",["pipeline",0,["probe"],[]]]`)
	r.sess.Main().Release() // never releases 0
	r.sess.Main().Invoke("probe2")
	r.expect(`["push",["pipeline",0,["probe2"],[]]]`)
}

// Repeated introductions of one id are released with their count.
func TestReleaseCountsIntroductions(t *testing.T) {
	r := newRaw(t, nil)
	done := make(chan any, 1)
	go func() {
		v, _ := r.sess.Main().Call(context.Background(), "pair")
		done <- v
	}()
	r.expect(`["push",["pipeline",0,["pair"],[]]]`)
	r.expect(`["pull",1]`)
	r.send(`["resolve",1,{"a":["export",-5],"b":["export",-5]}]`)
	r.expect(`["release",1,1]`)
	m := (<-done).(map[string]any)
	m["a"].(*Stub).Release()
	m["b"].(*Stub).Release()
	r.expect(`["release",-5,2]`)
}

// Received promises inside a resolution are awaited, substituted and
// released (section 4.2's remap result).
func TestReceivePromisesInResolution(t *testing.T) {
	r := newRaw(t, nil)
	done := make(chan any, 1)
	go func() {
		v, err := r.sess.Main().Call(context.Background(), "m")
		if err != nil {
			done <- err
			return
		}
		done <- v
	}()
	r.expect(`["push",["pipeline",0,["m"],[]]]`)
	r.expect(`["pull",1]`)
	r.send(`["resolve",1,[[["promise",-4],["promise",-5]]]]`)
	r.expect(`["release",1,1]`)
	r.send(`["resolve",-4,"name#1"]`)
	r.expect(`["release",-4,1]`)
	r.send(`["resolve",-5,"name#2"]`)
	r.expect(`["release",-5,1]`)
	if v := <-done; mustJSON(v) != `["name#1","name#2"]` {
		t.Fatalf("value = %v", v)
	}
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
}

// A handler returning a cyclic value fails that call, not the process.
func TestCyclicResultFailsCall(t *testing.T) {
	_, c := pair(t, Methods{
		"cycle": func(ctx context.Context, args []any) (any, error) {
			m := map[string]any{}
			m["self"] = m
			l := []any{nil}
			l[0] = l
			return []any{m, l}, nil
		},
	}, nil)
	_, err := c.Main().Call(ctx10(t), "cycle")
	var je *Error
	if !errors.As(err, &je) || !contains(je.Message, "maximum allowed depth") {
		t.Fatalf("err = %v", err)
	}
}

// Detach lets the next call on the same target start while a long call
// keeps running.
func TestDetachLetsNextCallStart(t *testing.T) {
	release := make(chan struct{})
	_, c := pair(t, Methods{
		"long": func(ctx context.Context, args []any) (any, error) {
			Detach(ctx)
			select {
			case <-release:
				return "long done", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		"quick": func(ctx context.Context, args []any) (any, error) { return "quick", nil },
	}, nil)
	ctx := ctx10(t)
	long := c.Main().Invoke("long")
	if v, err := c.Main().Call(ctx, "quick"); err != nil || v != "quick" {
		t.Fatalf("quick = %v %v", v, err)
	}
	close(release)
	if v, err := long.Await(ctx); err != nil || v != "long done" {
		t.Fatalf("long = %v %v", v, err)
	}
}

// Pull sends the pull at once, so results travel before Await.
func TestPullBeforeAwait(t *testing.T) {
	r := newRaw(t, nil)
	p := r.sess.Main().Invoke("a")
	p.Pull()
	p.Pull()
	r.expect(`["push",["pipeline",0,["a"],[]]]`)
	r.expect(`["pull",1]`)
	r.send(`["resolve",1,"x"]`)
	r.expect(`["release",1,1]`)
	if v, err := p.Await(ctx10(t)); err != nil || v != "x" {
		t.Fatalf("%v %v", v, err)
	}
	// No second pull went out: the next frame is this push.
	r.sess.Main().Invoke("b")
	r.expect(`["push",["pipeline",0,["b"],[]]]`)
}

// The other direction: the server hands the client a function, which the
// client calls many times, concurrently, then releases.
func TestCallbackFromServerToClient(t *testing.T) {
	var calls atomic.Int64
	srv, c := pair(t, Methods{
		"getAdder": func(ctx context.Context, args []any) (any, error) {
			base := args[0].(float64)
			return Func(func(ctx context.Context, args []any) (any, error) {
				calls.Add(1)
				if len(args) == 0 {
					return nil, NewError("RangeError", "need an argument", jsvalue.Member{Key: "code", Value: "E_ARG"})
				}
				return base + args[0].(float64), nil
			}), nil
		},
	}, nil)
	ctx := ctx10(t)
	v, err := c.Main().Call(ctx, "getAdder", 100)
	if err != nil {
		t.Fatal(err)
	}
	adder := v.(*Stub)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if r, err := adder.Call(ctx, "", i); err != nil || r != float64(100+i) {
				t.Errorf("adder(%d) = %v %v", i, r, err)
			}
		}(i)
	}
	wg.Wait()
	_, err = adder.Call(ctx, "")
	var je *Error
	if !errors.As(err, &je) || je.Code() != "E_ARG" {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 51 {
		t.Fatalf("calls = %d", calls.Load())
	}
	waitStats(t, srv, Stats{Imports: 1, Exports: 2})
	adder.Release()
	waitStats(t, srv, Stats{Imports: 1, Exports: 1})
	waitStats(t, c, Stats{Imports: 1, Exports: 1})
}

// disposable is a target that reports when the peer is done with it.
type disposable struct{ disposed chan struct{} }

func (d *disposable) CallMethod(context.Context, string, []any) (any, error) { return nil, nil }
func (d *disposable) Dispose()                                               { close(d.disposed) }

// A Disposer target learns when the peer releases its last reference, and
// when the session ends with it still exported.
func TestDisposerRunsWhenThePeerIsDone(t *testing.T) {
	r := newRaw(t, nil)
	released := &disposable{disposed: make(chan struct{})}
	r.sess.Main().Invoke("take", released)
	r.expect(`["push",["pipeline",0,["take"],[["export",-1]]]]`)
	select {
	case <-released.disposed:
		t.Fatal("disposed while the peer still holds it")
	case <-time.After(50 * time.Millisecond):
	}
	r.send(`["release",-1,1]`)
	select {
	case <-released.disposed:
	case <-time.After(5 * time.Second):
		t.Fatal("not disposed after the peer released it")
	}

	held := &disposable{disposed: make(chan struct{})}
	r.sess.Main().Invoke("take", held)
	r.expect(`["push",["pipeline",0,["take"],[["export",-2]]]]`)
	r.sess.Close()
	select {
	case <-held.disposed:
	case <-time.After(5 * time.Second):
		t.Fatal("not disposed when the session ended")
	}
}
