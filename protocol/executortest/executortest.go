// Package executortest is a conformance suite for protocol.Executor: the
// contract's examples and bounds, asserted through the Executor interface
// alone. Every executor of this project runs it — the local backend
// directly, and the same backend behind the wire through the remote backend
// — so the two cannot drift apart.
//
//	func TestConformance(t *testing.T) {
//		executortest.Run(t, func(t *testing.T) protocol.Executor { return newExecutor(t) })
//	}
//
// The executor under test must use the defaults of the protocol package for
// the memory limit and the run bound. Cases are added here as the contract's
// chapters are implemented.
package executortest

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Run runs every case against the executor newExecutor returns. It is
// called once per case, so an executor may be shared or fresh.
func Run(t *testing.T, newExecutor func(t *testing.T) protocol.Executor) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newExecutor(t))
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, ex protocol.Executor)
}

func execute(t *testing.T, ex protocol.Executor, req *protocol.ExecuteRequest) *protocol.ExecuteResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := ex.Execute(ctx, req)
	if err != nil {
		t.Fatalf("Execute(%q) failed: %v", req.Code, err)
	}
	return res
}

// value decodes a result's value, failing the test on an error envelope.
func value(t *testing.T, res *protocol.ExecuteResult) any {
	t.Helper()
	if res.HasError {
		t.Fatalf("the run failed: %s", res.Error)
	}
	v, err := res.Value()
	if err != nil {
		t.Fatalf("the result %q does not decode: %v", res.ResultJSON, err)
	}
	return v
}

func wantValue(t *testing.T, res *protocol.ExecuteResult, want any) {
	t.Helper()
	if got := value(t, res); !reflect.DeepEqual(got, want) {
		t.Fatalf("result = %#v, want %#v", got, want)
	}
}

func wantError(t *testing.T, res *protocol.ExecuteResult, want string) {
	t.Helper()
	if !res.HasError || res.Error != want {
		t.Fatalf("error = %q (HasError %v), want %q", res.Error, res.HasError, want)
	}
	if res.ResultJSON != "" {
		t.Fatalf("a failed run also carries a result: %s", res.ResultJSON)
	}
}

// wantFailure requires the kind of failure the executor reports.
func wantFailure(t *testing.T, res *protocol.ExecuteResult, want protocol.FailureKind) {
	t.Helper()
	if res.Failure != want {
		t.Fatalf("failure %q (error %q), want %q", res.Failure, res.Error, want)
	}
}

var greeter = protocol.ModuleMap{"greeter": {Kind: protocol.KindJS, Source: `export const greet = (name) => 'hello ' + name`}}

// Keeps64MB is a program that keeps 64 one-MiB buffers alive and returns
// how many it kept: past a limit of 32 MB (or anything under 64) it ends
// with the memory text, which is how a test sees which limit a run had.
const Keeps64MB = "async () => { const keep = []; for (let i = 0; i < 64; i++) keep.push(new Uint8Array(1 << 20).fill(1)); return keep.length }"

// counterHandler answers "<count> <path>": its count is module state that
// lives as long as its handles.
const counterHandler = `async () => { let n = 0; return { fetch: (req) => new Response(++n + ' ' + new URL(req.url).pathname) } }`

// wantGrant asserts a handle grant and returns its executionId.
func wantGrant(t *testing.T, res *protocol.ExecuteResult) string {
	t.Helper()
	if res.HasError || res.ResultJSON != "" || res.ExecutionID == "" || !reflect.DeepEqual(res.Handles, []string{"fetch"}) {
		t.Fatalf("got %+v, want a grant of the fetch handle", res)
	}
	return res.ExecutionID
}

// invokeText invokes the fetch handle with a GET of path and returns the
// response body.
func invokeText(t *testing.T, ex protocol.Executor, id, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := ex.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://handler.test" + path})
	if err != nil {
		t.Fatalf("InvokeHandle(%s): %v", path, err)
	}
	return string(resp.Body)
}

