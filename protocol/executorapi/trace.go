package executorapi

import (
	"context"
	"math"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// This file carries the W3C trace context across execute's options and
// invokeHandle's optional fourth argument (extensions: servers that do not
// know them ignore them) and makes the spans the server sees: the
// execution, its tool calls and outbound requests, and handle invocations.

// The option members of the extension.
const (
	optionTraceparent = "traceparent"
	optionTracestate  = "tracestate"
)

// traceContextOf reads the trace context members of method's options. A
// member of the wrong type is a TypeError like any other option's; a
// malformed traceparent is ignored, as the W3C recommendation asks.
func traceContextOf(method string, v any) (telemetry.TraceContext, error) {
	var tc telemetry.TraceContext
	for _, key := range []string{optionTraceparent, optionTracestate} {
		f, present := optionMember(v, key)
		if !present || isAbsent(f) {
			continue
		}
		text, ok := f.(string)
		if !ok {
			return telemetry.TraceContext{}, shapeError("%s: options.%s must be a string", method, key)
		}
		if key == optionTraceparent {
			tc.Parent = text
		} else {
			tc.State = text
		}
	}
	return tc, nil
}

// invokeOptionsOf reads invokeHandle's options, its optional fourth
// argument, which carries only the trace context.
func invokeOptionsOf(v any) (telemetry.TraceContext, error) {
	if isAbsent(v) {
		return telemetry.TraceContext{}, nil
	}
	if _, ok := asMap(v); !ok {
		return telemetry.TraceContext{}, shapeError("invokeHandle: options must be an object")
	}
	return traceContextOf("invokeHandle", v)
}

// optionMember looks one member up in a call's options without building
// a map of them (applyOptions says what is wrong with execute's options
// that are not an object).
func optionMember(v any, key string) (any, bool) {
	switch o := v.(type) {
	case jsvalue.Object:
		for _, f := range o {
			if f.Key == key {
				return f.Value, true
			}
		}
	case map[string]any:
		f, ok := o[key]
		return f, ok
	}
	return nil, false
}

// withTraceContext adds ctx's trace context to a call's options.
func withTraceContext(ctx context.Context, o jsvalue.Object) jsvalue.Object {
	tc := telemetry.Outgoing(ctx)
	if tc.Parent == "" {
		return o
	}
	o = append(o, jsvalue.Member{Key: optionTraceparent, Value: tc.Parent})
	if tc.State != "" {
		o = append(o, jsvalue.Member{Key: optionTracestate, Value: tc.State})
	}
	return o
}

// requestBytes is what an execution brought in: its code and modules.
func requestBytes(req *protocol.ExecuteRequest) int {
	n := len(req.Code)
	for _, p := range protocol.ModulePairsOf(req.Modules) {
		n += len(p.Module.Source) + len(p.Module.Data)
	}
	return n
}

// tracedDispatch makes a span of every tool call of the execution whose
// span is parent.
func (s *Server) tracedDispatch(parent trace.Span, d protocol.DispatchFunc) protocol.DispatchFunc {
	t := s.opts.Tracing
	if t == nil {
		return d
	}
	return func(ctx context.Context, provider, tool, argsJSON string) (string, error) {
		ctx, call := t.StartToolCall(ctx, parent, provider, tool, argsJSON)
		out, err := d(ctx, provider, tool, argsJSON)
		call.End(out, err)
		return out, err
	}
}

// tracedOutbound makes a span of every request sent to the caller's
// outbound function.
func (s *Server) tracedOutbound(parent trace.Span, fn protocol.OutboundFunc) protocol.OutboundFunc {
	t := s.opts.Tracing
	if t == nil {
		return fn
	}
	return func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		ctx, o := t.StartOutbound(ctx, parent, req.Method, req.URL)
		resp, err := fn(ctx, req)
		o.End(resp.Status, err)
		return resp, err
	}
}

// connectionContext starts the span of a connection ServeHTTP accepts.
func (s *Server) connectionContext(base context.Context, r *http.Request) (context.Context, trace.Span) {
	return s.opts.Tracing.StartConnection(base, r.Header, telemetry.URLPath.String(r.URL.Path))
}

// usageFromWire reads a result message's usage member; one this side
// cannot read (another server's extension of the same name) is ignored.
func usageFromWire(v any) *protocol.Usage {
	m, ok := asMap(v)
	if !ok {
		return nil
	}
	num := func(key string) (float64, bool) {
		f, ok := m[key].(float64)
		return f, ok && f == math.Trunc(f) && f <= 1<<53
	}
	var u protocol.UsageMessage
	var ok1, ok2 bool
	u.RunClockMs, ok1 = m["runClockMs"].(float64)
	u.CPUMs, ok2 = m["cpuMs"].(float64)
	heap, ok3 := num("peakHeapBytes")
	tools, ok4 := num("toolCalls")
	reqs, ok5 := num("outboundRequests")
	logs, ok6 := num("logBytes")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return nil
	}
	u.PeakHeapBytes, u.ToolCalls, u.OutboundRequests, u.LogBytes = int64(heap), int(tools), int(reqs), int(logs)
	return u.Usage()
}
