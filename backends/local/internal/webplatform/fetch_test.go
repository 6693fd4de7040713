package webplatform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

func TestFetchDisabled(t *testing.T) {
	text := protocol.NewOutboundDisabledError().Error()
	for _, cfg := range []Config{disabled, {}, {Mode: "bogus"}, {Mode: protocol.OutboundStub}} {
		got, _ := runProgram(t, cfg, `try { await fetch('https://example.com/') } catch (e) { return [e instanceof TypeError, e.message] }`)
		if want := fmt.Sprintf(`[true,%q]`, text); got.String() != want {
			t.Errorf("mode %q: got %s, want %s", cfg.Mode, got, want)
		}
	}
}

// recordingStub answers every request with answer and records what it saw.
type recordingStub struct {
	mu     sync.Mutex
	seen   []protocol.OutboundRequest
	answer func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error)
}

func (s *recordingStub) fn(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	s.mu.Lock()
	s.seen = append(s.seen, req)
	s.mu.Unlock()
	if s.answer == nil {
		return protocol.OutboundResponse{Status: 200, StatusText: "OK", Body: []byte("ok")}, nil
	}
	return s.answer(ctx, req)
}

func (s *recordingStub) requests() []protocol.OutboundRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]protocol.OutboundRequest(nil), s.seen...)
}

func TestFetchStubSerializesTheExchange(t *testing.T) {
	stub := &recordingStub{answer: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{
			Status: 201, StatusText: "Created",
			Headers: []protocol.Header{{"Content-Type", "application/json"}, {"Set-Cookie", "a=1"}, {"set-cookie", "b=2"}},
			Body:    []byte(`{"echo":` + fmt.Sprint(len(req.Body)) + `}`),
		}, nil
	}}
	got, l := runProgram(t, Config{Mode: protocol.OutboundStub, Stub: stub.fn}, `
		const r = await fetch('https://api.example/v1/x?q=1', {method: 'POST', headers: [['X-First', '1'], ['content-type', 'application/octet-stream'], ['X-Last', 'z']],
			body: new Uint8Array([0, 255, 10, 13, 128])});
		return [r.status, r.statusText, r.ok, r.url, r.type, r.redirected, r.headers.get('content-type'), r.headers.getSetCookie(), await r.json()]`)
	want := `[201,"Created",true,"https://api.example/v1/x?q=1","basic",false,"application/json",["a=1","b=2"],{"echo":5}]`
	if got.String() != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	reqs := stub.requests()
	if len(reqs) != 1 {
		t.Fatalf("stub saw %d requests", len(reqs))
	}
	wantReq := protocol.OutboundRequest{
		Method: "POST", URL: "https://api.example/v1/x?q=1",
		Headers: []protocol.Header{{"X-First", "1"}, {"content-type", "application/octet-stream"}, {"X-Last", "z"}},
		Body:    []byte{0, 255, 10, 13, 128},
	}
	if !reflect.DeepEqual(reqs[0], wantReq) {
		t.Errorf("stub saw %#v, want %#v", reqs[0], wantReq)
	}
	if l.opened != 1 || l.waits != 0 {
		t.Errorf("host waits: opened %d, open at the end %d; want 1 and 0", l.opened, l.waits)
	}
}

