package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/protocol"
)

// The attributes of the gateway's spans. Only names, sizes, durations and
// kinds: see the package comment.
const (
	Tenant        = attribute.Key("codemode.tenant")
	Backend       = attribute.Key("codemode.backend")
	Member        = attribute.Key("codemode.member")
	Outcome       = attribute.Key("codemode.outcome")
	RunClockMs    = attribute.Key("codemode.run_clock_ms")
	QueueWaitMs   = attribute.Key("codemode.queue_wait_ms")
	BytesIn       = attribute.Key("codemode.bytes_in")
	BytesOut      = attribute.Key("codemode.bytes_out")
	Subprotocol   = attribute.Key("codemode.subprotocol")
	ToolProvider  = attribute.Key("codemode.tool.provider")
	ToolName      = attribute.Key("codemode.tool.name")
	ToolResult    = attribute.Key("codemode.tool.result")
	DurationMs    = attribute.Key("codemode.duration_ms")
	HandleName    = attribute.Key("codemode.handle.name")
	WorkerPID     = attribute.Key("codemode.worker.pid")
	KillReason    = attribute.Key("codemode.worker.kill_reason")
	CodeBytes     = attribute.Key("codemode.code.bytes")
	CodeDigest    = attribute.Key("codemode.code.sha256")
	ArgsBytes     = attribute.Key("codemode.tool.args_bytes")
	ArgsDigest    = attribute.Key("codemode.tool.args_sha256")
	ResultBytes   = attribute.Key("codemode.tool.result_bytes")
	ResultDigest  = attribute.Key("codemode.tool.result_sha256")
	HTTPMethod    = attribute.Key("http.request.method")
	HTTPStatus    = attribute.Key("http.response.status_code")
	ServerAddress = attribute.Key("server.address")
	URLScheme     = attribute.Key("url.scheme")
	URLPath       = attribute.Key("url.path")
	OutboundMode  = attribute.Key("codemode.outbound.mode")

	UsageCPUMs         = attribute.Key("codemode.usage.cpu_ms")
	UsagePeakHeapBytes = attribute.Key("codemode.usage.peak_heap_bytes")
	UsageToolCalls     = attribute.Key("codemode.usage.tool_calls")
	UsageRequests      = attribute.Key("codemode.usage.outbound_requests")
	UsageLogBytes      = attribute.Key("codemode.usage.log_bytes")
)

// The span names.
const (
	SpanConnection   = "codemode.connection"
	SpanExecute      = "codemode.execute"
	SpanToolCall     = "codemode.tool_call"
	SpanOutbound     = "codemode.outbound"
	SpanInvokeHandle = "codemode.invoke_handle"
)

// Event names on an execution's span.
const (
	EventWorkerStart = "codemode.worker.start"
	EventWorkerKill  = "codemode.worker.kill"
)

// TraceContext is the W3C trace context as it crosses the executor
// protocol: the traceparent and tracestate members of execute's options.
type TraceContext struct {
	Parent, State string
}

var w3c = propagation.TraceContext{}

// connection is what a connection's context tells its calls.
type connection struct {
	span trace.Span
	// joined: the upgrade carried the caller's trace context, so the
	// connection's calls belong to that trace.
	joined bool
}

type connectionKey struct{}

// StartConnection starts the span of one WebSocket connection, a child of
// the trace context its upgrade request carries (traceparent, tracestate).
// The context it returns is the parent of the connection's calls.
func (t *Tracing) StartConnection(ctx context.Context, h http.Header, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	parent := w3c.Extract(context.Background(), propagation.HeaderCarrier(h))
	joined := trace.SpanContextFromContext(parent).IsValid()
	_, span := t.tracer.Start(parent, SpanConnection, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, connectionKey{}, &connection{span: span, joined: joined}), span
}

