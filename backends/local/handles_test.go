package local

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// Execution handles through the pool, with real JavaScript: one test per
// transition of the contract's state diagram, and the bounds around them.

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// grant executes req with RetainHandles and returns the executionId,
// failing the test unless the handles were granted.
func grant(t testing.TB, e *Executor, req *protocol.ExecuteRequest) string {
	t.Helper()
	return grantWith(t, e, req, protocol.Policy{})
}

// grantWith is grant under policy p.
func grantWith(t testing.TB, e *Executor, req *protocol.ExecuteRequest, p protocol.Policy) string {
	t.Helper()
	req.RetainHandles = true
	res, err := e.ExecuteWith(testCtx(t), req, p)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if res.HasError || res.ResultJSON != "" || res.ExecutionID == "" || len(res.Handles) != 1 || res.Handles[0] != "fetch" {
		t.Fatalf("no grant: %+v", res)
	}
	return res.ExecutionID
}

func getReq(path string) protocol.OutboundRequest {
	return protocol.OutboundRequest{Method: "GET", URL: "https://handler.test" + path}
}

// invokeBody invokes and returns the body, failing on any error.
func invokeBody(t testing.TB, e *Executor, id, path string) string {
	t.Helper()
	resp, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq(path))
	if err != nil {
		t.Fatalf("InvokeHandle(%s): %v", path, err)
	}
	return string(resp.Body)
}

// wantClosed asserts both calls meet HANDLES_CLOSED with the contract's text.
func wantClosed(t *testing.T, e *Executor, id string) {
	t.Helper()
	want := protocol.NewHandlesClosedError(id).Error()
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
	if protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != want {
		t.Fatalf("InvokeHandle after close: %v, want HANDLES_CLOSED", err)
	}
	if err := e.CloseHandles(testCtx(t), id); protocol.CodeOf(err) != protocol.CodeHandlesClosed || err.Error() != want {
		t.Fatalf("CloseHandles after close: %v, want HANDLES_CLOSED", err)
	}
}

const counterHandler = `async () => { let n = 0; return { fetch: (req) => new Response(String(++n), { status: 200, headers: { 'x-path': new URL(req.url).pathname } }) } }`

// [*] --> Retained, Retained --> Retained, Retained --> Closed (closeHandles).
func TestHandlesGrantInvokeClose(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{Code: counterHandler})
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("executionId %q is not 128 random bits", id)
	}
	resp, err := e.InvokeHandle(testCtx(t), id, "fetch", protocol.OutboundRequest{Method: "POST", URL: "https://h.test/a/b", Body: []byte("x")})
	if err != nil || resp.Status != 200 || string(resp.Body) != "1" {
		t.Fatalf("first invocation: %+v, %v", resp, err)
	}
	found := false
	for _, h := range resp.Headers {
		found = found || (h == protocol.Header{"x-path", "/a/b"})
	}
	if !found {
		t.Fatalf("headers %v lack x-path", resp.Headers)
	}
	if err := e.CloseHandles(testCtx(t), id); err != nil {
		t.Fatalf("CloseHandles: %v", err)
	}
	wantClosed(t, e, id)
	// The worker went back to rotation: the pool of one runs again.
	expectOne(t, e)
	if s := e.Stats(); s.HandlesGranted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestHandlesNoGrantForOtherShapes(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	for code, want := range map[string]string{
		`async () => ({ fetch: 'no' })`:         `{"fetch":"no"}`,
		`async () => 7`:                         `7`,
		`async () => { throw new Error('no') }`: ``,
	} {
		res, err := e.Execute(testCtx(t), &protocol.ExecuteRequest{Code: code, RetainHandles: true})
		if err != nil || res.ResultJSON != want || res.ExecutionID != "" || res.Handles != nil {
			t.Fatalf("%s: %+v, %v", code, res, err)
		}
	}
	// Without retainHandles, a handler is a value like any other.
	res, err := e.Execute(testCtx(t), &protocol.ExecuteRequest{Code: `async () => ({ fetch() {} })`})
	if err != nil || res.ResultJSON != `{}` || res.ExecutionID != "" {
		t.Fatalf("without retainHandles: %+v, %v", res, err)
	}
	expectOne(t, e)
}

