// Package telemetry is the gateway's OpenTelemetry tracing: the tracer
// provider its configuration asks for (OTLP over HTTP or gRPC, or spans
// written to the gateway's log; off by default), the
// spans of connections, executions, tool calls, outbound requests and handle
// invocations, and the W3C trace context that crosses the executor protocol
// as an extension of the call options.
//
// What a span may carry is decided here, in one place: names, sizes,
// durations and kinds. Program text, tool arguments and results, query
// strings and credentials never become attributes; Settings.RecordDigests
// adds only their sizes and SHA-256 digests.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName names the instrumentation scope of every span.
const ScopeName = "github.com/supolka/codemode-gateway"

// Settings configure tracing. The zero value is off.
type Settings struct {
	// Enabled turns export on; off, every span is a no-op.
	Enabled bool
	// Protocol is the OTLP transport: ProtocolHTTP or ProtocolGRPC. Empty:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else
	// ProtocolHTTP.
	Protocol string
	// Endpoint is the collector's URL: over HTTP the traces URL (a URL
	// without a path gets /v1/traces), over gRPC its address (http:// for
	// plain text). Empty: the standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// or OTEL_EXPORTER_OTLP_ENDPOINT, else localhost on 4318 (HTTP) or
	// 4317 (gRPC).
	Endpoint string
	// Headers are sent with every export, on top of
	// OTEL_EXPORTER_OTLP_HEADERS.
	Headers map[string]string
	// SampleRatio, when set, samples that share of new traces (a parent's
	// decision is followed). Nil: the standard OTEL_TRACES_SAMPLER, else
	// every trace.
	SampleRatio *float64
	// ServiceName is the service.name resource attribute unless
	// OTEL_SERVICE_NAME sets one.
	ServiceName string
	// Version is the service.version resource attribute.
	Version string
	// RecordDigests adds the sizes and SHA-256 digests of program text,
	// tool arguments and tool results to their spans.
	RecordDigests bool
	// Logger is the process's log: the console exporter writes spans to
	// it, and the SDK's own errors (a failed export) are logged on it.
	// Nil: slog.Default().
	Logger *slog.Logger
}

// Tracing is a started tracer provider. A nil *Tracing is valid and off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	digests  bool
}

var off = noop.NewTracerProvider().Tracer(ScopeName)

// The exporters OTEL_TRACES_EXPORTER may name.
const (
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
	ExporterNone    = "none"
)

// Start makes the tracer provider s asks for. Off it returns nil and costs
// nothing further: off unless s.Enabled or OTEL_TRACES_EXPORTER names
// console, and off whatever s says with OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. OTEL_TRACES_EXPORTER picks the exporters
// (otlp, console, or both: "otlp,console"); an unknown one is an error.
func Start(s Settings) (*Tracing, error) {
	exporters, err := tracesExporters(os.Getenv("OTEL_TRACES_EXPORTER"))
	if err != nil {
		return nil, err
	}
	if len(exporters) == 0 || strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	if !s.Enabled && !slices.Contains(exporters, ExporterConsole) {
		return nil, nil
	}
	logger := cmp.Or(s.Logger, slog.Default())
	var popts []sdktrace.TracerProviderOption
	for _, name := range exporters {
		if name == ExporterConsole {
			popts = append(popts, sdktrace.WithSpanProcessor(console{logger.Handler()}))
			continue
		}
		if s.Protocol == "" {
			// The standard variables, as the SDKs read them.
			s.Protocol = cmp.Or(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
		}
		exp, err := newExporter(s)
		if err != nil {
			return nil, err
		}
		popts = append(popts, sdktrace.WithBatcher(exp))
	}
	// The SDK reports what goes wrong (an export that failed) through
	// these two: by default plain lines on stderr, whatever log.format.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing failed", "error", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(logger.Handler()))
	name := s.ServiceName
	if name == "" {
		name = "codemode-gateway"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if s.Version != "" {
		attrs = append(attrs, attribute.String("service.version", s.Version))
	}
	// The environment's OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// win over ours: they are the operator's last word.
	res, err := resource.Merge(resource.NewSchemaless(attrs...), resource.Environment())
	if err != nil {
		return nil, fmt.Errorf("tracing: the resource from OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	popts = append(popts, sdktrace.WithResource(res))
	if s.SampleRatio != nil {
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*s.SampleRatio))))
	}
	tp := sdktrace.NewTracerProvider(popts...)
	return &Tracing{provider: tp, tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(s.Version)), digests: s.RecordDigests}, nil
}

// tracesExporters reads OTEL_TRACES_EXPORTER: a comma-separated list of
// exporters, otlp when empty, none (nothing) alone.
func tracesExporters(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return []string{ExporterOTLP}, nil
	}
	var out []string
	for _, name := range strings.Split(v, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case ExporterOTLP, ExporterConsole:
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		case ExporterNone:
			if v = strings.TrimSpace(v); !strings.EqualFold(v, ExporterNone) {
				return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: none turns tracing off and goes alone", v)
			}
			return nil, nil
		default:
			return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER names %q, which is not an exporter this gateway has; use otlp, console, both (otlp,console) or none", name)
		}
	}
	return out, nil
}

// The OTLP transports.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// newExporter makes the OTLP exporter of s's protocol.
func newExporter(s Settings) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch s.Protocol {
	case "", ProtocolHTTP:
		opts := []otlptracehttp.Option{}
		if s.Endpoint != "" {
			u, err := EndpointURL(s.Endpoint)
			if err != nil {
				return nil, err
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(s.Headers))
		}
		exp, err = otlptracehttp.New(context.Background(), opts...)
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{}
		if s.Endpoint != "" {
			if _, err := EndpointURL(s.Endpoint); err != nil {
				return nil, err
			}
			opts = append(opts, otlptracegrpc.WithEndpointURL(s.Endpoint))
		}
		if len(s.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(s.Headers))
		}
		exp, err = otlptracegrpc.New(context.Background(), opts...)
	default:
		return nil, fmt.Errorf("tracing: %q is not an OTLP protocol this gateway speaks; use %s or %s", s.Protocol, ProtocolHTTP, ProtocolGRPC)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return exp, nil
}

// EndpointURL checks a collector's endpoint and gives a URL without a path
// the standard OTLP/HTTP traces path (a gRPC exporter ignores the path).
func EndpointURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("tracing: endpoint %q is not an http:// or https:// URL", endpoint)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("tracing: the endpoint must carry no credentials, query or fragment; send credentials as headers")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Tracer is the tracer of t; a no-op one when t is nil.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return off
	}
	return t.tracer
}

// Digests reports whether sizes and digests of payloads are recorded.
func (t *Tracing) Digests() bool { return t != nil && t.digests }

// Shutdown exports what is buffered and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Enabled reports whether spans are recorded at all.
func (t *Tracing) Enabled() bool { return t != nil }