func TestFetchStubDetails(t *testing.T) {
	stub := &recordingStub{}
	cfg := Config{Mode: protocol.OutboundStub, Stub: stub.fn}
	got, _ := runProgram(t, cfg, `const r = await fetch(new Request('https://a.example/', {headers: {A: 'b'}})); return [await r.text(), r.headers.has('x')]`)
	if got.String() != `["ok",false]` {
		t.Fatalf("got %s", got)
	}
	reqs := stub.requests()
	if reqs[0].Body != nil || reqs[0].Method != "GET" {
		t.Errorf("a GET without body crosses with a nil body: %#v", reqs[0])
	}
	// An empty body is an empty buffer, not null; a string body is UTF-8
	// and brings its content type.
	_, _ = runProgram(t, cfg, `await fetch('https://a.example/', {method: 'PUT', body: ''}); await fetch('https://a.example/', {method: 'POST', body: 'é'})`)
	reqs = stub.requests()
	if reqs[1].Body == nil || len(reqs[1].Body) != 0 {
		t.Errorf("empty body: %#v", reqs[1].Body)
	}
	if string(reqs[2].Body) != "é" || !reflect.DeepEqual(reqs[2].Headers, []protocol.Header{{"content-type", "text/plain;charset=UTF-8"}}) {
		t.Errorf("string body: %#v", reqs[2])
	}

	// The response headers are immutable and the body is single-use.
	got, _ = runProgram(t, cfg, `const r = await fetch('https://a.example/'); try { r.headers.set('a', 'b') } catch (e) { return [e.message, r.clone().bodyUsed] }`)
	if got.String() != `["Headers are immutable",false]` {
		t.Errorf("immutable headers: %s", got)
	}

	// The stub's failure becomes a TypeError; a status no Response can
	// carry too.
	failing := Config{Mode: protocol.OutboundStub, Stub: func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{}, errors.New("upstream said no")
	}}
	got, _ = runProgram(t, failing, `await fetch('https://a.example/')`)
	if want := rejected("TypeError", "fetch failed: the outbound function failed: upstream said no"); got.String() != want {
		t.Errorf("got %s, want %s", got, want)
	}
	weird := Config{Mode: protocol.OutboundStub, Stub: func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 99}, nil
	}}
	got, _ = runProgram(t, weird, `await fetch('https://a.example/')`)
	if want := rejected("TypeError", "fetch failed: the response status 99 is outside 200 to 599, the range a Response can carry"); got.String() != want {
		t.Errorf("got %s, want %s", got, want)
	}
	panicking := Config{Mode: protocol.OutboundStub, Stub: func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		panic("boom")
	}}
	got, _ = runProgram(t, panicking, `await fetch('https://a.example/')`)
	if want := rejected("TypeError", "fetch failed: the outbound function failed: it broke while handling the request"); got.String() != want {
		t.Errorf("got %s, want %s", got, want)
	}
	// A 204 has a null body.
	noContent := Config{Mode: protocol.OutboundStub, Stub: func(context.Context, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 204}, nil
	}}
	got, _ = runProgram(t, noContent, `const r = await fetch('https://a.example/'); return [r.status, r.body, await r.text()]`)
	if got.String() != `[204,null,""]` {
		t.Errorf("204: %s", got)
	}
}

func TestFetchPayloadBound(t *testing.T) {
	stub := &recordingStub{}
	cfg := Config{Mode: protocol.OutboundStub, Stub: stub.fn}
	// 98,304 body bytes cost 131,072 base64 bytes: with the URL's quotes the
	// request is just past PayloadLimit.
	body := protocol.PayloadLimit / 4 * 3
	url := "https://a.example/"
	size := protocol.OutboundRequestWireSize(protocol.OutboundRequest{URL: url, Body: make([]byte, body)})
	got, _ := runProgram(t, cfg, fmt.Sprintf(`await fetch(%q, {method: 'POST', body: new Uint8Array(%d)})`, url, body))
	want := rejected("TypeError", protocol.NewPayloadTooLargeError(protocol.PartOutboundRequest, size, protocol.PayloadLimit).Error())
	if got.String() != want {
		t.Errorf("got %s, want %s", got, want)
	}
	// Headers count too.
	got, _ = runProgram(t, cfg, fmt.Sprintf(`await fetch(%q, {headers: {x: 'v'.repeat(%d)}})`, url, protocol.PayloadLimit))
	size = protocol.OutboundRequestWireSize(protocol.OutboundRequest{Method: "GET", URL: url,
		Headers: []protocol.Header{{"x", strings.Repeat("v", protocol.PayloadLimit)}}})
	if want := rejected("TypeError", protocol.NewPayloadTooLargeError(protocol.PartOutboundRequest, size, protocol.PayloadLimit).Error()); got.String() != want {
		t.Errorf("large header: got %s, want %s", got, want)
	}
	if n := len(stub.requests()); n != 0 {
		t.Errorf("the stub saw %d requests past the bound", n)
	}
	// A request exactly at the bound passes.
	at := body
	for protocol.OutboundRequestWireSize(protocol.OutboundRequest{URL: url, Body: make([]byte, at)}) > protocol.PayloadLimit {
		at--
	}
	if protocol.OutboundRequestWireSize(protocol.OutboundRequest{URL: url, Body: make([]byte, at)}) != protocol.PayloadLimit {
		t.Fatalf("no body size meets the bound exactly")
	}
	got, _ = runProgram(t, cfg, fmt.Sprintf(`return (await fetch(%q, {method: 'POST', body: new Uint8Array(%d)})).status`, url, at))
	if got.String() != "200" {
		t.Errorf("under the bound: %s", got)
	}
}