func TestHandlesCounterPersistsAcross100Invocations(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{Code: counterHandler})
	for i := 1; i <= 100; i++ {
		if got := invokeBody(t, e, id, "/"); got != fmt.Sprint(i) {
			t.Fatalf("invocation %d answered %q", i, got)
		}
	}
}

func TestHandlesConcurrentInvocationsRunInArrivalOrder(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	// Each invocation records its path, holds the handler until the test
	// lets the upstream answer, and reports how many ran at once.
	release := make(chan struct{})
	id := grant(t, e, &protocol.ExecuteRequest{
		Code: `async () => {
			const order = []; let active = 0, most = 0
			return async (req) => {
				active++; most = Math.max(most, active)
				order.push(new URL(req.url).pathname.slice(1))
				await fetch('https://upstream.test/')
				active--
				return new Response(JSON.stringify({ order, most }))
			}
		}`,
		Outbound: protocol.OutboundVia(func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return protocol.OutboundResponse{}, ctx.Err()
			}
			return protocol.OutboundResponse{Status: 200}, nil
		}),
	})
	const n = 8
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = invokeBody(t, e, id, fmt.Sprintf("/%d", i))
		}()
		// Arrival order: each call is at the handler (the first, whose
		// fetch holds it until all have come) or waiting for its turn
		// before the next starts.
		testutil.WaitFor(t, 10*time.Second, func() bool {
			s := e.Stats()
			return s.Parked == 1 && s.Invocations == i
		}, "invocation %d to wait its turn", i)
	}
	close(release)
	wg.Wait()
	var last struct {
		Order []string
		Most  int
	}
	if err := json.Unmarshal([]byte(bodies[n-1]), &last); err != nil {
		t.Fatalf("body %q: %v", bodies[n-1], err)
	}
	want := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	if fmt.Sprint(last.Order) != fmt.Sprint(want) || last.Most != 1 {
		t.Fatalf("order %v, at most %d at once; want %v one at a time", last.Order, last.Most, want)
	}
}

func TestHandlesRejectionsKeepServing(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{Code: `async () => { let n = 0; return { async fetch(req) {
		n++
		const p = new URL(req.url).pathname
		if (p === '/throw') throw new Error('No such order.')
		if (p === '/plain') return 'not a response'
		if (p === '/big') return new Response(new Uint8Array(200000))
		return new Response('n=' + n)
	} } }`})
	bigAnswer := protocol.HandleAnswerWireSize(protocol.OutboundResponse{Status: 200, Body: make([]byte, 200000)})
	for path, want := range map[string]string{
		"/throw": "No such order.",
		"/plain": protocol.NewNotAResponseError().Error(),
		"/big":   protocol.NewPayloadTooLargeError(protocol.PartHandleAnswer, bigAnswer, protocol.PayloadLimit).Error(),
	} {
		_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq(path))
		if err == nil || protocol.CodeOf(err) != "" || err.Error() != want {
			t.Fatalf("%s: %v, want the rejection %q", path, err, want)
		}
	}
	_, err := e.InvokeHandle(testCtx(t), id, "other", getReq("/"))
	if err == nil || err.Error() != protocol.NewHandleNotFoundError(id, "other", []string{"fetch"}).Error() || protocol.CodeOf(err) != "" {
		t.Fatalf("another handle name: %v", err)
	}
	if got := invokeBody(t, e, id, "/ok"); got != "n=4" {
		t.Fatalf("after the rejections: %q", got)
	}
}