// StartCall starts the span of one call on a connection: an execution
// (SpanExecute) or a handle invocation (SpanInvokeHandle). Its parent is the
// call's own trace context when it carries a valid one; else the
// connection's span when the connection joined a caller's trace; else it
// starts a trace of its own, linked to the connection's span.
func (t *Tracing) StartCall(ctx context.Context, name string, tc TraceContext, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if t == nil {
		return ctx, trace.SpanFromContext(context.Background())
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	conn, _ := ctx.Value(connectionKey{}).(*connection)
	parent := ctx
	if sc := tc.spanContext(); sc.IsValid() {
		parent = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else if conn != nil && conn.joined {
		parent = trace.ContextWithSpan(ctx, conn.span)
	} else {
		opts = append(opts, trace.WithNewRoot())
		if conn != nil {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: conn.span.SpanContext()}))
		}
	}
	return t.tracer.Start(parent, name, opts...)
}

// spanContext parses tc; invalid or absent reads as the zero value, as the
// W3C recommendation says a receiver treats a malformed traceparent.
func (tc TraceContext) spanContext() trace.SpanContext {
	if tc.Parent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{"traceparent": tc.Parent}
	if tc.State != "" {
		c["tracestate"] = tc.State
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), c))
}

// Outgoing is the trace context of ctx's span, for a call to another
// executor; zero when ctx carries none.
func Outgoing(ctx context.Context) TraceContext {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return TraceContext{}
	}
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	return TraceContext{Parent: c["traceparent"], State: c["tracestate"]}
}

// Child starts a span under parent's span while keeping ctx's deadline and
// values: a tool call reaches the gateway on its own context, but belongs
// to the execution that made it.
func (t *Tracing) child(ctx context.Context, parent trace.Span, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(trace.ContextWithSpan(ctx, parent), name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
}

// ToolCall is one tool call's span; the zero value (tracing off) does
// nothing.
type ToolCall struct {
	span    trace.Span
	start   time.Time
	digests bool
}

// StartToolCall starts the span of a tool call made by the execution whose
// span is parent.
func (t *Tracing) StartToolCall(ctx context.Context, parent trace.Span, provider, tool, argsJSON string) (context.Context, ToolCall) {
	if t == nil || !parent.IsRecording() {
		return ctx, ToolCall{}
	}
	attrs := []attribute.KeyValue{ToolProvider.String(provider), ToolName.String(tool)}
	if t.digests {
		attrs = append(attrs, ArgsBytes.Int(len(argsJSON)), ArgsDigest.String(digest(argsJSON)))
	}
	ctx, span := t.child(ctx, parent, SpanToolCall, trace.SpanKindClient, attrs...)
	return ctx, ToolCall{span: span, start: time.Now(), digests: t.digests}
}

// End records how the call ended: "result" or "error" when the caller
// answered with that envelope, else the kind of failure.
func (c ToolCall) End(answer string, err error) {
	if c.span == nil {
		return
	}
	kind := ErrorKind(err)
	if err == nil {
		kind = envelopeKind(answer)
		if c.digests {
			c.span.SetAttributes(ResultBytes.Int(len(answer)), ResultDigest.String(digest(answer)))
		}
	} else {
		c.span.SetStatus(codes.Error, kind)
	}
	c.span.SetAttributes(ToolResult.String(kind), DurationMs.Float64(ms(time.Since(c.start))))
	c.span.End()
}

// envelopeKind tells the two dispatch envelopes apart without decoding the
// whole answer: {"result":…} or {"error":…}.
func envelopeKind(answer string) string {
	s := strings.TrimLeft(answer, " \t\r\n")
	if strings.HasPrefix(s, "{") {
		s = strings.TrimLeft(s[1:], " \t\r\n")
		switch {
		case strings.HasPrefix(s, `"error"`):
			return "error"
		case strings.HasPrefix(s, `"result"`):
			return "result"
		}
	}
	return "other"
}

// Outbound is one outbound request's span; the zero value does nothing.
type Outbound struct {
	span  trace.Span
	start time.Time
}

// StartOutbound starts the span of a request a program sent with fetch to
// the caller's outbound function (the stub mode).
// Only the method, scheme and host are kept: never the path, which may
// name what the program looked up, the query, the headers or the body.
func (t *Tracing) StartOutbound(ctx context.Context, parent trace.Span, method, rawURL string) (context.Context, Outbound) {
	if t == nil || !parent.IsRecording() {
		return ctx, Outbound{}
	}
	attrs := []attribute.KeyValue{HTTPMethod.String(method), OutboundMode.String("stub")}
	if u, err := url.Parse(rawURL); err == nil {
		attrs = append(attrs, URLScheme.String(u.Scheme), ServerAddress.String(u.Hostname()))
	}
	ctx, span := t.child(ctx, parent, SpanOutbound, trace.SpanKindClient, attrs...)
	return ctx, Outbound{span: span, start: time.Now()}
}

// End records the response status, or the kind of failure.
func (o Outbound) End(status int, err error) {
	if o.span == nil {
		return
	}
	if err != nil {
		o.span.SetStatus(codes.Error, ErrorKind(err))
	} else {
		o.span.SetAttributes(HTTPStatus.Int(status))
	}
	o.span.SetAttributes(DurationMs.Float64(ms(time.Since(o.start))))
	o.span.End()
}

// CodeAttributes are the attributes of a program's text: its size and
// digest when digests are on, else nothing.
func (t *Tracing) CodeAttributes(code string) []attribute.KeyValue {
	if !t.Digests() {
		return nil
	}
	return []attribute.KeyValue{CodeBytes.Int(len(code)), CodeDigest.String(digest(code))}
}

// EndCall ends an execution's or invocation's span with its failure kind
// when err is set.
func EndCall(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, ErrorKind(err))
	}
	span.End()
}