func TestFetchAbort(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	blocking := Config{Mode: protocol.OutboundStub, Stub: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		<-ctx.Done()
		cancelled <- struct{}{}
		return protocol.OutboundResponse{}, ctx.Err()
	}}
	got, l := runProgram(t, blocking, `const c = new AbortController(); const p = fetch('https://a.example/', {signal: c.signal});
		await null; c.abort(); try { await p } catch (e) { return [e.name, e instanceof DOMException] }`)
	if got.String() != `["AbortError",true]` {
		t.Fatalf("abort: %s", got)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the stub's context was not cancelled by the abort")
	}
	if l.waits != 0 {
		t.Errorf("the host wait stayed open after the abort")
	}

	got, _ = runProgram(t, blocking, `try { await fetch('https://a.example/', {signal: AbortSignal.abort('pre')}) } catch (e) { return e }`)
	if got.String() != `"pre"` {
		t.Errorf("pre-aborted: %s", got)
	}
	got, _ = runProgram(t, blocking, `try { await fetch('https://a.example/', {signal: AbortSignal.timeout(20)}) } catch (e) { return e.name }`)
	if got.String() != `"TimeoutError"` {
		t.Errorf("timeout signal: %s", got)
	}
	// A request still open when the run ends is cancelled.
	_, _ = runProgram(t, blocking, `fetch('https://a.example/'); return 1`)
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("a request open at the end of the run was not cancelled")
	}
}

func TestFetchConcurrencyBound(t *testing.T) {
	var now, peak atomic.Int32
	cfg := Config{Mode: protocol.OutboundStub, Stub: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		now.Add(-1)
		return protocol.OutboundResponse{Status: 200, Body: []byte(req.URL[len(req.URL)-2:])}, nil
	}}
	got, l := runProgram(t, cfg, `const rs = await Promise.all(Array.from({length: 40}, (_, i) => fetch('https://a.example/' + String(i).padStart(2, '0'))));
		const texts = await Promise.all(rs.map(r => r.text())); return texts.every((t, i) => t === String(i).padStart(2, '0'))`)
	if got.String() != "true" {
		t.Fatalf("got %s", got)
	}
	if p := peak.Load(); p > MaxConcurrentFetches || p < 2 {
		t.Errorf("peak concurrency %d, want 2..%d", p, MaxConcurrentFetches)
	}
	if l.maxWaits > MaxConcurrentFetches || l.waits != 0 {
		t.Errorf("host waits: max %d, open %d", l.maxWaits, l.waits)
	}
}

