package telemetry

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// console writes each finished span as one record of the gateway's own
// log (OTEL_TRACES_EXPORTER=console): a trace to read without a collector.
// It is a span processor rather than an exporter behind a batcher, so a
// span is written when it ends, in the log's order.
type console struct{ h slog.Handler }

// SpanMessage is the message of the log record of a span.
const SpanMessage = "span"

func (console) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (console) Shutdown(context.Context) error                  { return nil }
func (console) ForceFlush(context.Context) error                { return nil }

// OnEnd writes s whatever the log's level: the operator asked for spans.
func (c console) OnEnd(s sdktrace.ReadOnlySpan) {
	sc := s.SpanContext()
	if !sc.IsSampled() {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, SpanMessage, 0)
	r.AddAttrs(slog.String("name", s.Name()), slog.String("trace", sc.TraceID().String()), slog.String("span", sc.SpanID().String()))
	if p := s.Parent(); p.IsValid() {
		r.AddAttrs(slog.String("parent", p.SpanID().String()))
	}
	r.AddAttrs(slog.String("kind", s.SpanKind().String()), slog.Time("start", s.StartTime()),
		slog.Float64("duration_ms", ms(s.EndTime().Sub(s.StartTime()))))
	if st := s.Status(); st.Code == codes.Error {
		r.AddAttrs(slog.String("error", st.Description))
	}
	if attrs := s.Attributes(); len(attrs) > 0 {
		r.AddAttrs(slog.Attr{Key: "attributes", Value: slog.GroupValue(slogAttrs(attrs)...)})
	}
	if evs := s.Events(); len(evs) > 0 {
		list := make(jsonList, len(evs))
		for i, e := range evs {
			list[i] = spanEvent{Name: e.Name, Time: e.Time, Attributes: attrMap(e.Attributes)}
		}
		r.AddAttrs(slog.Any("events", list))
	}
	if links := s.Links(); len(links) > 0 {
		list := make(jsonList, len(links))
		for i, l := range links {
			list[i] = spanLink{Trace: l.SpanContext.TraceID().String(), Span: l.SpanContext.SpanID().String()}
		}
		r.AddAttrs(slog.Any("links", list))
	}
	_ = c.h.Handle(context.Background(), r)
}

type spanEvent struct {
	Name       string         `json:"name"`
	Time       time.Time      `json:"time"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

type spanLink struct {
	Trace string `json:"trace"`
	Span  string `json:"span"`
}

// jsonList is a list a JSON log writes as a JSON array and a text log as
// that array's text, one value of the line.
type jsonList []any

func (l jsonList) MarshalJSON() ([]byte, error) { return json.Marshal([]any(l)) }
func (l jsonList) MarshalText() ([]byte, error) { return json.Marshal([]any(l)) }

func slogAttrs(kvs []attribute.KeyValue) []slog.Attr {
	out := make([]slog.Attr, len(kvs))
	for i, kv := range kvs {
		out[i] = slog.Any(string(kv.Key), kv.Value.AsInterface())
	}
	return out
}

func attrMap(kvs []attribute.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}