// Retained --> Closed: the idle bound expires.
func TestHandlesIdleBound(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, HandlesIdleTimeout: time.Second})
	id := grant(t, e, &protocol.ExecuteRequest{Code: counterHandler})
	// Invocations keep it alive past the bound in total: six gaps of 200 ms
	// add up to more than the bound, and each leaves 800 ms for an
	// invocation on a busy machine under the race detector to arrive.
	for i := 1; i <= 6; i++ {
		if got := invokeBody(t, e, id, "/"); got != fmt.Sprint(i) {
			t.Fatalf("invocation %d answered %q", i, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().HandlesExpired == 1 }, "the idle bound to expire the handles")
	wantClosed(t, e, id)
	expectOne(t, e)
}

// Retained --> Closed: a run bound ends an invocation.
func TestHandlesInvocationTimeoutCloses(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{
		Code:    `async () => async (req) => { if (req.url.endsWith('/spin')) while (true) {} ; await new Promise((r) => setTimeout(r, 100)); return new Response('ok') }`,
		Timeout: protocol.TimeoutOf(1500),
	})
	// A fresh bound per invocation: sixteen of 100 ms each pass a 1.5 s
	// bound, and each leaves 1.4 s for the rest of its work on a busy
	// machine.
	for range 16 {
		if got := invokeBody(t, e, id, "/"); got != "ok" {
			t.Fatalf("answered %q", got)
		}
	}
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/spin"))
	if err == nil || err.Error() != protocol.NewExecutionTimeoutError(1500).Error() {
		t.Fatalf("spinning invocation: %v, want the timeout text", err)
	}
	wantClosed(t, e, id)
	expectOne(t, e)
}

// The parent's clock backs the sandbox's: Go code the interrupt cannot
// reach is killed at the bound plus the grace, with the timeout text.
func TestHandlesInvocationStuckInGoCodeIsKilled(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, KillGrace: 300 * time.Millisecond})
	id := grant(t, e, &protocol.ExecuteRequest{
		Code:    `async () => () => new Response(String(/^(a+)+(?=c)/.test('a'.repeat(40) + 'b')))`,
		Timeout: protocol.TimeoutOf(300),
	})
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
	if err == nil || err.Error() != protocol.NewExecutionTimeoutError(300).Error() || protocol.FailureOf(err) != protocol.FailureTimeout {
		t.Fatalf("stuck invocation: %v, want the timeout text", err)
	}
	wantClosed(t, e, id)
}

// Timers live between invocations, and only the memory limit ends what
// they do; the next invocation reports the memory text.
func TestHandlesTimerAllocatingUntilTheMemoryLimit(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, MemoryLimitMB: 64})
	id := grant(t, e, &protocol.ExecuteRequest{Code: `async () => {
		const keep = []
		setInterval(() => { for (let i = 0; i < 4; i++) keep.push('x'.repeat(1 << 16) + keep.length) }, 1)
		return () => new Response(String(keep.length))
	}`})
	if got := invokeBody(t, e, id, "/"); got == "" {
		t.Fatal("no answer")
	}
	testutil.WaitFor(t, 10*time.Second, func() bool {
		s := e.Stats()
		return s.HeapLimits+s.RSSKills+s.OutOfMemory > 0
	}, "the memory bound to end the handles")
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
	if err == nil || err.Error() != protocol.NewMemoryLimitError(64).Error() || protocol.FailureOf(err) != protocol.FailureMemory {
		t.Fatalf("after the memory limit: %v, want the memory text", err)
	}
	wantClosed(t, e, id)
	expectOne(t, e)
}

// Retained --> Closed: the worker under the execution crashes.
func TestHandlesWorkerCrashCloses(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{Code: counterHandler})
	e.mu.Lock()
	pid := e.handles[id].r.w.p.pid
	e.mu.Unlock()
	syscall.Kill(pid, syscall.SIGKILL)
	testutil.WaitFor(t, 10*time.Second, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.handles[id] == nil
	}, "the crashed worker's handles to close")
	wantClosed(t, e, id)
	expectOne(t, e)
}

