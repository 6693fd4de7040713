package local

import (
	"strconv"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// A result's failure kind crosses the pipe as the sandbox set it: a run that
// throws a bound's text word for word failed by throwing, and neither that
// nor a bound the sandbox held costs the worker its process.
func TestFailureKindCrossesThePipe(t *testing.T) {
	// Wide RSS and address-space allowances, so that only the watchdog
	// ends the growing run (a race build's shadow memory inflates both).
	e := newPool(t, Options{PoolSize: 1, MemoryLimitMB: 64, RSSHeadroomMB: 2048, AddressSpaceHeadroomMB: 8192})
	var placed []*worker // Execute calls it before it returns, and the runs go one at a time
	e.placed = func(w *worker) { placed = append(placed, w) }
	timeoutText := protocol.NewExecutionTimeoutError(400).Error()
	memoryText := protocol.NewMemoryLimitError(64).Error()
	for _, c := range []struct {
		name, code, text string
		kind             protocol.FailureKind
	}{
		{"the timeout text thrown", `async () => { throw new Error(` + strconv.Quote(timeoutText) + `) }`, timeoutText, protocol.FailureThrown},
		{"the memory text thrown", `async () => { throw new Error(` + strconv.Quote(memoryText) + `) }`, memoryText, protocol.FailureThrown},
		{"the timeout bound", `async () => { while (true) {} }`, timeoutText, protocol.FailureTimeout},
		{"the memory bound", `async () => { const keep = []; while (true) keep.push('x'.repeat(1 << 16) + keep.length) }`, memoryText, protocol.FailureMemory},
		{"success", `async () => 1`, "", protocol.FailureNone},
	} {
		timeout := protocol.TimeoutOf(400)
		if c.kind == protocol.FailureMemory {
			timeout = protocol.TimeoutOf(60000) // the growth, not the clock
		}
		res, err := e.Execute(testCtx(t), &protocol.ExecuteRequest{Code: c.code, Timeout: timeout})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Failure != c.kind || res.Error != c.text || res.HasError != (c.text != "") {
			t.Fatalf("%s: failure %q with %q, want %q with %q", c.name, res.Failure, res.Error, c.kind, c.text)
		}
	}
	for _, w := range placed {
		if w != placed[0] {
			t.Fatalf("a run was placed on another worker: %p, then %p", placed[0], w)
		}
	}
	if s := e.Stats(); s.TimeoutKills+s.RSSKills+s.OutOfMemory+s.WorkersCrashed != 0 || s.HeapLimits != 1 {
		t.Fatalf("a process layer acted, or the watchdog did not: %+v", s)
	}
}

// A request the executor refuses before any worker sees it fails with the
// kind its refusal is.
func TestFailureKindOfARefusedRequest(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	res, err := e.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => 1", Modules: protocol.ModuleMap{
		"./a": {Kind: protocol.KindJS, Source: "export default 1"},
		"a":   {Kind: protocol.KindJS, Source: "export default 2"},
	}})
	want := protocol.NewModuleKeyCollisionError("a", []string{"./a", "a"}).Error()
	if err != nil || res.Error != want || res.Failure != protocol.FailureThrown {
		t.Fatalf("got %+v, %v; want %q, thrown", res, err, want)
	}
}

// A handler that throws a bound's text is rejected with that text and its
// handles serve on; only a bound the worker reports as one closes them.
func TestHandlesThrownBoundTextKeepsServing(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	closed := make(chan string, 1)
	timeoutText := protocol.NewExecutionTimeoutError(400).Error()
	id := grantWith(t, e, &protocol.ExecuteRequest{
		Code: `async () => (req) => {
			if (req.url.endsWith('/throw')) throw new Error(` + strconv.Quote(timeoutText) + `)
			if (req.url.endsWith('/spin')) while (true) {}
			return new Response('ok')
		}`,
		Timeout: protocol.TimeoutOf(400),
	}, protocol.Policy{HandlesClosed: func(id string) { closed <- id }})
	_, err := e.InvokeHandle(testCtx(t), id, "fetch", getReq("/throw"))
	if err == nil || err.Error() != timeoutText || protocol.FailureOf(err) != protocol.FailureThrown {
		t.Fatalf("a handler throwing the timeout text: %v (%q)", err, protocol.FailureOf(err))
	}
	if got := invokeBody(t, e, id, "/"); got != "ok" {
		t.Fatalf("after the throw: %q", got)
	}
	select {
	case <-closed:
		t.Fatal("a thrown text closed the handles")
	default:
	}
	_, err = e.InvokeHandle(testCtx(t), id, "fetch", getReq("/spin"))
	if err == nil || err.Error() != timeoutText || protocol.FailureOf(err) != protocol.FailureTimeout {
		t.Fatalf("a spinning handler: %v (%q)", err, protocol.FailureOf(err))
	}
	expectHook(t, closed, id, "the bound")
	wantClosed(t, e, id)
}