func TestFetchNativeVetoed(t *testing.T) {
	got, _ := runProgram(t, Config{Mode: protocol.OutboundNative, Native: NativeOptions{Vetoed: true}}, `await fetch('https://example.com/')`)
	if want := rejected("TypeError", protocol.NewOutboundDisabledError().Error()); got.String() != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

var loopbackAllowed = NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func TestFetchNativeDeniesInternalAddresses(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	cfg := Config{Mode: protocol.OutboundNative}
	for _, u := range []string{
		srv.URL,
		fmt.Sprintf("http://localhost:%d/", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port),
		fmt.Sprintf("http://0x7f.1:%d/", port),
		"http://169.254.169.254/latest/meta-data/",
		"http://10.1.2.3/", "http://192.168.1.1/", "http://[::1]/", "http://[fd00::1]/", "http://0.0.0.0/",
	} {
		got, l := runProgram(t, cfg, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return [e instanceof TypeError, e.message] }`, u))
		if !strings.HasPrefix(got.value, "[true,") || !strings.Contains(got.value, "is at an address this executor does not reach") {
			t.Errorf("%s: %s", u, got)
		}
		if l.opened != 0 {
			t.Errorf("a native request opened a host wait")
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
}

func TestFetchNative(t *testing.T) {
	type seen struct {
		method, path, body, header string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), string(b), r.Header.Get("X-Test")}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Add("X-Multi", "1")
		w.Header().Add("X-Multi", "2")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("short and stout"))
	}))
	defer srv.Close()
	out, l := runProgram(t, Config{Mode: protocol.OutboundNative, Native: loopbackAllowed},
		fmt.Sprintf(`const r = await fetch(%q + '/p?q=1', {method: 'POST', headers: {'X-Test': 'yes'}, body: 'hello'});
		return [r.status, r.statusText, r.ok, r.headers.get('x-multi'), r.headers.get('content-type'), await r.text(), r.url]`, srv.URL))
	want := fmt.Sprintf(`[418,"I'm a teapot",false,"1, 2","text/plain","short and stout","%s/p?q=1"]`, srv.URL)
	if out.String() != want {
		t.Errorf("got %s, want %s", out, want)
	}
	select {
	case s := <-got:
		if s != (seen{"POST", "/p?q=1", "hello", "yes"}) {
			t.Errorf("server saw %+v", s)
		}
	default:
		t.Error("the server saw nothing")
	}
	if l.opened != 0 {
		t.Errorf("native requests keep the clock running: no host wait, but %d opened", l.opened)
	}
	if l.guestRan != 1 || l.guest != 0 {
		t.Errorf("guest work: opened %d, open at the end %d; want 1 and 0", l.guestRan, l.guest)
	}
	// The request ran off the loop as the run's own work, so that a worker
	// charges it to the run.
	if ran, open := l.offLoopRan.Load(), l.offLoop.Load(); ran != 1 || open != 0 {
		t.Errorf("off-loop work: started %d, open at the end %d; want 1 and 0", ran, open)
	}
}

func TestFetchNativeRedirects(t *testing.T) {
	// B listens on 127.0.0.2, A on 127.0.0.1 redirects to B.
	lnB, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2 on this machine: %v", err)
	}
	var bHits atomic.Int32
	srvB := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bHits.Add(1)
		_, _ = w.Write([]byte("from B"))
	}))
	srvB.Listener.Close()
	srvB.Listener = lnB
	srvB.Start()
	defer srvB.Close()
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/toB":
			http.Redirect(w, r, srvB.URL+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/hop":
			http.Redirect(w, r, "/end", http.StatusMovedPermanently)
		default:
			_, _ = w.Write([]byte("end"))
		}
	}))
	defer srvA.Close()

	onlyA := Config{Mode: protocol.OutboundNative, Native: NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, MaxRedirects: 3}}
	out, _ := runProgram(t, onlyA, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return e.message }`, srvA.URL+"/toB"))
	if !strings.Contains(out.value, "does not reach") || bHits.Load() != 0 {
		t.Errorf("a redirect to a denied address: %s (B hit %d times)", out, bHits.Load())
	}
	both := Config{Mode: protocol.OutboundNative, Native: loopbackAllowed}
	out, _ = runProgram(t, both, fmt.Sprintf(`const r = await fetch(%q); return [await r.text(), r.redirected, r.url]`, srvA.URL+"/toB"))
	if want := fmt.Sprintf(`["from B",true,"%s/"]`, srvB.URL); out.String() != want || bHits.Load() != 1 {
		t.Errorf("allowed redirect: %s, want %s", out, want)
	}
	out, _ = runProgram(t, onlyA, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return e.message }`, srvA.URL+"/loop"))
	if !strings.Contains(out.value, "more than 3 redirects") {
		t.Errorf("redirect loop: %s", out)
	}
	out, _ = runProgram(t, onlyA, fmt.Sprintf(`const r = await fetch(%q, {redirect: 'manual'}); return [r.status, r.headers.get('location')]`, srvA.URL+"/hop"))
	if out.String() != `[301,"/end"]` {
		t.Errorf("manual redirect: %s", out)
	}
	out, _ = runProgram(t, onlyA, fmt.Sprintf(`try { await fetch(%q, {redirect: 'error'}) } catch (e) { return e.message }`, srvA.URL+"/hop"))
	if !strings.Contains(out.value, "redirect the request's redirect mode does not follow") {
		t.Errorf("redirect error mode: %s", out)
	}
}

func TestFetchNativeBounds(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = w.Write(make([]byte, 2000))
		case "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	opts := loopbackAllowed
	opts.MaxResponseBytes = 1000
	opts.RequestTimeout = 200 * time.Millisecond
	cfg := Config{Mode: protocol.OutboundNative, Native: opts}
	out, _ := runProgram(t, cfg, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return e.message }`, srv.URL+"/big"))
	if !strings.Contains(out.value, "larger than the 1000-byte bound") {
		t.Errorf("response cap: %s", out)
	}
	out, _ = runProgram(t, cfg, fmt.Sprintf(`return (await (await fetch(%q)).bytes()).length`, srv.URL+"/small"))
	if out.String() != "0" {
		t.Errorf("small response: %s", out)
	}
	out, _ = runProgram(t, cfg, fmt.Sprintf(`try { await fetch(%q) } catch (e) { return e.message }`, srv.URL+"/slow"))
	if !strings.Contains(out.value, "took longer than the 200ms this executor allows one request") {
		t.Errorf("request timeout: %s", out)
	}
	// Aborting an in-flight native request.
	out, _ = runProgram(t, cfg, fmt.Sprintf(`const c = new AbortController(); const p = fetch(%q, {signal: c.signal}); setTimeout(() => c.abort(), 20);
		try { await p } catch (e) { return e.name }`, srv.URL+"/slow"))
	if out.String() != `"AbortError"` {
		t.Errorf("abort: %s", out)
	}
	out, _ = runProgram(t, cfg, `try { await fetch('ftp://example.com/x') } catch (e) { return e.message }`)
	if out.String() != `"fetch failed: the scheme \"ftp\" is not supported; only http and https URLs can be fetched"` {
		t.Errorf("ftp: %s", out)
	}
}