// Retained --> Closed: the executor holding them shuts down.
func TestHandlesExecutorCloseEndsThem(t *testing.T) {
	e := newPool(t, Options{PoolSize: 2})
	reached := make(chan struct{}, 1)
	id := grant(t, e, &protocol.ExecuteRequest{Code: awaitUpstream, Outbound: parkedUpstream(reached), Timeout: protocol.TimeoutOf(60000)})
	errs := make(chan error, 1)
	go func() {
		_, err := e.InvokeHandle(context.Background(), id, "fetch", getReq("/"))
		errs <- err
	}()
	<-reached
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("the invocation in flight: %v, want CONNECTION_BROKEN", err)
	}
	if _, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/")); protocol.CodeOf(err) != protocol.CodeConnectionBroken {
		t.Fatalf("after Close: %v", err)
	}
}

// awaitUpstream is a handler whose every invocation waits on its upstream.
const awaitUpstream = `async () => async () => { await fetch('https://upstream.test/') }`

// parkedUpstream is an outbound function that tells reached it was called
// (the invocation is in flight at the handler) and answers only once its
// context ends.
func parkedUpstream(reached chan<- struct{}) protocol.Outbound {
	return protocol.OutboundVia(func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		reached <- struct{}{}
		<-ctx.Done()
		return protocol.OutboundResponse{}, ctx.Err()
	})
}

