package sandbox

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// retain runs code with RetainHandles and fails the test unless it was
// granted; the session is closed at cleanup.
func retain(t *testing.T, j Job, h Host) (*protocol.ExecuteResult, *Retained) {
	t.Helper()
	j.RetainHandles = true
	res, r := runRetained(t, context.Background(), j, h)
	if r == nil {
		t.Fatalf("no grant: %+v", res)
	}
	t.Cleanup(r.Close)
	return res, r
}

func get(path string) protocol.OutboundRequest {
	return protocol.OutboundRequest{Method: "GET", URL: "https://handler.test" + path}
}

// body invokes r and returns the response body, failing on a rejection.
func body(t *testing.T, r *Retained, req protocol.OutboundRequest) string {
	t.Helper()
	inv := r.Invoke(req)
	if inv.HasErr || inv.Ended {
		t.Fatalf("invocation rejected: %+v", inv)
	}
	return string(inv.Response.Body)
}

func TestGrantShapes(t *testing.T) {
	for _, code := range []string{
		`async () => (req) => new Response('fn ' + new URL(req.url).pathname)`,
		`async () => ({ fetch: async (req) => new Response('obj ' + req.method) })`,
		`async () => { const h = { n: 1 }; h.fetch = function (req) { return new Response('this ' + this.n) }; return h }`,
	} {
		res, r := retain(t, job(code), nil)
		if res.HasError || res.ResultJSON != "" || !reflect.DeepEqual(res.Handles, []string{HandleFetch}) {
			t.Fatalf("%s: grant envelope %+v", code, res)
		}
		got := body(t, r, get("/x"))
		if !strings.HasPrefix(got, "fn /x") && got != "obj GET" && got != "this 1" {
			t.Fatalf("%s: answered %q", code, got)
		}
	}
}

func TestNoGrantForOtherShapes(t *testing.T) {
	for code, want := range map[string]string{
		`async () => ({ fetch: 1 })`:   `{"fetch":1}`,
		`async () => 42`:               `42`,
		`async () => ({ a: () => 1 })`: `{}`,
	} {
		j := job(code)
		j.RetainHandles = true
		res, r := runRetained(t, context.Background(), j, nil)
		if r != nil || res.ResultJSON != want || res.Handles != nil {
			t.Fatalf("%s: %+v retained=%v", code, res, r != nil)
		}
	}
	// Without RetainHandles a handler serializes like any value.
	res, r := runRetained(t, context.Background(), job(`async () => ({ fetch() {} })`), nil)
	if r != nil || res.ResultJSON != `{}` || res.Handles != nil {
		t.Fatalf("without retainHandles: %+v", res)
	}
}

func TestRunLogsDeliveredAndInvocationConsoleDiscarded(t *testing.T) {
	res, r := retain(t, job(`async () => { console.log('at grant'); return (req) => { console.log('in handler'); return new Response('ok') } }`), nil)
	if len(res.Logs) != 1 || res.Logs[0].Text != "at grant" {
		t.Fatalf("logs = %v", res.Logs)
	}
	if got := body(t, r, get("/")); got != "ok" {
		t.Fatalf("answered %q", got)
	}
	if logs := r.s.console.Lines(); len(logs) != 1 {
		t.Fatalf("invocation console was kept: %v", logs)
	}
}

func TestModuleStatePersists(t *testing.T) {
	_, r := retain(t, job(`async () => { let n = 0; return () => new Response(String(++n)) }`), nil)
	for i := 1; i <= 100; i++ {
		if got := body(t, r, get("/")); got != fmt.Sprint(i) {
			t.Fatalf("invocation %d answered %q", i, got)
		}
	}
}