// ErrorKind names a failure for a span without its text, which may carry
// anything the program or the caller wrote: the protocol's code when it
// has one, else the cancellation, else "error".
func ErrorKind(err error) string {
	switch {
	case err == nil:
		return ""
	case protocol.CodeOf(err) != "":
		return string(protocol.CodeOf(err))
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "error"
}

// Recording reports whether ctx's span records: callers check it before
// they build attributes, so that tracing off costs no allocation.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Execution annotates the span of ctx with what the gateway knows about an
// execution.
func Execution(ctx context.Context, attrs ...attribute.KeyValue) {
	trace.SpanFromContext(ctx).SetAttributes(attrs...)
}

// WorkerStarted records on ctx's execution span that it waited for a new
// worker process.
func WorkerStarted(ctx context.Context, pid int) {
	trace.SpanFromContext(ctx).AddEvent(EventWorkerStart, trace.WithAttributes(WorkerPID.Int(pid)))
}

// WorkerKilled records on ctx's execution span that its worker process was
// killed, and why.
func WorkerKilled(ctx context.Context, pid int, reason string) {
	trace.SpanFromContext(ctx).AddEvent(EventWorkerKill, trace.WithAttributes(WorkerPID.Int(pid), KillReason.String(reason)))
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ms is d in milliseconds, the unit of every duration the gateway reports.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Ms is ms for the callers' attributes.
func Ms(d time.Duration) float64 { return ms(d) }

// RecordUsage puts what an execution used on its span.
func RecordUsage(span trace.Span, u *protocol.Usage) {
	if u == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(UsageCPUMs.Float64(ms(u.CPU)), UsagePeakHeapBytes.Int64(u.PeakHeapBytes),
		UsageToolCalls.Int(u.ToolCalls), UsageRequests.Int(u.OutboundRequests), UsageLogBytes.Int(u.LogBytes))
}

// NativeRequests records the requests an executor performed itself as
// spans under ctx's execution span, each at its own times.
func NativeRequests(ctx context.Context, reqs []protocol.NativeRequest) {
	parent := trace.SpanFromContext(ctx)
	if len(reqs) == 0 || !parent.IsRecording() {
		return
	}
	tracer := parent.TracerProvider().Tracer(ScopeName)
	pctx := trace.ContextWithSpan(context.Background(), parent)
	for _, r := range reqs {
		_, span := tracer.Start(pctx, SpanOutbound, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(r.Start),
			trace.WithAttributes(HTTPMethod.String(r.Method), ServerAddress.String(r.Host), OutboundMode.String("native"), DurationMs.Float64(ms(r.Duration))))
		if r.Status == 0 {
			span.SetStatus(codes.Error, "failed")
		} else {
			span.SetAttributes(HTTPStatus.Int(r.Status))
		}
		span.End(trace.WithTimestamp(r.Start.Add(r.Duration)))
	}
}