// Held handles count against the pool: with every worker held, a new
// execution waits in the queue, or is refused at its bound, and the
// handles keep serving.
// Held handles take a place in their own tenant's worker, and count
// against that tenant's share only: with one place per worker and one
// worker per tenant, the holder's next execution is refused (or waits for
// the close), while another tenant runs at once.
func TestHandlesCountAgainstTheirTenantOnly(t *testing.T) {
	e := newPool(t, Options{MaxWorkers: 3, RunsPerWorker: 1, QueueBound: -1, Shares: oneSlotEach})
	id := grantWith(t, e, &protocol.ExecuteRequest{Code: counterHandler}, protocol.Policy{Tenant: "a"})
	_, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"}, protocol.Policy{Tenant: "a"})
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("the holder's next execution: %v, want QUEUE_OVERFLOW", err)
	}
	res, err := e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 'other'"}, protocol.Policy{Tenant: "b"})
	if err != nil || res.ResultJSON != `"other"` {
		t.Fatalf("another tenant beside the held handles: %+v, %v", res, err)
	}
	if got := invokeBody(t, e, id, "/"); got != "1" {
		t.Fatalf("the handles after the refusal: %q", got)
	}
	if err := e.CloseHandles(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	res, err = e.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"}, protocol.Policy{Tenant: "a"})
	if err != nil || res.ResultJSON != "1" {
		t.Fatalf("after the close: %+v, %v", res, err)
	}

	// With room in the queue, the holder's new execution waits for the close.
	q := newPool(t, Options{MaxWorkers: 2, RunsPerWorker: 1, QueueBound: 1, Shares: oneSlotEach})
	id = grantWith(t, q, &protocol.ExecuteRequest{Code: counterHandler}, protocol.Policy{Tenant: "a"})
	done := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := q.ExecuteWith(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 'waited'"}, protocol.Policy{Tenant: "a"})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	testutil.WaitFor(t, 10*time.Second, func() bool { return q.Stats().Queued == 1 }, "one execution to queue")
	if got := invokeBody(t, q, id, "/"); got != "1" {
		t.Fatalf("the handles while one waits: %q", got)
	}
	if err := q.CloseHandles(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res == nil || res.ResultJSON != `"waited"` {
		t.Fatalf("the waiting execution: %+v", res)
	}
}

// oneSlotEach gives every tenant one worker process.
func oneSlotEach(string) Share { return Share{CPUSlots: 1} }

// A caller-supplied outbound function stays usable until the handles
// close, and a wait in it does not spend the invocation's bound; a tool
// call from a handler gets the completed text without reaching the host.
func TestHandlesKeepTheOutboundFunction(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	var mu sync.Mutex
	var seen []string
	dispatched := false
	id := grant(t, e, &protocol.ExecuteRequest{
		Code: `async () => async (req) => {
			const r = await fetch('https://upstream.test/' + new URL(req.url).pathname.slice(1))
			let tool
			try { await store.x(); tool = 'reached' } catch (e) { tool = e.message }
			return new Response(await r.text() + '|' + tool)
		}`,
		Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"x"}}},
		Dispatch: func(context.Context, string, string, string) (string, error) {
			mu.Lock()
			dispatched = true
			mu.Unlock()
			return `{"result":1}`, nil
		},
		Timeout: protocol.TimeoutOf(300),
		Outbound: protocol.OutboundVia(func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			mu.Lock()
			seen = append(seen, req.URL)
			mu.Unlock()
			select {
			case <-time.After(800 * time.Millisecond): // past the bound, on a stopped clock
			case <-ctx.Done():
				return protocol.OutboundResponse{}, ctx.Err()
			}
			return protocol.OutboundResponse{Status: 200, Body: []byte("from upstream")}, nil
		}),
	})
	if got := invokeBody(t, e, id, "/item"); got != "from upstream|"+protocol.CompletedText {
		t.Fatalf("answered %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[https://upstream.test/item]" || dispatched {
		t.Fatalf("outbound saw %v, dispatch reached %v", seen, dispatched)
	}
}

// Benchmark: invocations per second of a trivial handler through the pool.
func BenchmarkHandleInvoke(b *testing.B) {
	e := newPool(b, Options{PoolSize: 1})
	id := grant(b, e, &protocol.ExecuteRequest{Code: `async () => () => new Response('ok')`})
	ctx := context.Background()
	req := getReq("/")
	b.ResetTimer()
	for b.Loop() {
		resp, err := e.InvokeHandle(ctx, id, "fetch", req)
		if err != nil || string(resp.Body) != "ok" {
			b.Fatalf("%+v %v", resp, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "invocations/s")
}

// closeHandles during an invocation answers it with HANDLES_CLOSED and
// frees the worker.
func TestHandlesCloseDuringAnInvocation(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	reached := make(chan struct{}, 1)
	id := grant(t, e, &protocol.ExecuteRequest{Code: awaitUpstream, Outbound: parkedUpstream(reached), Timeout: protocol.TimeoutOf(60000)})
	errs := make(chan error, 1)
	go func() {
		_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
		errs <- err
	}()
	<-reached
	if err := e.CloseHandles(testCtx(t), id); err != nil {
		t.Fatalf("CloseHandles: %v", err)
	}
	if err := <-errs; protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("the invocation in flight: %v, want HANDLES_CLOSED", err)
	}
	wantClosed(t, e, id)
	expectOne(t, e)
}

// A timer that spins between invocations holds the isolate's only thread;
// an invocation behind it cannot start, and the parent's clock ends it
// with the timeout text.
//
// The bound is the wall clock the parent gives every invocation, the one
// that answers "armed" too: at 300 ms (and a 300 ms grace) a worker
// starved of the CPU by the suites running beside it (make test) missed
// it. A second, with the default grace, keeps the test's spinning to
// 1.5 s.
func TestHandlesTimerSpinningBetweenInvocations(t *testing.T) {
	const bound = 1000
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{
		Code:    `async () => () => { setTimeout(() => { while (true) {} }, 0); return new Response('armed') }`,
		Timeout: protocol.TimeoutOf(bound),
	})
	if got := invokeBody(t, e, id, "/"); got != "armed" {
		t.Fatalf("answered %q", got)
	}
	// The loop takes a due timer and an invocation that has arrived in
	// either order, so on a busy machine an invocation can come in ahead of
	// the timer armed before it (and arm one more). The first that comes in
	// behind a spinning timer is ended by the parent's clock.
	for try := 1; ; try++ {
		res, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
		if err == nil && try < 8 && string(res.Body) == "armed" {
			continue
		}
		if err == nil || err.Error() != protocol.NewExecutionTimeoutError(bound).Error() || protocol.FailureOf(err) != protocol.FailureTimeout {
			t.Fatalf("invocation %d behind a spinning timer: %v, want the timeout text", try, err)
		}
		break
	}
	wantClosed(t, e, id)
}

// A tool call still open when the run settles is answered (cancelled), so
// it does not hold the sandbox's clock stopped through later invocations.
func TestHandlesToolCallOpenAtTheGrant(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	id := grant(t, e, &protocol.ExecuteRequest{
		Code:      `async () => { store.slow().catch(() => {}); await new Promise((r) => setTimeout(r, 100)); return async () => { await new Promise((r) => setTimeout(r, 5000)); return new Response('late') } }`,
		Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"slow"}}},
		Dispatch: func(ctx context.Context, _, _, _ string) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		},
		Timeout: protocol.TimeoutOf(400),
	})
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
	if err == nil || err.Error() != protocol.NewExecutionTimeoutError(400).Error() {
		t.Fatalf("a handler waiting on a long timer: %v, want the timeout text", err)
	}
	// The sandbox's own clock reported it, not the parent's kill.
	if s := e.Stats(); s.TimeoutKills != 0 {
		t.Fatalf("stats %+v: the parent had to kill the worker", s)
	}
}