func TestRejectionsKeepServing(t *testing.T) {
	_, r := retain(t, job(`async () => { let n = 0; return async (req) => {
		n++
		const p = new URL(req.url).pathname
		if (p === '/throw') throw new Error('handler says no')
		if (p === '/value') return { status: 200 }
		if (p === '/big') return new Response('x'.repeat(200000))
		if (p === '/error') return Response.error()
		return new Response('n=' + n, { status: 201, headers: { 'x-n': String(n) } })
	} }`), nil)
	bigAnswer := protocol.HandleAnswerWireSize(protocol.OutboundResponse{Status: 200,
		Headers: []protocol.Header{{"content-type", "text/plain;charset=UTF-8"}}, Body: make([]byte, 200000)})
	for path, want := range map[string]string{
		"/throw": "handler says no",
		"/value": protocol.NewNotAResponseError().Error(),
		"/big":   protocol.NewPayloadTooLargeError(protocol.PartHandleAnswer, bigAnswer, protocol.PayloadLimit).Error(),
		"/error": protocol.NewNetworkErrorResponseError().Error(),
	} {
		inv := r.Invoke(get(path))
		if !inv.HasErr || inv.Ended || inv.Err != want {
			t.Fatalf("%s: %+v, want the rejection %q", path, inv, want)
		}
	}
	inv := r.Invoke(protocol.OutboundRequest{Method: "POST", URL: "https://h.test/ok", Body: []byte("hi")})
	if inv.HasErr || inv.Response.Status != 201 || string(inv.Response.Body) != "n=5" ||
		!reflect.DeepEqual(inv.Response.Headers, []protocol.Header{{"x-n", "5"}, {"content-type", "text/plain;charset=UTF-8"}}) {
		t.Fatalf("after rejections: %+v", inv)
	}
	// A request that cannot become a Request is rejected, not fatal.
	if inv := r.Invoke(protocol.OutboundRequest{Method: "GET", URL: "/relative"}); !inv.HasErr || inv.Ended {
		t.Fatalf("relative URL: %+v", inv)
	}
}

func TestInvocationsRunOneAtATime(t *testing.T) {
	_, r := retain(t, job(`async () => { let active = 0, max = 0
		return async () => { active++; max = Math.max(max, active); await new Promise(r => setTimeout(r, 5)); active--; return new Response(String(max)) } }`), nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := body(t, r, get("/")); got != "1" {
				t.Errorf("two invocations overlapped: max %s", got)
			}
		}()
	}
	wg.Wait()
}

func TestInvocationTimeoutEndsTheSession(t *testing.T) {
	j := job(`async () => (req) => { if (req.url.endsWith('/spin')) { while (true) {} } return new Response('ok') }`)
	j.TimeoutMs = 300
	_, r := retain(t, j, nil)
	if got := body(t, r, get("/")); got != "ok" {
		t.Fatalf("answered %q", got)
	}
	inv := r.Invoke(get("/spin"))
	want := protocol.NewExecutionTimeoutError(300).Error()
	if !inv.Ended || inv.Err != want {
		t.Fatalf("spin: %+v", inv)
	}
	if inv := r.Invoke(get("/")); !inv.Ended || inv.Err != want {
		t.Fatalf("after the timeout: %+v", inv)
	}
}

func TestEachInvocationGetsAFreshBound(t *testing.T) {
	// Each invocation waits 100 ms of timers under a 1.5 s bound, which
	// leaves it room on a busy machine; sixteen of them spend more than one
	// bound in total.
	j := job(`async () => async () => { await new Promise(r => setTimeout(r, 100)); return new Response('ok') }`)
	j.TimeoutMs = 1500
	_, r := retain(t, j, nil)
	for i := range 16 {
		if got := body(t, r, get("/")); got != "ok" {
			t.Fatalf("invocation %d answered %q", i, got)
		}
	}
}

func TestTimersLiveBetweenInvocations(t *testing.T) {
	_, r := retain(t, job(`async () => { let ticks = 0; setInterval(() => ticks++, 5); return () => new Response(String(ticks)) }`), nil)
	first := body(t, r, get("/"))
	time.Sleep(300 * time.Millisecond)
	second := body(t, r, get("/"))
	if first == second {
		t.Fatalf("the interval did not run between invocations: %s then %s", first, second)
	}
}

