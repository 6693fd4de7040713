package webplatform

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

// Request builds, in the runtime, the Request a retained fetch handler
// receives for req. Call it on the loop goroutine. The error's text says
// why req cannot be a Request (a relative URL, a body on GET); an
// uncatchable runtime error (an interrupt) passes through as it is.
func (pl *Platform) Request(req protocol.OutboundRequest) (goja.Value, error) {
	flat := make([]any, 0, 2*len(req.Headers))
	for _, h := range req.Headers {
		flat = append(flat, h[0], h[1])
	}
	body := goja.Null()
	// A GET or HEAD cannot carry a body; an empty one is read as none, since
	// a wire may send an empty buffer where it means nothing.
	bodiless := strings.EqualFold(req.Method, "GET") || strings.EqualFold(req.Method, "HEAD")
	if req.Body != nil && !(bodiless && len(req.Body) == 0) {
		body = pl.vm.ToValue(pl.vm.NewArrayBuffer(append([]byte{}, req.Body...)))
	}
	v, err := pl.makeRequest(goja.Undefined(), pl.vm.ToValue(req.Method), pl.vm.ToValue(req.URL), pl.vm.NewArray(flat...), body)
	if err != nil {
		return nil, exceptionText(err)
	}
	return v, nil
}

// Response reads what a retained fetch handler answered (already settled,
// if it was a promise) as the serialized response. It refuses anything
// but a Response, a Response.error(), a body already read, and an answer
// past PayloadLimit (PayloadTooLargeError's text for the handle answer).
// The Response's body counts as read afterwards.
func (pl *Platform) Response(v goja.Value) (protocol.OutboundResponse, error) {
	out, err := pl.serializeResponse(goja.Undefined(), v)
	if err != nil {
		return protocol.OutboundResponse{}, exceptionText(err)
	}
	if goja.IsNull(out) {
		return protocol.OutboundResponse{}, protocol.NewNotAResponseError()
	}
	arr := out.ToObject(pl.vm)
	resp := protocol.OutboundResponse{
		Status:     int(arr.Get("0").ToInteger()),
		StatusText: arr.Get("1").String(),
	}
	if resp.Status == 0 {
		return protocol.OutboundResponse{}, protocol.NewNetworkErrorResponseError()
	}
	p := &platform{vm: pl.vm}
	flat := p.stringList(arr.Get("2"))
	for i := 0; i+1 < len(flat); i += 2 {
		resp.Headers = append(resp.Headers, protocol.Header{flat[i], flat[i+1]})
	}
	resp.Body = append([]byte{}, p.bytesArg(arr.Get("3"))...)
	if size := protocol.HandleAnswerWireSize(resp); size > protocol.PayloadLimit {
		return protocol.OutboundResponse{}, protocol.NewPayloadTooLargeError(protocol.PartHandleAnswer, size, protocol.PayloadLimit)
	}
	return resp, nil
}

// exceptionText turns a JavaScript exception into an error carrying only
// its message; interrupts and stack overflows pass through.
func exceptionText(err error) error {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		if obj, ok := ex.Value().(*goja.Object); ok {
			if m := obj.Get("message"); m != nil && !goja.IsUndefined(m) {
				return errors.New(m.String())
			}
		}
		return fmt.Errorf("%s", ex.Value().String())
	}
	return err
}
