package sandbox

import (
	"cmp"
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/webplatform"
	"github.com/supolka/codemode-gateway/protocol"
)

// slowStub answers every stub-mode request after delay (300 ms when 0).
type slowStub struct {
	fakeHost
	delay time.Duration
}

func (h *slowStub) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	time.Sleep(cmp.Or(h.delay, 300*time.Millisecond))
	return protocol.OutboundResponse{Status: 200, Body: []byte("slow " + req.URL)}, nil
}

// The web platform, installed into a real run: the contract's declared
// absences example, the disabled text, and the run-clock rows of the
// outbound setting.
func TestWebPlatformContractExample(t *testing.T) {
	res := runJob(t, job(`async () => [typeof caches, typeof CompressionStream, typeof WebSocket]`), &fakeHost{})
	if res.HasError || res.ResultJSON != `["object","function","undefined"]` {
		t.Fatalf("%+v", res)
	}
	res = runJob(t, job(`async () => { try { await fetch('https://x/') } catch (e) { return e.message } }`), &fakeHost{})
	if res.ResultJSON != `"`+protocol.NewOutboundDisabledError().Error()+`"` {
		t.Fatalf("%+v", res)
	}
}

func TestWebPlatformStubStopsTheClock(t *testing.T) {
	j := job(`async () => (await fetch('https://x/a')).text()`)
	j.OutboundMode = protocol.OutboundStub
	// The bound leaves a busy machine room for the run's own work; the
	// stub's wait alone is past it.
	j.TimeoutMs = 1000
	stub := &slowStub{delay: 1500 * time.Millisecond}
	res := runJob(t, j, stub)
	if res.HasError || res.ResultJSON != `"slow https://x/a"` {
		t.Fatalf("%+v", res)
	}
	j.CountHostWaits = true
	res = runJob(t, j, stub)
	wantError(t, res, protocol.NewExecutionTimeoutError(1000).Error())
}

func TestWebPlatformNativeSpendsTheBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	j := job(`async () => (await fetch('` + srv.URL + `')).status`)
	j.OutboundMode = protocol.OutboundNative
	j.TimeoutMs = 100
	j.Native = webplatform.NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	res := runJob(t, j, &fakeHost{})
	wantError(t, res, protocol.NewExecutionTimeoutError(100).Error())
	j.TimeoutMs = 5000
	res = runJob(t, j, &fakeHost{})
	if res.HasError || res.ResultJSON != "200" {
		t.Fatalf("%+v", res)
	}
	// Without the allowance, the default deny list keeps loopback out.
	j.Native = webplatform.NativeOptions{}
	j.Code = `async () => { try { await fetch('` + srv.URL + `') } catch (e) { return e.message } }`
	res = runJob(t, j, &fakeHost{})
	if !strings.Contains(res.ResultJSON, "does not reach") {
		t.Fatalf("default deny: %+v", res)
	}
}

// A PBKDF2 derivation runs off the loop as the guest's own work: it spends
// the bound, one of 2^32-1 iterations ends with the run's timeout, and the
// loop serves the program's timers meanwhile.
func TestWebPlatformPBKDF2SpendsTheBound(t *testing.T) {
	endless := `const key = await crypto.subtle.importKey('raw', new Uint8Array(8), 'PBKDF2', false, ['deriveBits']);
		const derived = crypto.subtle.deriveBits({name: 'PBKDF2', hash: 'SHA-256', salt: new Uint8Array(8), iterations: 4294967295}, key, 256);`
	j := job(`async () => { ` + endless + ` await derived }`)
	j.TimeoutMs = 100
	res := runJob(t, j, &fakeHost{})
	wantError(t, res, protocol.NewExecutionTimeoutError(100).Error())
	j.Code = `async () => { ` + endless + `
		return await Promise.race([derived.then(() => 'derived'), new Promise((r) => setTimeout(() => r('timer'), 10))]) }`
	j.TimeoutMs = 5000
	res = runJob(t, j, &fakeHost{})
	if res.HasError || res.ResultJSON != `"timer"` {
		t.Fatalf("%+v", res)
	}
	j.Code = `async () => {
		const key = await crypto.subtle.importKey('raw', new TextEncoder().encode('password'), 'PBKDF2', false, ['deriveBits']);
		const bits = await crypto.subtle.deriveBits({name: 'PBKDF2', hash: 'SHA-1', salt: new TextEncoder().encode('salt'), iterations: 2}, key, 160);
		return [...new Uint8Array(bits)].map(x => x.toString(16).padStart(2, '0')).join('');
	}`
	res = runJob(t, j, &fakeHost{})
	// RFC 6070's second case.
	if res.HasError || res.ResultJSON != `"ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"` {
		t.Fatalf("%+v", res)
	}
}