func TestHandlerToolCallIsCompleted(t *testing.T) {
	h := &fakeHost{}
	j := job(`async () => async () => { try { await store.x() ; return new Response('reached') } catch (e) { return new Response(e.message) } }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"x"}}}
	j.HasDispatch = true
	_, r := retain(t, j, h)
	if got := body(t, r, get("/")); got != protocol.CompletedText {
		t.Fatalf("tool call from a handler answered %q", got)
	}
	if len(h.seen()) != 0 {
		t.Fatalf("the host saw %v", h.seen())
	}
}

func TestCancelEndsTheSessionWithTheCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	j := job(`async () => () => new Response('ok')`)
	j.RetainHandles = true
	_, r := runRetained(t, ctx, j, nil)
	if r == nil {
		t.Fatal("no grant")
	}
	mem := protocol.NewMemoryLimitError(128)
	cancel(mem)
	<-r.Done()
	if inv := r.Invoke(get("/")); !inv.Ended || inv.Err != mem.Error() || inv.Failure != protocol.FailureMemory || r.EndFailure() != protocol.FailureMemory {
		t.Fatalf("after the cancel: %+v, end %q", inv, r.EndFailure())
	}
}

func TestCloseEndsTheSession(t *testing.T) {
	_, r := retain(t, job(`async () => { setInterval(() => {}, 1); return () => new Response('ok') }`), nil)
	r.Close()
	r.Close()
	if inv := r.Invoke(get("/")); !inv.Ended || inv.HasErr || inv.Failure != protocol.FailureNone {
		t.Fatalf("after Close: %+v", inv)
	}
	if r.EndText() != "" || r.EndFailure() != protocol.FailureNone {
		t.Fatalf("end text %q (%q)", r.EndText(), r.EndFailure())
	}
}

func TestTimerExceptionAfterTheGrantIsDiscarded(t *testing.T) {
	_, r := retain(t, job(`async () => { let n = 0; setInterval(() => { n++; throw new Error('nobody catches this') }, 5); return () => new Response(String(n)) }`), nil)
	time.Sleep(100 * time.Millisecond)
	if got := body(t, r, get("/")); got == "0" {
		t.Fatalf("the interval never ran: %q", got)
	}
}

// FuzzRetainedInvoke feeds arbitrary serialized requests, as a wire may
// deliver them, to a retained handler: each is answered or rejected, and
// the session keeps serving.
func FuzzRetainedInvoke(f *testing.F) {
	f.Add("GET", "https://h.test/", "x-a", "1", []byte(nil))
	f.Add("POST", "https://h.test/p?q=1#f", "content-type", "text/plain", []byte("body"))
	f.Add("GET", "/relative", "", "", []byte{})
	f.Add("GET", "https://h.test/", "bad name", "v", []byte("x"))
	f.Add("CONNECT", "https://h.test/", "x", "a\nb", []byte(nil))
	f.Add("", "", "", "", []byte(nil))
	f.Add("ge\x00t", "http://[::1", "\xff", "\xff", []byte{0xff})
	j := job(`async () => async (req) => new Response(req.method + ' ' + req.url + ' ' + [...req.headers].length + ' ' + (await req.arrayBuffer()).byteLength)`)
	j.RetainHandles = true
	_, r := runRetained(f, context.Background(), j, nil)
	if r == nil {
		f.Fatal("no grant")
	}
	defer r.Close()
	f.Fuzz(func(t *testing.T, method, url, name, value string, body []byte) {
		req := protocol.OutboundRequest{Method: method, URL: url, Body: body}
		if name != "" {
			req.Headers = []protocol.Header{{name, value}}
		}
		inv := r.Invoke(req)
		if inv.Ended {
			t.Fatalf("the session ended on %+v: %q", req, inv.Err)
		}
		if inv.HasErr && inv.Err == "" {
			t.Fatalf("a rejection without text for %+v", req)
		}
	})
}
