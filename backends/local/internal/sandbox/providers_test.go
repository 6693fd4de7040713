package sandbox

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// The example of the contract's Providers chapter: every call reaches the
// dispatch, undeclared tools and providers included.
func TestProvidersEveryCallReachesDispatch(t *testing.T) {
	h := &fakeHost{}
	j := job(`async () => {
    await store.listOrders()
    await store.deleteOrders()
    await __dispatch('crm', 'listOrders', '')

    return 'every call reached the dispatch'
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"listOrders"}}}
	j.HasDispatch = true
	r := runJob(t, j, h)
	if got := result(t, r); got != "every call reached the dispatch" {
		t.Fatalf("result = %#v", got)
	}
	if len(r.Logs) != 0 {
		t.Fatalf("logs = %#v", r.Logs)
	}
	want := []call{{"store", "listOrders", ""}, {"store", "deleteOrders", ""}, {"crm", "listOrders", ""}}
	if got := h.seen(); !reflect.DeepEqual(got, want) {
		t.Fatalf("seen = %#v, want %#v", got, want)
	}
}

func TestProvidersArgumentPacking(t *testing.T) {
	h := &fakeHost{}
	j := job(`async () => {
    await one.a()
    await one.b({ customer: 'ada' })
    await one.c(['x', 'y'])
    await one.d('s', 2)
    await pos.a()
    await pos.b('ada', 3)
    await pos.c(['x'])
    return true
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "one"}, {Name: "pos", PositionalArgs: true}}
	j.HasDispatch = true
	result(t, runJob(t, j, h))
	want := []call{
		{"one", "a", ""}, {"one", "b", `{"customer":"ada"}`}, {"one", "c", `[["x","y"]]`}, {"one", "d", `"s"`},
		{"pos", "a", ""}, {"pos", "b", `["ada",3]`}, {"pos", "c", `[["x"]]`},
	}
	if got := h.seen(); !reflect.DeepEqual(got, want) {
		t.Fatalf("seen = %#v\nwant %#v", got, want)
	}
	// What the dispatch grammar reads back out of each.
	for _, c := range want {
		if _, err := protocol.ArgsFromJSON(c.Args); err != nil {
			t.Errorf("%q does not read as arguments: %v", c.Args, err)
		}
	}
}