// The execution's countHostWaits applies to its invocations: a wait on the
// outbound function then spends the bound.
func TestHandlesCountHostWaits(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	yes := true
	id := grant(t, e, &protocol.ExecuteRequest{
		Code:           `async () => async () => new Response(await (await fetch('https://upstream.test/')).text())`,
		Timeout:        protocol.TimeoutOf(300),
		CountHostWaits: &yes,
		Outbound: protocol.OutboundVia(func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
			select {
			case <-time.After(1500 * time.Millisecond):
			case <-ctx.Done():
				return protocol.OutboundResponse{}, ctx.Err()
			}
			return protocol.OutboundResponse{Status: 200, Body: []byte("slow")}, nil
		}),
	})
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/"))
	if err == nil || err.Error() != protocol.NewExecutionTimeoutError(300).Error() {
		t.Fatalf("a slow outbound wait under countHostWaits: %v, want the timeout text", err)
	}
	wantClosed(t, e, id)
}

// Close leaves no goroutine of the handles behind: holders, host calls and
// readers all end with the executor.
func TestHandlesCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newPool(t, Options{PoolSize: 2, HandlesIdleTimeout: time.Second})
	outbound := protocol.OutboundVia(func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		<-ctx.Done()
		return protocol.OutboundResponse{}, ctx.Err()
	})
	a := grant(t, e, &protocol.ExecuteRequest{Code: `async () => async () => { fetch('https://x.test/').catch(() => {}); return new Response('a') }`, Outbound: outbound})
	invokeBody(t, e, a, "/")
	b := grant(t, e, &protocol.ExecuteRequest{Code: counterHandler})
	invokeBody(t, e, b, "/")
	testutil.WaitFor(t, 10*time.Second, func() bool { return e.Stats().HandlesExpired == 2 }, "both to expire at the idle bound")
	c := grant(t, e, &protocol.ExecuteRequest{Code: counterHandler})
	invokeBody(t, e, c, "/")
	e.Close()
	waitGoroutinesBack(t, before)
}

// An invocation that exhausts the memory limit rejects with the memory text
// and closes the handles.
func TestHandlesInvocationMemoryLimitCloses(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1, MemoryLimitMB: 64})
	id := grant(t, e, &protocol.ExecuteRequest{
		Code:    `async () => { const keep = []; return (req) => { if (req.url.endsWith('/grow')) while (true) keep.push('x'.repeat(1 << 16) + keep.length); return new Response('ok') } }`,
		Timeout: protocol.TimeoutOf(60000),
	})
	if got := invokeBody(t, e, id, "/"); got != "ok" {
		t.Fatalf("answered %q", got)
	}
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/grow"))
	if err == nil || err.Error() != protocol.NewMemoryLimitError(64).Error() || protocol.FailureOf(err) != protocol.FailureMemory {
		t.Fatalf("a growing invocation: %v, want the memory text", err)
	}
	wantClosed(t, e, id)
	expectOne(t, e)
}
