package webplatform

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/supolka/codemode-gateway/protocol"
)

// A program that tampers with the builtins the platform uses breaks only
// itself: every outcome is a JavaScript value or exception, never a Go
// panic (which the natives' guard would report as "internal error").
func TestTamperedBuiltinsStayInJavaScript(t *testing.T) {
	stub := &recordingStub{}
	cfg := Config{Mode: protocol.OutboundStub, Stub: stub.fn}
	tamperings := []string{
		`Array.prototype[Symbol.iterator] = function* () { yield 'x' }`,
		`Uint8Array.prototype.slice = () => 42`,
		`ArrayBuffer.prototype.slice = () => ({})`,
		`Object.defineProperty(Uint8Array.prototype, 'length', {get: () => 1e9})`,
		`globalThis.Uint8Array = function () { return {} }`,
		`String.prototype.toLowerCase = () => { throw new Error('no') }`,
		`Map.prototype.get = () => undefined; WeakMap.prototype.get = () => ({})`,
		`Promise.prototype.then = () => { throw new Error('no then') }`,
		`JSON.parse = () => { throw new Error('no parse') }`,
		`Function.prototype.call = () => 1`,
	}
	uses := []string{
		`return await (await fetch('https://a.example/', {method: 'POST', body: 'x', headers: {a: 'b'}})).text()`,
		`return new TextDecoder().decode(new TextEncoder().encode('hé'))`,
		`return [atob(btoa('x')), new URL('https://x/a?b=c').searchParams.get('b')]`,
		`return structuredClone({a: [1, new Map([[1, 2]])]})`,
		`return crypto.getRandomValues(new Uint8Array(4)).length + (await crypto.subtle.digest('SHA-256', new Uint8Array(1))).byteLength`,
		`return await new Blob(['x']).text()`,
	}
	for i, tamper := range tamperings {
		for j, use := range uses {
			t.Run(fmt.Sprintf("%d/%d", i, j), func(t *testing.T) {
				got, _ := runProgram(t, cfg, "try { "+tamper+" } catch {}\n"+use)
				if strings.Contains(got.err, "internal error") {
					t.Errorf("tampering %q, then %q: %s", tamper, use, got)
				}
			})
		}
	}
}

// Header names and values from the program: whatever is accepted crosses to
// the stub exactly as the standard normalizes it.
func FuzzHeaders(f *testing.F) {
	for _, s := range [][2]string{{"a", "b"}, {"Content-Type", " text/plain \t"}, {"x", "a\r\nb"}, {"bad name", "v"}, {"x", "\x00"}, {"x", "é"}, {"", ""}, {"x", "€"}} {
		f.Add(s[0], s[1])
	}
	vm := goja.New()
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	l := newTestLoop()
	l.vm = vm
	defer l.close()
	if _, err := Install(vm, l, disabled); err != nil {
		f.Fatal(err)
	}
	check, err := vm.RunString(`(name, value) => {
		try { const h = new Headers(); h.append(name, value); return [...h][0] } catch (e) { if (!(e instanceof TypeError)) throw e; return null }
	}`)
	if err != nil {
		f.Fatal(err)
	}
	fn, _ := goja.AssertFunction(check)
	f.Fuzz(func(t *testing.T, name, value string) {
		v, err := fn(goja.Undefined(), vm.ToValue(name), vm.ToValue(value))
		if err != nil {
			t.Fatalf("Headers threw something other than a TypeError: %v", err)
		}
		if goja.IsNull(v) {
			return
		}
		pair := v.Export().([]any)
		gotName, gotValue := pair[0].(string), pair[1].(string)
		if gotName != strings.ToLower(name) {
			t.Fatalf("name %q stored as %q", name, gotName)
		}
		if gotValue != strings.Trim(value, "\t\n\r ") || strings.ContainsAny(gotValue, "\x00\r\n") {
			t.Fatalf("value %q stored as %q", value, gotValue)
		}
		for _, r := range gotValue {
			if r > 0xFF {
				t.Fatalf("value %q holds %q, outside Latin-1", value, r)
			}
		}
		for i := 0; i < len(gotName); i++ {
			if c := gotName[i]; c <= ' ' || c >= 0x7F || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
				t.Fatalf("name %q is not a token", gotName)
			}
		}
	})
}

// A native request still open when the run ends is cancelled on the wire.
func TestNativeRequestCancelledAtRunEnd(t *testing.T) {
	arrived, seenDone := make(chan struct{}), make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/after" {
			// Answered once the open request reached the server.
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
			}
			return
		}
		close(arrived)
		select {
		case <-r.Context().Done():
			seenDone <- struct{}{}
		case <-time.After(10 * time.Second):
		}
	}))
	defer srv.Close()
	got, _ := runProgram(t, Config{Mode: protocol.OutboundNative, Native: loopbackAllowed},
		"fetch("+strconv.Quote(srv.URL+"/open")+"); await fetch("+strconv.Quote(srv.URL+"/after")+"); return 1")
	if got.String() != "1" {
		t.Fatalf("got %s", got)
	}
	select {
	case <-seenDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the request end")
	}
}

// A stub that ignores its context still cannot block the run: the answer
// arriving after the run ended is dropped.
func TestStubAnswerAfterRunEndIsDropped(t *testing.T) {
	release := make(chan struct{})
	answered := make(chan struct{})
	cfg := Config{Mode: protocol.OutboundStub, Stub: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		<-release
		defer close(answered)
		return protocol.OutboundResponse{Status: 200}, nil
	}}
	got, _ := runProgram(t, cfg, `fetch('https://a.example/'); return 'done'`)
	if got.String() != `"done"` {
		t.Fatalf("got %s", got)
	}
	close(release)
	select {
	case <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("the stub's goroutine stayed blocked after the run ended")
	}
}

// A section that cannot be built (its builtins were taken away) throws a
// catchable exception where the program touched the name, and the name is
// published once it can be built.
func TestLazyGlobalBuildFailureIsCatchable(t *testing.T) {
	got, _ := runProgram(t, disabled, `const saved = Symbol; globalThis.Symbol = undefined;
		let first; try { URL } catch (e) { first = e instanceof TypeError }
		globalThis.Symbol = saved;
		return [first, typeof URL, new URL('https://x/y').pathname, new Headers({a: '1'}).get('A'), structuredClone(new Map([[1, 2]])).get(1)]`)
	if got.String() != `[true,"function","/y","1",2]` {
		t.Errorf("got %s", got)
	}
}