func TestProvidersEnvelopes(t *testing.T) {
	h := &fakeHost{answer: func(c call) (string, error) {
		switch c.Tool {
		case "ok":
			return `{"result":{"id":"o1","total":42}}`, nil
		case "bytes":
			return `{"result":{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}}`, nil
		case "fails":
			return `{"error":"No such customer."}`, nil
		case "outside":
			return `[1,2]`, nil
		case "notjson":
			return `nope`, nil
		case "empty":
			return `{}`, nil
		case "broken":
			return "", errors.New("the pipe broke")
		}
		return `{"result":null}`, nil
	}}
	j := job(`async () => {
    const out = {}
    out.ok = await store.ok()
    const b = await store.bytes()
    out.bytes = [b instanceof Uint8Array, Array.from(b)]
    out.emptyValue = String(await store.empty())
    for (const name of ['fails', 'outside', 'notjson', 'empty', 'broken']) {
      try { await store[name](); out[name] = 'no throw' } catch (e) { out[name] = [e instanceof Error, e.message] }
    }
    return out
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	got := result(t, runJob(t, j, h)).(map[string]any)
	want := map[string]any{
		"ok":      map[string]any{"id": "o1", "total": 42.0},
		"bytes":   []any{true, []any{1.0, 2.0, 3.0, 255.0}},
		"fails":   []any{true, "No such customer."},
		"outside": []any{true, protocol.OutsideEnvelopeText},
		"notjson": []any{true, protocol.OutsideEnvelopeText},
		"empty":   "no throw",
		"broken":  []any{true, "the pipe broke"},
		// {} is {"result": undefined} as JSON writes it.
		"emptyValue": "undefined",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestProvidersWithoutDispatch(t *testing.T) {
	h := &fakeHost{}
	j := job(`async () => {
    try { await store.listOrders() } catch (e) { return e.message }
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = false
	if got := result(t, runJob(t, j, h)); got != protocol.NewToolNotFoundError("listOrders").Error() {
		t.Fatalf("result = %#v", got)
	}
	if len(h.seen()) != 0 {
		t.Fatal("a run without dispatch reached the host")
	}
}

func TestProvidersCallAfterCompletion(t *testing.T) {
	h := &fakeHost{}
	j := job(`async () => {
    Promise.resolve().then(() => Promise.resolve()).then(() => store.late().catch((e) => console.log(e.message)))
    return 1
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	r := runJob(t, j, h)
	result(t, r)
	if len(h.seen()) != 0 {
		t.Fatalf("a call after settlement reached the host: %v", h.seen())
	}
	// The late call's rejection settles in the same job drain as the
	// result, so the completed text reaches the console.
	if len(r.Logs) != 1 || r.Logs[0].Text != protocol.CompletedText {
		t.Fatalf("logs = %#v, want the completed text", r.Logs)
	}
}

func TestProvidersProxyIsInert(t *testing.T) {
	j := job(`async () => {
    const out = [typeof store.then, typeof store.toJSON, typeof store[Symbol.iterator], JSON.stringify({ s: store })]
    const same = await store
    out.push(same === store)
    return out
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	got := result(t, runJob(t, j, nil))
	want := []any{"undefined", "undefined", "undefined", `{"s":{}}`, true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	// return store settles (the proxy is not a thenable).
	j = job(`async () => store`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	if got := result(t, runJob(t, j, nil)); !reflect.DeepEqual(got, map[string]any{}) {
		t.Fatalf("return store = %#v", got)
	}
}

func TestProvidersPreludeAndProxySource(t *testing.T) {
	h := &fakeHost{answer: func(c call) (string, error) { return `{"result":"` + c.Provider + "." + c.Tool + `"}`, nil }}
	j := job(`async () => [await store.step('x'), await store.list(), await custom.anything(), typeof other.helper, declared.ok()]`)
	j.Providers = []protocol.ProviderDescriptor{
		{Name: "store", Prelude: "store.step = async (s) => 'step ' + s + ' ' + typeof custom"},
		{Name: "custom", ProxySource: "{ anything: async () => (await __parseForDispatch(await __dispatch('custom', 'raw', ''))).result + '!' }"},
		{Name: "other", Prelude: "other.helper = () => store"},
		{Name: "declared", ProxySource: "const declared = { ok: () => 'declared by statements' }"},
	}
	j.HasDispatch = true
	got := result(t, runJob(t, j, h))
	want := []any{"step x object", "store.list", "custom.raw!", "function", "declared by statements"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

func TestProvidersValidatedFirst(t *testing.T) {
	for _, ps := range [][]protocol.ProviderDescriptor{
		{{Name: "1store"}},
		{{Name: "class"}},
		{{Name: "__dispatch"}},
		{{Name: "a"}, {Name: "a"}},
	} {
		j := job("async () => 1")
		j.Providers = ps
		want := protocol.ValidateProviders(ps)
		if want == nil {
			t.Fatalf("%v: ValidateProviders accepted it", ps)
		}
		wantError(t, runJob(t, j, nil), want.Error())
	}
}

// The entry scope provides exactly the contract's names, and nothing of
// the sandbox's machinery is global.
func TestEntryScopeNames(t *testing.T) {
	j := job(`async () => [typeof __dispatch, typeof __stringifyForDispatch, typeof __parseForDispatch,
    __BINARY_TAG, typeof __encodeBinaryValue, typeof __decodeBinaryValue, typeof __encodeBase64, typeof __decodeBase64,
    typeof globalThis.__dispatch, typeof require, typeof module, typeof exports, typeof GoError]`)
	got := result(t, runJob(t, j, nil))
	want := []any{"function", "function", "function", protocol.BinaryTag, "function", "function", "function", "function",
		"undefined", "undefined", "undefined", "undefined", "undefined"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
}

func TestToolCallPayloadBound(t *testing.T) {
	h := &fakeHost{}
	j := job(`async () => {
    const big = 'x'.repeat(` + itoa(protocol.PayloadLimit) + `)
    try { await store.save(big) } catch (e) { return e.message }
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	got := result(t, runJob(t, j, h))
	// Each part as a JSON string: "store", "save" and the arguments' text
	// "\"xx…\"" (its own quotes escaped).
	size := 7 + 6 + (protocol.PayloadLimit + 6)
	if size != protocol.ToolCallWireSize("store", "save", `"`+strings.Repeat("x", protocol.PayloadLimit)+`"`) {
		t.Fatal("size arithmetic disagrees with the protocol")
	}
	want := protocol.NewPayloadTooLargeError(protocol.PartToolCall, size, protocol.PayloadLimit).Error()
	if got != want {
		t.Fatalf("got %#v, want %q", got, want)
	}
	if len(h.seen()) != 0 {
		t.Fatal("an oversized call reached the host")
	}
	// Just under the bound passes.
	j.Code = `async () => { await store.save('x'.repeat(` + itoa(protocol.PayloadLimit-100) + `)); return 'sent' }`
	if got := result(t, runJob(t, j, h)); got != "sent" {
		t.Fatalf("got %#v", got)
	}
}

func TestRunAnswerPayloadBound(t *testing.T) {
	r := runJob(t, job(`async () => 'x'.repeat(`+itoa(protocol.PayloadLimit)+`)`), nil)
	// The result's JSON text "xx…" as a JSON string: "\"xx…\"".
	wantError(t, r, protocol.NewPayloadTooLargeError(protocol.PartRunAnswer, protocol.PayloadLimit+6, protocol.PayloadLimit).Error())
	r = runJob(t, job(`async () => { throw new Error('e'.repeat(`+itoa(protocol.PayloadLimit)+`)) }`), nil)
	wantError(t, r, protocol.NewPayloadTooLargeError(protocol.PartRunAnswer, protocol.PayloadLimit+2, protocol.PayloadLimit).Error())
	// Just under the bound, the answer goes through.
	r = runJob(t, job(`async () => 'x'.repeat(`+itoa(protocol.PayloadLimit-6)+`)`), nil)
	if r.HasError {
		t.Fatalf("an answer at the bound failed: %q", r.Error)
	}
}

func TestHostErrorTextIsPlain(t *testing.T) {
	h := &fakeHost{answer: func(c call) (string, error) { return "", errors.New("dial tcp: refused") }}
	j := job(`async () => { try { await store.x() } catch (e) { return [e.constructor === Error, 'value' in e, Object.keys(e)] } }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	got := result(t, runJob(t, j, h))
	if !reflect.DeepEqual(got, []any{true, false, []any{}}) {
		t.Fatalf("got %#v", got)
	}
}

func TestRunCancelledWithProtocolCause(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	h := &fakeHost{answer: func(c call) (string, error) {
		cancel(protocol.NewMemoryLimitError(64))
		return `{"result":1}`, nil
	}}
	j := job(`async () => { await store.x(); while (true) {} }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	r := envelope(t)(Run(ctx, j, h))
	wantError(t, r, protocol.NewMemoryLimitError(64).Error())
}

// Provider names that CommonJS uses (module, exports, require) are legal
// and work in both compile paths: with and without an import line.
func TestProvidersNamedLikeCommonJS(t *testing.T) {
	h := &fakeHost{answer: func(c call) (string, error) { return `{"result":"` + c.Provider + `"}`, nil }}
	for _, code := range []string{
		"async () => [await module.a(), await exports.b(), await require.c()]",
		"import { greet } from 'greeter'\nasync () => [await module.a(), await exports.b(), await require.c()]",
	} {
		j := job(code)
		j.Modules = greeter
		j.Providers = []protocol.ProviderDescriptor{{Name: "module"}, {Name: "exports"}, {Name: "require"}}
		j.HasDispatch = true
		got := result(t, runJob(t, j, h))
		if !reflect.DeepEqual(got, []any{"module", "exports", "require"}) {
			t.Errorf("%q: got %#v", code, got)
		}
	}
}

// Many calls at once all complete, at most MaxConcurrentHostCalls at the
// host at a time.
func TestConcurrentToolCallsAreBounded(t *testing.T) {
	var mu sync.Mutex
	inFlight, peak := 0, 0
	h := &fakeHost{answer: func(c call) (string, error) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return `{"result":` + c.Args + `}`, nil
	}}
	j := job(`async () => (await Promise.all(Array.from({ length: 500 }, (_, i) => store.echo(i)))).reduce((a, b) => a + b, 0)`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	j.TimeoutMs = 30000
	if got := result(t, runJob(t, j, h)); got != 124750.0 {
		t.Fatalf("got %#v", got)
	}
	if peak > MaxConcurrentHostCalls || peak < 2 {
		t.Fatalf("peak %d calls at the host at once, bound %d", peak, MaxConcurrentHostCalls)
	}
	if len(h.seen()) != 500 {
		t.Fatalf("%d calls reached the host", len(h.seen()))
	}
}

// envelopeHost is a Host over the protocol's real envelope dispatch.
type envelopeHost struct{ dispatch protocol.DispatchFunc }

func (h envelopeHost) Dispatch(ctx context.Context, provider, tool, argsJSON string) (string, error) {
	return h.dispatch(ctx, provider, tool, argsJSON)
}

func (h envelopeHost) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{}, context.Canceled
}

// The Dispatch grammar chapter's three envelopes, composed by the
// protocol's createEnvelopeDispatch, as the program sees them.
func TestDispatchGrammarEnvelopes(t *testing.T) {
	state := protocol.NewEnvelopeState()
	var args []any
	h := envelopeHost{protocol.NewEnvelopeDispatch(state, func(ctx context.Context, provider, tool string, a []any) (any, error) {
		switch tool {
		case "listOrders":
			args = a
			return map[string]any{"id": "o1", "total": 42.0}, nil
		case "failing":
			return nil, errors.New("No such customer.")
		case "nothing":
			return jsvalue.Undefined, nil
		case "bytes":
			return []byte{1, 2, 3, 255}, nil
		}
		state.Complete()
		return nil, nil
	})}
	j := job(`async () => {
    const out = [await store.listOrders('ada', 3)]
    try { await store.failing() } catch (e) { out.push(e.message) }
    out.push(typeof (await store.nothing()))
    const b = await store.bytes()
    out.push(b instanceof Uint8Array ? Array.from(b) : 'not bytes')
    await store.complete()
    try { await store.listOrders() } catch (e) { out.push(e.message) }
    return out
  }`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "store", PositionalArgs: true}}
	j.HasDispatch = true
	got := result(t, runJob(t, j, h))
	want := []any{map[string]any{"id": "o1", "total": 42.0}, "No such customer.", "undefined", []any{1.0, 2.0, 3.0, 255.0}, protocol.CompletedText}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if !reflect.DeepEqual(args, []any{"ada", 3.0}) {
		t.Fatalf("the tool got %#v", args)
	}
}

// TestToolCallsPastTheBacklogReject: with every call at the host held, the
// call past MaxHostCallsInFlight rejects at once with the backlog text,
// and the ones before it are still waiting (the queue does not grow).
func TestToolCallsPastTheBacklogReject(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	h := &fakeHost{answer: func(c call) (string, error) {
		<-release
		return `{"result":null}`, nil
	}}
	j := job(fmt.Sprintf(`async () => {
		const calls = Array.from({ length: %d }, () => store.hold());
		let settled = 0;
		for (const c of calls) c.then(() => settled++, () => settled++);
		try { await store.hold(); return 'accepted'; } catch (e) { await null; return [e.message, settled]; }
	}`, MaxHostCallsInFlight))
	j.Providers = []protocol.ProviderDescriptor{{Name: "store"}}
	j.HasDispatch = true
	j.TimeoutMs = 30000
	got := result(t, runJob(t, j, h))
	want := []any{"Too many host calls in flight: at most 4160 may wait at once. Await some before starting more.", 0.0}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}