// slowLoopback is a loopback server that answers 200 after delay.
func slowLoopback(t *testing.T, delay time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A request the executor performs natively spends the bound even while a
// tool call is open: the clock stops only when a host call is the only work
// in flight. A 1.5 s native fetch beside a 3 s tool call under a 300 ms
// bound times out; once the fetch is answered, the tool call alone stops
// the clock again.
func TestClockNativeFetchCountsBesideAToolCall(t *testing.T) {
	srv := slowLoopback(t, 1500*time.Millisecond)
	h := &fakeHost{delay: 3 * time.Second, answer: func(call) (string, error) { return `{"result":"tool"}`, nil }}
	j := toolJob(`async () => {
    const tool = store.slow()
    const status = (await fetch('`+srv.URL+`')).status
    return [status, await tool]
  }`, 300)
	j.OutboundMode = protocol.OutboundNative
	j.Native = webplatform.NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	r := runJob(t, j, h)
	wantError(t, r, protocol.NewExecutionTimeoutError(300).Error())

	quick := slowLoopback(t, 50*time.Millisecond)
	h = &fakeHost{delay: time.Second, answer: func(call) (string, error) { return `{"result":"tool"}`, nil }}
	j.Code = `async () => {
    const tool = store.slow()
    const status = (await fetch('` + quick.URL + `')).status
    return [status, await tool]
  }`
	r = runJob(t, j, h)
	if got := result(t, r); !reflect.DeepEqual(got, []any{200.0, "tool"}) {
		t.Fatalf("got %#v", got)
	}
}

func TestWebPlatformForAwaitBody(t *testing.T) {
	j := job(`async () => { const r = await fetch('https://x/a'); let s = ''; for await (const c of r.body) s += new TextDecoder().decode(c); return s }`)
	j.OutboundMode = protocol.OutboundStub
	res := runJob(t, j, &slowStub{})
	if res.HasError || res.ResultJSON != `"slow https://x/a"` {
		t.Fatalf("%+v", res)
	}
}

// TestRunReportsRunClockAndRequests: the envelope carries the run-clock
// time the run spent and how many requests its fetch sent, for metrics.
func TestRunReportsRunClockAndRequests(t *testing.T) {
	j := job(`async () => { const t = Date.now(); while (Date.now() - t < 60) {} await (await fetch('https://x/a')).text(); await fetch('https://x/b'); return 1 }`)
	j.OutboundMode = protocol.OutboundStub
	res := runJob(t, j, &slowStub{})
	if res.HasError {
		t.Fatal(res.Error)
	}
	if res.OutboundRequests != 2 {
		t.Fatalf("OutboundRequests = %d, want 2", res.OutboundRequests)
	}
	// 60 ms of compute counts; the two 300 ms stub waits do not.
	if res.RunClock < 60*time.Millisecond || res.RunClock > 550*time.Millisecond {
		t.Fatalf("RunClock = %v, want the compute (>= 60 ms) without the host waits (600 ms)", res.RunClock)
	}
}
