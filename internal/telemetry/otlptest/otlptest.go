// Package otlptest is an OTLP/HTTP trace receiver for tests: it decodes
// what exporters send with the collector's own protobuf types and keeps
// every span, so that a test can check the traces a real process made.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with the service that sent it.
type Span struct {
	Service string
	*tracepb.Span
}

// TraceID is the span's trace id in hex.
func (s Span) TraceID() string { return hex.EncodeToString(s.Span.TraceId) }

// ID is the span's id in hex.
func (s Span) ID() string { return hex.EncodeToString(s.SpanId) }

// ParentID is the parent span's id in hex, empty for a root.
func (s Span) ParentID() string { return hex.EncodeToString(s.ParentSpanId) }

// Attr is the string form of one attribute, "" when absent.
func (s Span) Attr(key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return Value(kv.Value)
		}
	}
	return ""
}

// Value is an attribute value as text.
func Value(v *commonpb.AnyValue) string {
	if v == nil {
		return ""
	}
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	default:
		return fmt.Sprint(x)
	}
}

// Receiver is a running receiver on a loopback port, over HTTP (Start) or
// gRPC (StartGRPC).
type Receiver struct {
	srv  *httptest.Server
	grpc *grpc.Server
	addr string // the gRPC listener's

	mu    sync.Mutex
	spans []Span
	// Resources are every resource attribute received, for the tests that
	// check nothing secret went out.
	resources []*commonpb.KeyValue
}

// Start runs a receiver; Close stops it.
func Start() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// StartGRPC runs a receiver of the OTLP gRPC service; Close stops it.
func StartGRPC() (*Receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Receiver{grpc: grpc.NewServer(), addr: ln.Addr().String()}
	collectortrace.RegisterTraceServiceServer(r.grpc, traceService{r: r})
	go r.grpc.Serve(ln)
	return r, nil
}

type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// URL is the traces endpoint, for OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or a
// configuration's tracing.endpoint: over gRPC the listener's plain-text
// address.
func (r *Receiver) URL() string {
	if r.grpc != nil {
		return "http://" + r.addr
	}
	return r.srv.URL + "/v1/traces"
}

// Close stops the receiver.
func (r *Receiver) Close() {
	if r.grpc != nil {
		r.grpc.Stop()
		return
	}
	r.srv.Close()
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "only POST /v1/traces", http.StatusNotFound)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// add keeps the spans of one export.
func (r *Receiver) add(msg *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range msg.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = Value(kv.Value)
			}
			r.resources = append(r.resources, kv)
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				r.spans = append(r.spans, Span{Service: service, Span: sp})
			}
		}
	}
}

// Spans are the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Texts are every text the receiver got in an attribute, an event, a link,
// a status or a resource: what a test searches for secrets.
func (r *Receiver) Texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	kvs := func(list []*commonpb.KeyValue) {
		for _, kv := range list {
			out = append(out, kv.Key, Value(kv.Value))
		}
	}
	kvs(r.resources)
	for _, s := range r.spans {
		out = append(out, s.Name, s.GetStatus().GetMessage(), s.TraceState)
		kvs(s.Attributes)
		for _, e := range s.Events {
			out = append(out, e.Name)
			kvs(e.Attributes)
		}
		for _, l := range s.Links {
			out = append(out, l.TraceState)
			kvs(l.Attributes)
		}
	}
	return out
}
