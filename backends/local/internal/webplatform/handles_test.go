package webplatform

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/supolka/codemode-gateway/protocol"
)

// installed is a runtime with the platform and nothing running.
func installed(t *testing.T) (*goja.Runtime, *Platform) {
	t.Helper()
	l := newTestLoop()
	t.Cleanup(l.close)
	l.vm = goja.New()
	l.vm.SetParserOptions(parser.WithDisableSourceMaps)
	pl, err := Install(l.vm, l, disabled)
	if err != nil {
		t.Fatal(err)
	}
	return l.vm, pl
}

func call(t *testing.T, vm *goja.Runtime, src string, args ...goja.Value) goja.Value {
	t.Helper()
	fv, err := vm.RunString(src)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := goja.AssertFunction(fv)
	v, err := f(goja.Undefined(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHandleExchange(t *testing.T) {
	vm, pl := installed(t)
	req, err := pl.Request(protocol.OutboundRequest{Method: "POST", URL: "https://svc.example/p?q=1",
		Headers: []protocol.Header{{"X-A", "1"}, {"content-type", "text/plain"}}, Body: []byte("hi")})
	if err != nil {
		t.Fatal(err)
	}
	// What the handler sees, read synchronously from the Request's state.
	seen := call(t, vm, `(r) => [r instanceof Request, r.method, r.url, r.headers.get('x-a'), r.headers.get('content-type'), r.bodyUsed].join('|')`, req)
	if seen.String() != "true|POST|https://svc.example/p?q=1|1|text/plain|false" {
		t.Errorf("the handler saw %s", seen)
	}
	resp := call(t, vm, `() => new Response('answer', {status: 201, statusText: 'Made', headers: [['X-B', '2']]})`)
	got, err := pl.Response(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.OutboundResponse{Status: 201, StatusText: "Made",
		Headers: []protocol.Header{{"X-B", "2"}, {"content-type", "text/plain;charset=UTF-8"}}, Body: []byte("answer")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	if used := call(t, vm, `(r) => r.bodyUsed`, resp); !used.ToBoolean() {
		t.Error("the answered body does not count as read")
	}
	if _, err := pl.Response(resp); err == nil || !strings.Contains(err.Error(), "already read") {
		t.Errorf("second read: %v", err)
	}
	nobody, err := pl.Response(call(t, vm, `() => new Response(null, {status: 204})`))
	if err != nil || nobody.Status != 204 || nobody.Body == nil || len(nobody.Body) != 0 {
		t.Errorf("204: %#v %v", nobody, err)
	}
}

func TestHandleExchangeRefusals(t *testing.T) {
	vm, pl := installed(t)
	bigAnswer := protocol.HandleAnswerWireSize(protocol.OutboundResponse{Status: 200,
		Headers: []protocol.Header{{"content-type", "text/plain;charset=UTF-8"}}, Body: make([]byte, 200000)})
	for _, c := range []struct{ src, want string }{
		{`() => ({status: 200})`, protocol.NewNotAResponseError().Error()},
		{`() => 'text'`, protocol.NewNotAResponseError().Error()},
		{`() => Response.error()`, protocol.NewNetworkErrorResponseError().Error()},
		{`() => new Response('x'.repeat(200000))`, protocol.NewPayloadTooLargeError(protocol.PartHandleAnswer, bigAnswer, protocol.PayloadLimit).Error()},
	} {
		_, err := pl.Response(call(t, vm, c.src))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.src, err, c.want)
		}
	}
	if _, err := pl.Request(protocol.OutboundRequest{Method: "GET", URL: "/relative"}); err == nil || err.Error() != "Failed to construct 'Request': Invalid URL: /relative" {
		t.Errorf("relative URL: %v", err)
	}
	if _, err := pl.Request(protocol.OutboundRequest{Method: "GET", URL: "https://x/", Body: []byte("b")}); err == nil || !strings.Contains(err.Error(), "cannot have body") {
		t.Errorf("GET with body: %v", err)
	}
	if _, err := pl.Request(protocol.OutboundRequest{Method: "get", URL: "https://x/", Body: []byte{}}); err != nil {
		t.Errorf("GET with an empty body: %v", err)
	}
}