// wantHandlesClosed asserts that both calls meet HANDLES_CLOSED.
func wantHandlesClosed(t *testing.T, ex protocol.Executor, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := protocol.NewHandlesClosedError(id).Error()
	if _, err := ex.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://handler.test/"}); protocol.CodeOf(err) != protocol.CodeHandlesClosed || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("InvokeHandle after the close: %v, want HANDLES_CLOSED", err)
	}
	if err := ex.CloseHandles(ctx, id); protocol.CodeOf(err) != protocol.CodeHandlesClosed || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("CloseHandles after the close: %v, want HANDLES_CLOSED", err)
	}
}

// closeQuietly releases handles a case is done with, so the shared
// executor gets its worker back.
func closeQuietly(ex protocol.Executor, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = ex.CloseHandles(ctx, id)
}

func headerValues(hs []protocol.Header, name string) []string {
	var out []string
	for _, h := range hs {
		if strings.EqualFold(h[0], name) {
			out = append(out, h[1])
		}
	}
	return out
}

func answering(v any) protocol.DispatchFunc {
	return protocol.NewEnvelopeDispatch(protocol.NewEnvelopeState(), func(context.Context, string, string, []any) (any, error) {
		return v, nil
	})
}

var cases = []testCase{
	{"entry/import on its own line", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "import { greet } from 'greeter'\nasync () => greet('ada')", Modules: greeter})
		wantValue(t, res, "hello ada")
		if len(res.Logs) != 0 {
			t.Fatalf("logs = %v, want none", res.Logs)
		}
	}},
	{"entry/trailing code on the import line", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "import { greet } from 'greeter'; const size = 3\nasync () => greet('ada').repeat(size).length", Modules: greeter})
		wantValue(t, res, 27.0)
	}},
	{"entry/arrow on the import line is a syntax error in the entry module", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "import { greet } from 'greeter'; async () => greet('ada')", Modules: greeter})
		if !res.HasError || !regexp.MustCompile(`\[executor\.js:\d+:\d+\]$`).MatchString(res.Error) || res.ResultJSON != "" {
			t.Fatalf("got %+v, want a syntax error pointing into executor.js", res)
		}
	}},
	{"entry/undefined result has no value", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => {}"})
		if res.HasError || res.ResultJSON != "" {
			t.Fatalf("got %+v, want no value and no error", res)
		}
	}},
	{"entry/a thrown error reads as it was thrown", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => { throw new Error('No such customer.') }"})
		if !res.HasError || !strings.Contains(res.Error, "No such customer.") {
			t.Fatalf("got %+v", res)
		}
	}},
	{"entry/result keeps keys named after Object.prototype members", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => ({ constructor: 1, toString: 'x', __proto__x: 2 })"})
		wantValue(t, res, map[string]any{"constructor": 1.0, "toString": "x", "__proto__x": 2.0})
	}},
	{"providers/every call reaches the dispatch", func(t *testing.T, ex protocol.Executor) {
		var mu sync.Mutex
		var seen [][2]string
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code: `async () => {
    await store.listOrders()
    await store.deleteOrders()
    await __dispatch('crm', 'listOrders', '')

    return 'every call reached the dispatch'
  }`,
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"listOrders"}}},
			Dispatch: func(_ context.Context, provider, tool, _ string) (string, error) {
				mu.Lock()
				seen = append(seen, [2]string{provider, tool})
				mu.Unlock()
				return `{"result":null}`, nil
			},
		})
		wantValue(t, res, "every call reached the dispatch")
		want := [][2]string{{"store", "listOrders"}, {"store", "deleteOrders"}, {"crm", "listOrders"}}
		if !reflect.DeepEqual(seen, want) {
			t.Fatalf("dispatch saw %v, want %v", seen, want)
		}
	}},
	{"providers/arguments and envelopes", func(t *testing.T, ex protocol.Executor) {
		var args []string
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code: `async () => {
				const order = await store.listOrders('ada', 3)
				const one = await crm.find({ customer: 'ada' })
				let failure
				try { await store.fail() } catch (e) { failure = e.message }
				return { order, one, failure }
			}`,
			Providers: []protocol.ProviderDescriptor{
				{Name: "store", Tools: []string{"listOrders", "fail"}, PositionalArgs: true},
				{Name: "crm", Tools: []string{"find"}},
			},
			Dispatch: func(_ context.Context, _, tool, a string) (string, error) {
				args = append(args, a)
				if tool == "fail" {
					return `{"error":"No such customer."}`, nil
				}
				return `{"result":{"id":"o1","total":42}}`, nil
			},
		})
		wantValue(t, res, map[string]any{
			"order":   map[string]any{"id": "o1", "total": 42.0},
			"one":     map[string]any{"id": "o1", "total": 42.0},
			"failure": "No such customer.",
		})
		if !reflect.DeepEqual(args, []string{`["ada",3]`, `{"customer":"ada"}`, `[]`}) && !reflect.DeepEqual(args, []string{`["ada",3]`, `{"customer":"ada"}`, ``}) {
			t.Fatalf("argument payloads = %q", args)
		}
	}},
	{"providers/tool calls of one run are answered concurrently", func(t *testing.T, ex protocol.Executor) {
		// Each call waits until both have arrived: a dispatch that served
		// them one at a time would never answer.
		var arrived sync.WaitGroup
		arrived.Add(2)
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:      "async () => (await Promise.all([store.a(), store.b()])).join('+')",
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"a", "b"}}},
			Timeout:   protocol.TimeoutOf(60000),
			Dispatch: func(ctx context.Context, _, tool, _ string) (string, error) {
				arrived.Done()
				both := make(chan struct{})
				go func() { arrived.Wait(); close(both) }()
				select {
				case <-both:
				case <-ctx.Done():
					return "", ctx.Err()
				case <-time.After(20 * time.Second):
					return `{"error":"the other call never arrived"}`, nil
				}
				return `{"result":"` + tool + `"}`, nil
			},
		})
		wantValue(t, res, "a+b")
	}},
	{"providers/without a dispatch every tool is not found", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:      "async () => { try { await store.listOrders() } catch (e) { return e.message } }",
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"listOrders"}}},
		})
		wantValue(t, res, protocol.NewToolNotFoundError("listOrders").Error())
	}},
	{"providers/an answer outside the envelope is rethrown", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:      "async () => { try { await store.x() } catch (e) { return e.message } }",
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"x"}}},
			Dispatch:  func(context.Context, string, string, string) (string, error) { return `[1,2]`, nil },
		})
		wantValue(t, res, protocol.OutsideEnvelopeText)
	}},
	{"providers/names are validated first", func(t *testing.T, ex protocol.Executor) {
		for _, p := range []struct {
			name string
			want error
		}{
			{"1store", protocol.NewInvalidProviderNameError("1store")},
			{"__dispatch", protocol.NewReservedProviderNameError("__dispatch")},
			{"class", protocol.NewKeywordProviderNameError("class")},
		} {
			res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => 1", Providers: []protocol.ProviderDescriptor{{Name: p.name, Tools: []string{}}}})
			wantError(t, res, p.want.Error())
		}
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => 1", Providers: []protocol.ProviderDescriptor{{Name: "a"}, {Name: "a"}}})
		wantError(t, res, protocol.NewDuplicateProviderNameError("a").Error())
	}},
	{"providers/a tool call past the payload bound rejects", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:      fmt.Sprintf("async () => { try { await store.put('x'.repeat(%d)) } catch (e) { return e.message } }", protocol.PayloadLimit),
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"put"}}},
			Dispatch:  answering(1),
		})
		if v, _ := value(t, res).(string); !strings.Contains(v, string(protocol.PartToolCall)) || !strings.Contains(v, fmt.Sprint(protocol.PayloadLimit)) {
			t.Fatalf("got %q, want PayloadTooLargeError's text for the tool call", v)
		}
	}},
	{"dispatch/binary values decode to bytes", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => [new Uint8Array([1, 2, 3, 255]), new Uint16Array([1, 2])]"})
		wantValue(t, res, []any{[]byte{1, 2, 3, 255}, []byte{1, 0, 2, 0}})
		if !strings.Contains(res.ResultJSON, `{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}`) ||
			!strings.Contains(res.ResultJSON, `{"__executor_binary_v1__":"ArrayBufferView","data":"AQACAA=="}`) {
			t.Fatalf("resultJson %s does not carry the contract's tagged envelopes", res.ResultJSON)
		}
	}},
	{"dispatch/a call after the run settled is completed", func(t *testing.T, ex protocol.Executor) {
		late := make(chan string, 1)
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:      `async () => { setTimeout(() => store.late().then(v => 0, e => 0), 0); return 'done' }`,
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"late"}}},
			Dispatch: func(context.Context, string, string, string) (string, error) {
				late <- "the dispatch was reached after the run ended"
				return `{"result":1}`, nil
			},
		})
		wantValue(t, res, "done")
		select {
		case msg := <-late:
			t.Fatal(msg)
		case <-time.After(200 * time.Millisecond):
		}
	}},
	{"logs/levels and text", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: `async () => { console.log('a', 1, true, null); console.warn('w'); console.error('e'); console.debug('quiet'); console.info('quiet'); return 0 }`})
		want := []protocol.LogLine{{Level: "log", Text: "a 1 true null"}, {Level: "warn", Text: "w"}, {Level: "error", Text: "e"}}
		if !reflect.DeepEqual(res.Logs, want) {
			t.Fatalf("logs = %v, want %v", res.Logs, want)
		}
	}},
	{"logs/the capture bound drops the rest and keeps the result", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: `async () => { for (let i = 0; i < 10000; i++) console.log('x'.repeat(100)); return 'kept' }`})
		wantValue(t, res, "kept")
		// The captured lines stay below the bound, the line that meets it
		// is dropped whole, and one warn line with the capture message takes
		// the place of the rest.
		kept, last := res.Logs[:len(res.Logs)-1], res.Logs[len(res.Logs)-1]
		total := 0
		for _, l := range kept {
			total += protocol.LogLineWireSize(l)
		}
		line := protocol.LogLine{Level: protocol.LogLevelLog, Text: strings.Repeat("x", 100)}
		if total >= protocol.ConsoleCaptureLimit || total+protocol.LogLineWireSize(line) < protocol.ConsoleCaptureLimit ||
			last != (protocol.LogLine{Level: "warn", Text: protocol.ConsoleCaptureMessage}) {
			t.Fatalf("captured %d bytes in %d lines ending with %v", total, len(kept), last)
		}
	}},
	{"bounds/the run's answer past the payload bound", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: fmt.Sprintf("async () => 'x'.repeat(%d)", protocol.PayloadLimit)})
		if !res.HasError || !strings.Contains(res.Error, string(protocol.PartRunAnswer)) || res.ResultJSON != "" {
			t.Fatalf("got %+v, want PayloadTooLargeError's text for the run's answer", res)
		}
		wantFailure(t, res, protocol.FailurePayload)
	}},
	{"bounds/timeout text", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => { while (true) {} }", Timeout: protocol.TimeoutOf(300)})
		wantError(t, res, protocol.NewExecutionTimeoutError(300).Error())
		wantFailure(t, res, protocol.FailureTimeout)
	}},
	{"bounds/a thrown bound's text is thrown", func(t *testing.T, ex protocol.Executor) {
		for _, text := range []string{protocol.NewExecutionTimeoutError(300).Error(), protocol.NewMemoryLimitError(protocol.DefaultMemoryLimitMB).Error()} {
			res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => { throw new Error(" + strconv.Quote(text) + ") }", Timeout: protocol.TimeoutOf(300)})
			wantError(t, res, text)
			wantFailure(t, res, protocol.FailureThrown)
		}
	}},
	{"bounds/a tool call does not spend the run clock", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:      "async () => await store.slow()",
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"slow"}}},
			Timeout:   protocol.TimeoutOf(400),
			Dispatch: func(ctx context.Context, _, _, _ string) (string, error) {
				select {
				case <-time.After(1200 * time.Millisecond):
				case <-ctx.Done():
				}
				return `{"result":"slow but fine"}`, nil
			},
		})
		wantValue(t, res, "slow but fine")
	}},
	{"bounds/countHostWaits restores the wall clock", func(t *testing.T, ex protocol.Executor) {
		yes := true
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:           "async () => await store.slow()",
			Providers:      []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"slow"}}},
			Timeout:        protocol.TimeoutOf(400),
			CountHostWaits: &yes,
			Dispatch: func(ctx context.Context, _, _, _ string) (string, error) {
				select {
				case <-time.After(3 * time.Second):
				case <-ctx.Done():
				}
				return `{"result":1}`, nil
			},
		})
		wantError(t, res, protocol.NewExecutionTimeoutError(400).Error())
	}},
	{"bounds/memory limit text", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => { const a = []; while (true) a.push('x'.repeat(1 << 16) + a.length) }", Timeout: protocol.TimeoutOf(60000)})
		wantError(t, res, protocol.NewMemoryLimitError(protocol.DefaultMemoryLimitMB).Error())
		wantFailure(t, res, protocol.FailureMemory)
		// The executor keeps serving.
		wantValue(t, execute(t, ex, &protocol.ExecuteRequest{Code: "async () => 'still here'"}), "still here")
	}},
	{"modules/every kind", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code: `import { twice } from 'math'
import legacy from 'legacy'
import note from 'note'
import config from 'config'
import blob from 'blob'
async () => [twice(2), legacy.answer, note, config.b, new Uint8Array(blob).length]`,
			Modules: protocol.ModuleMap{
				"math":   {Kind: protocol.KindJS, Source: "import { one } from 'one'; export const twice = (n) => n * 2 * one"},
				"one":    {Kind: protocol.KindJS, Source: "export const one = 1"},
				"legacy": {Kind: protocol.KindCJS, Source: "module.exports = { answer: 42 }"},
				"note":   {Kind: protocol.KindText, Source: "plain text"},
				"config": {Kind: protocol.KindJSON, Source: `{"b":[1,2]}`},
				"blob":   {Kind: protocol.KindData, Data: []byte{1, 2, 3}},
			},
		})
		wantValue(t, res, []any{4.0, 42.0, "plain text", []any{1.0, 2.0}, 3.0})
	}},
	{"modules/a static import of an unknown name", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "import { x } from 'nope'\nasync () => x", Modules: greeter})
		wantError(t, res, protocol.NewModuleNotFoundError("nope", []string{"greeter"}).Error())
	}},
	{"modules/a dynamic import of an unknown name rejects catchably", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => { try { await import('nope') } catch (e) { return e.message } }", Modules: greeter})
		wantValue(t, res, protocol.NewModuleNotFoundError("nope", []string{"greeter"}).Error())
	}},
	{"modules/an unsupported kind", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => 1", Modules: protocol.ModuleMap{"w": {Kind: "wasm", Source: "x"}}})
		wantError(t, res, protocol.NewUnsupportedModuleKindError("w", "wasm").Error())
	}},
	{"absences/the contract's typeof example", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: "async () => [typeof caches, typeof CompressionStream, typeof WebSocket]", Outbound: protocol.NoOutbound()})
		wantValue(t, res, []any{"object", "function", "undefined"})
	}},
	{"absences/touching one fails with its text", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: `async () => {
			const out = []
			try { new CompressionStream('gzip') } catch (e) { out.push(e.name, e.message) }
			try { new ArrayBuffer(8, { maxByteLength: 16 }).resize(16) } catch (e) { out.push(e.name, e.message) }
			try { await caches.open('x') } catch (e) { out.push(e.name, e.message) }
			return out
		}`})
		wantValue(t, res, []any{
			"NotSupportedError", protocol.NewCompressionAbsentError("CompressionStream").Error(),
			"NotSupportedError", protocol.NewBufferGrowthAbsentError("ArrayBuffer.prototype.resize").Error(),
			"NotSupportedError", protocol.NewCacheStorageAbsentError().Error(),
		})
	}},
	{"outbound/disabled rejects with the outbound text", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:     "async () => { try { await fetch('https://api.example/') } catch (e) { return [e.name, e.message] } }",
			Outbound: protocol.NoOutbound(),
		})
		wantValue(t, res, []any{"TypeError", protocol.NewOutboundDisabledError().Error()})
	}},
	{"outbound/stub gets the serialized exchange, bytes intact", func(t *testing.T, ex protocol.Executor) {
		var got protocol.OutboundRequest
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code: `async () => {
				const r = await fetch('https://api.example/items?x=1', { method: 'POST', headers: [['X-A', '1'], ['x-a', '2']], body: new Uint8Array([0, 1, 254, 255]) })
				return [r.status, r.ok, r.headers.get('content-type'), new Uint8Array(await r.arrayBuffer())]
			}`,
			Outbound: protocol.OutboundVia(func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
				got = req
				return protocol.OutboundResponse{Status: 201, StatusText: "Created", Headers: []protocol.Header{{"content-type", "application/octet-stream"}}, Body: []byte{9, 8, 7}}, nil
			}),
		})
		wantValue(t, res, []any{201.0, true, "application/octet-stream", []byte{9, 8, 7}})
		if got.Method != "POST" || got.URL != "https://api.example/items?x=1" || string(got.Body) != "\x00\x01\xfe\xff" {
			t.Fatalf("the outbound function saw %+v", got)
		}
	}},
	{"outbound/native is denied loopback by default", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code: "async () => { try { await fetch('http://127.0.0.1:9/') ; return 'reached' } catch (e) { return e.name } }",
		})
		wantValue(t, res, "TypeError")
	}},
	{"handles/a handle that was never granted is closed", func(t *testing.T, ex protocol.Executor) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := ex.InvokeHandle(ctx, "never-granted", "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://x/"})
		if protocol.CodeOf(err) != protocol.CodeHandlesClosed || !strings.Contains(err.Error(), `"never-granted"`) {
			t.Fatalf("InvokeHandle gave %v, want HANDLES_CLOSED", err)
		}
		if err := ex.CloseHandles(ctx, "never-granted"); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
			t.Fatalf("CloseHandles gave %v, want HANDLES_CLOSED", err)
		}
	}},
	{"handles/grant, invoke in order, close", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: counterHandler, RetainHandles: true})
		id := wantGrant(t, res)
		for i := 1; i <= 3; i++ {
			if got := invokeText(t, ex, id, fmt.Sprintf("/n/%d", i)); got != fmt.Sprintf("%d /n/%d", i, i) {
				t.Fatalf("invocation %d answered %q", i, got)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := ex.CloseHandles(ctx, id); err != nil {
			t.Fatalf("CloseHandles: %v", err)
		}
		wantHandlesClosed(t, ex, id)
	}},
	{"handles/rejections keep the handles serving", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: `async () => { let n = 0; return { async fetch(req) {
			n++
			const p = new URL(req.url).pathname
			if (p === '/throw') throw new Error('No such order.')
			if (p === '/plain') return { status: 200 }
			return new Response(new Uint8Array(await req.arrayBuffer()).reverse(), { status: 202, statusText: 'Accepted', headers: [['x-n', String(n)]] })
		} } }`, RetainHandles: true})
		id := wantGrant(t, res)
		defer closeQuietly(ex, id)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for path, want := range map[string]string{
			"/throw": "No such order.",
			"/plain": "something other than a Response",
		} {
			_, err := ex.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://handler.test" + path})
			if err == nil || protocol.CodeOf(err) != "" || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: %v, want a rejection with %q", path, err, want)
			}
		}
		_, err := ex.InvokeHandle(ctx, id, "other", protocol.OutboundRequest{Method: "GET", URL: "https://handler.test/"})
		if err == nil || protocol.CodeOf(err) != "" || !strings.HasSuffix(err.Error(), protocol.NewHandleNotFoundError(id, "other", []string{"fetch"}).Error()) {
			t.Fatalf("another handle name: %v", err)
		}
		resp, err := ex.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "POST", URL: "https://handler.test/echo", Body: []byte{0, 1, 254, 255}})
		if err != nil || resp.Status != 202 || resp.StatusText != "Accepted" || !reflect.DeepEqual(resp.Body, []byte{255, 254, 1, 0}) {
			t.Fatalf("after the rejections: %+v, %v", resp, err)
		}
		if !reflect.DeepEqual(headerValues(resp.Headers, "x-n"), []string{"3"}) {
			t.Fatalf("headers %v", resp.Headers)
		}
	}},
	{"handles/other shapes and requests without retainHandles return values", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{Code: `async () => ({ fetch: 'not callable' })`, RetainHandles: true})
		wantValue(t, res, map[string]any{"fetch": "not callable"})
		if res.ExecutionID != "" || res.Handles != nil {
			t.Fatalf("a value that is no handler was retained: %+v", res)
		}
		res = execute(t, ex, &protocol.ExecuteRequest{Code: `async () => ({ fetch() { return new Response('') } })`})
		if res.HasError || res.ResultJSON != "{}" || res.ExecutionID != "" {
			t.Fatalf("a handler without retainHandles: %+v, want the value {}", res)
		}
	}},
	{"handles/the outbound function stays usable until they close", func(t *testing.T, ex protocol.Executor) {
		var mu sync.Mutex
		var urls []string
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:          `async () => async (req) => new Response(await (await fetch('https://upstream.test' + new URL(req.url).pathname)).text())`,
			RetainHandles: true,
			Outbound: protocol.OutboundVia(func(_ context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
				mu.Lock()
				urls = append(urls, req.URL)
				mu.Unlock()
				return protocol.OutboundResponse{Status: 200, Body: []byte("upstream " + req.URL)}, nil
			}),
		})
		id := wantGrant(t, res)
		defer closeQuietly(ex, id)
		for _, p := range []string{"/a", "/b"} {
			if got := invokeText(t, ex, id, p); got != "upstream https://upstream.test"+p {
				t.Fatalf("answered %q", got)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !reflect.DeepEqual(urls, []string{"https://upstream.test/a", "https://upstream.test/b"}) {
			t.Fatalf("the outbound function saw %v", urls)
		}
	}},
	{"handles/a run bound ending an invocation closes them", func(t *testing.T, ex protocol.Executor) {
		res := execute(t, ex, &protocol.ExecuteRequest{
			Code:          `async () => (req) => { if (req.url.endsWith('/spin')) while (true) {} ; return new Response('ok') }`,
			RetainHandles: true,
			Timeout:       protocol.TimeoutOf(300),
		})
		id := wantGrant(t, res)
		if got := invokeText(t, ex, id, "/"); got != "ok" {
			t.Fatalf("answered %q", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := ex.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://handler.test/spin"})
		if err == nil || !strings.HasSuffix(err.Error(), protocol.NewExecutionTimeoutError(300).Error()) {
			t.Fatalf("the spinning invocation: %v, want the timeout text", err)
		}
		wantHandlesClosed(t, ex, id)
	}},
	{"concurrency/many executions at once", func(t *testing.T, ex protocol.Executor) {
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := ex.Execute(ctx, &protocol.ExecuteRequest{
					Code:      fmt.Sprintf("async () => (await calc.add(%d, 1))", i),
					Providers: []protocol.ProviderDescriptor{{Name: "calc", Tools: []string{"add"}, PositionalArgs: true}},
					Dispatch: protocol.NewEnvelopeDispatch(protocol.NewEnvelopeState(), func(_ context.Context, _, _ string, args []any) (any, error) {
						return args[0].(float64) + args[1].(float64), nil
					}),
				})
				if err != nil && protocol.CodeOf(err) == protocol.CodeQueueOverflow {
					return // a small pool may turn some away; that is the contract's answer
				}
				if err != nil {
					t.Error(err)
					return
				}
				if v, _ := res.Value(); v != float64(i+1) {
					t.Errorf("run %d gave %v (%s)", i, v, res.Error)
				}
			}()
		}
		wg.Wait()
	}},
}