func TestAddressPolicy(t *testing.T) {
	p := newAddressPolicy(NativeOptions{
		Deny:  []netip.Prefix{netip.MustParsePrefix("8.8.4.0/24")},
		Allow: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")},
	})
	for addr, want := range map[string]bool{
		"93.184.216.34": true, "2606:2800:220:1::1": true, "8.8.8.8": true,
		"8.8.4.4": false, "10.9.1.1": true, "10.8.1.1": false,
		"127.0.0.1": false, "127.255.0.1": false, "::1": false, "::ffff:127.0.0.1": false, "::ffff:10.0.0.1": false,
		"169.254.169.254": false, "fe80::1": false, "fd00:ec2::254": false, "fc00::1": false,
		"172.16.0.1": false, "172.31.255.255": false, "172.32.0.1": true, "192.168.0.1": false, "100.64.0.1": false,
		"0.0.0.0": false, "::": false, "224.0.0.1": false, "ff02::1": false, "255.255.255.255": false,
		"64:ff9b::7f00:1": false, "2002:7f00:1::": false, "fe80::1%eth0": false, "::1%lo": false, "::ffff:169.254.169.254%x": false,
	} {
		if got := p.permits(netip.MustParseAddr(addr)); got != want {
			t.Errorf("permits(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestAddressPolicyDenyAlwaysBeatsAllow(t *testing.T) {
	p := newAddressPolicy(NativeOptions{
		Allow:      []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")},
		DenyAlways: []netip.Prefix{netip.MustParsePrefix("10.9.8.0/24"), netip.MustParsePrefix("93.184.216.0/24")},
	})
	for addr, want := range map[string]bool{
		"10.9.1.1": true, "10.9.8.1": false, "93.184.216.34": false, "::ffff:10.9.8.1": false, "8.8.8.8": true,
	} {
		if got := p.permits(netip.MustParseAddr(addr)); got != want {
			t.Errorf("permits(%s) = %v, want %v", addr, got, want)
		}
	}
}

func TestNativeOptionsCrossAPipe(t *testing.T) {
	in := NativeOptions{Vetoed: true, Deny: []netip.Prefix{netip.MustParsePrefix("8.8.8.0/24")}, Allow: []netip.Prefix{netip.MustParsePrefix("fd00::/8")},
		DenyAlways:       []netip.Prefix{netip.MustParsePrefix("1.2.3.0/24")},
		MaxResponseBytes: 5, MaxRedirects: -1, RequestTimeout: time.Second}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out NativeOptions
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("%s came back as %+v", b, out)
	}
}
