package webplatform

import (
	"context"
	"encoding/base64"
	neturl "net/url"
	"strconv"
	"time"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// fetch is the native behind the glue's fetch:
//
//	fetch(method, url, [name, value, …], body ArrayBuffer|null, redirect,
//	      onResponse(status, statusText, [name, value, …], body, url, redirected),
//	      onError(message)) → abort()
//
// It throws a TypeError for a request refused before it leaves (the
// disabled mode, the veto, the payload bound); otherwise exactly one of the
// callbacks runs later on the loop, unless abort was called first.
func (p *platform) fetch(c goja.FunctionCall) goja.Value {
	vm := p.vm
	flat := p.stringList(c.Argument(2))
	req := protocol.OutboundRequest{
		Method:  c.Argument(0).String(),
		URL:     c.Argument(1).String(),
		Headers: make([]protocol.Header, 0, len(flat)/2),
		Body:    p.bytesArg(c.Argument(3)),
	}
	for i := 0; i+1 < len(flat); i += 2 {
		req.Headers = append(req.Headers, protocol.Header{flat[i], flat[i+1]})
	}
	if req.Body != nil {
		// The runtime owns the buffer; the request crosses goroutines.
		req.Body = append([]byte{}, req.Body...)
	}
	redirect := c.Argument(4).String()
	onResponse, ok1 := goja.AssertFunction(c.Argument(5))
	onError, ok2 := goja.AssertFunction(c.Argument(6))
	if !ok1 || !ok2 {
		panic(vm.NewTypeError("fetch: callbacks missing"))
	}

	mode := p.cfg.Mode
	if mode == protocol.OutboundStub && p.cfg.Stub == nil {
		mode = protocol.OutboundDisabled
	}
	// The operator's veto of native mode means no network at all, as the
	// disabled mode does, and reads the same.
	if mode == protocol.OutboundNative && p.cfg.Native.Vetoed || mode != protocol.OutboundNative && mode != protocol.OutboundStub {
		panic(vm.NewTypeError(protocol.NewOutboundDisabledError().Error()))
	}
	if size := protocol.OutboundRequestWireSize(req); size > protocol.PayloadLimit {
		panic(vm.NewTypeError(protocol.NewPayloadTooLargeError(protocol.PartOutboundRequest, size, protocol.PayloadLimit).Error()))
	}
	if p.fetches.Full() {
		panic(vm.NewTypeError(protocol.NewHostCallBacklogError(MaxFetchesInFlight).Error()))
	}

	ctx, cancel := context.WithCancel(p.loop.Context())
	settled := false // a callback ran or abort was called
	// waitDone closes what the request holds open on the run clock: a host
	// wait (stub) or the guest's own work elsewhere (native).
	var waitDone func()
	closeWait := func() {
		if waitDone != nil {
			waitDone()
			waitDone = nil
		}
	}
	finish := func(call func()) {
		closeWait()
		p.release()
		if settled {
			return
		}
		settled = true
		call()
	}
	callback := func(fn goja.Callable, args ...any) func() {
		return func() {
			vals := make([]goja.Value, len(args))
			for i, a := range args {
				vals[i] = vm.ToValue(a)
			}
			if _, err := fn(goja.Undefined(), vals...); err != nil {
				p.loop.Stop(err)
			}
		}
	}
	deliver := func(resp protocol.OutboundResponse, url string, redirected bool) func() {
		return func() {
			if resp.Status < 200 || resp.Status > 599 {
				callback(onError, "fetch failed: the response status "+strconv.Itoa(resp.Status)+" is outside 200 to 599, the range a Response can carry")()
				return
			}
			hs := make([]string, 0, 2*len(resp.Headers))
			for _, h := range resp.Headers {
				hs = append(hs, h[0], h[1])
			}
			callback(onResponse, resp.Status, resp.StatusText, p.strings(hs), p.buffer(resp.Body), url, redirected)()
		}
	}

	start := func() {
		if settled {
			// Aborted while it waited its turn.
			p.release()
			return
		}
		switch mode {
		case protocol.OutboundStub:
			waitDone = p.loop.HostWait()
			stub := p.cfg.Stub
			go func() {
				resp, err := callStub(ctx, stub, req)
				p.loop.Post(func() {
					if err != nil {
						finish(callback(onError, "fetch failed: the outbound function failed: "+err.Error()))
						return
					}
					finish(deliver(resp, req.URL, false))
				})
			}()
		default:
			client := p.native
			waitDone = p.loop.GuestWork()
			go func() {
				began := time.Now()
				offLoop := p.loop.OffLoop()
				res, err := client.do(ctx, req, redirect)
				offLoop()
				took := time.Since(began)
				p.loop.Post(func() {
					p.performedOne(req, began, took, res.resp.Status, err)
					if err != nil {
						finish(callback(onError, err.Error()))
						return
					}
					finish(deliver(res.resp, res.url, res.redirected))
				})
			}()
		}
	}
	p.sent++
	if now, _ := p.fetches.Add(start); now {
		start()
	}

	abort := func(goja.FunctionCall) goja.Value {
		if !settled {
			settled = true
			cancel()
			// The program stopped waiting: the clock runs again at once.
			closeWait()
		}
		return goja.Undefined()
	}
	return vm.ToValue(abort)
}

// release ends one request's turn and starts the next queued one.
func (p *platform) release() {
	if next, ok := p.fetches.Done(); ok {
		next()
	}
}

// callStub runs the caller's function and turns a panic in it into an
// error.
func callStub(ctx context.Context, stub StubFunc, req protocol.OutboundRequest) (resp protocol.OutboundResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errPanicked
		}
	}()
	return stub(ctx, req)
}

type panicError struct{}

func (panicError) Error() string { return "it broke while handling the request" }

var errPanicked error = panicError{}

// performedOne records a native request for the run's spans: its method,
// host, status and times, never its query, headers or body.
func (p *platform) performedOne(req protocol.OutboundRequest, began time.Time, took time.Duration, status int, err error) {
	if len(p.performed) >= protocol.MaxTracedRequests {
		return
	}
	host := ""
	if u, perr := neturl.Parse(req.URL); perr == nil {
		host = u.Hostname()
	}
	if err != nil {
		status = 0
	}
	p.performed = append(p.performed, protocol.NativeRequest{Method: req.Method, Host: host, Status: status, Start: began, Duration: took})
}
