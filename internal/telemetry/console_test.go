package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
)

// consoleSpan ends one execution span, with an attribute, an event and a
// failure, under the caller's traceparent, on tracing started by
// OTEL_TRACES_EXPORTER=console alone, and returns what the log holds.
func consoleSpan(t *testing.T, newHandler func(*bytes.Buffer) slog.Handler) string {
	t.Helper()
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	var buf bytes.Buffer
	tr, err := Start(Settings{Logger: slog.New(newHandler(&buf))})
	if err != nil || tr == nil {
		t.Fatalf("console tracing did not start: %v %v", tr, err)
	}
	ctx, span := tr.StartCall(context.Background(), SpanExecute, TraceContext{Parent: traceparent}, Tenant.String("demo"), BytesIn.Int(42))
	WorkerKilled(ctx, 7, "timeout")
	EndCall(span, errors.New("anything"))
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// With OTEL_TRACES_EXPORTER=console and a JSON log, each finished span is
// one JSON object on the log's stream, whatever its level.
func TestConsoleWritesEachSpanAsOneJSONLine(t *testing.T) {
	out := consoleSpan(t, func(b *bytes.Buffer) slog.Handler {
		return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelError})
	})
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got %q", out)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	// The times vary: each is checked for its kind, then left out.
	for _, k := range []string{"time", "start"} {
		if _, ok := got[k].(string); !ok {
			t.Fatalf("%s is not a time: %v", k, got[k])
		}
		delete(got, k)
	}
	if d, ok := got["duration_ms"].(float64); !ok || d < 0 {
		t.Fatalf("duration_ms: %v", got["duration_ms"])
	}
	delete(got, "duration_ms")
	events, _ := got["events"].([]any)
	if len(events) == 1 {
		ev, _ := events[0].(map[string]any)
		if _, ok := ev["time"].(string); ok {
			delete(ev, "time")
		}
	}
	span, _ := got["span"].(string)
	if len(span) != 16 {
		t.Fatalf("span id: %v", got["span"])
	}
	delete(got, "span")
	want := map[string]any{
		"level": "INFO", "msg": "span", "name": "codemode.execute", "trace": callerTrace, "parent": callerSpan,
		"kind": "server", "error": "error",
		"attributes": map[string]any{"codemode.tenant": "demo", "codemode.bytes_in": float64(42)},
		"events": []any{map[string]any{"name": "codemode.worker.kill",
			"attributes": map[string]any{"codemode.worker.pid": float64(7), "codemode.worker.kill_reason": "timeout"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// With a text log, a span is one key=value line: attributes under
// "attributes.", events as a JSON array.
func TestConsoleWritesEachSpanAsOneTextLine(t *testing.T) {
	out := consoleSpan(t, func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) })
	times := regexp.MustCompile(`(time|start)=[0-9TZ:.+-]+|duration_ms=[0-9.e+-]+|span=[0-9a-f]{16}|\\"time\\":\\"[0-9TZ:.+-]+\\"`)
	got := times.ReplaceAllStringFunc(out, func(m string) string {
		k, _, _ := strings.Cut(m, "=")
		if strings.HasPrefix(m, `\"time`) {
			return `\"time\":…`
		}
		return k + "=…"
	})
	want := `time=… level=INFO msg=span name=codemode.execute trace=` + callerTrace + ` span=… parent=` + callerSpan +
		` kind=server start=… duration_ms=… error=error attributes.codemode.tenant=demo attributes.codemode.bytes_in=42` +
		` events="[{\"name\":\"codemode.worker.kill\",\"time\":…,\"attributes\":{\"codemode.worker.kill_reason\":\"timeout\",\"codemode.worker.pid\":7}}]"` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// OTEL_TRACES_EXPORTER picks the exporters: none turns tracing off, otlp
// alone leaves it to Settings.Enabled, both export to each, and an
// unknown value is refused at start.
func TestTracesExporterVariable(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if tr, err := Start(Settings{Enabled: true}); tr != nil || err != nil {
		t.Fatalf("none: %v %v", tr, err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	if tr, err := Start(Settings{}); tr != nil || err != nil {
		t.Fatalf("otlp without Enabled: %v %v", tr, err)
	}
	for v, want := range map[string]string{
		"zipkin":        `tracing: OTEL_TRACES_EXPORTER names "zipkin", which is not an exporter this gateway has; use otlp, console, both (otlp,console) or none`,
		"otlp,,console": `tracing: OTEL_TRACES_EXPORTER names "", which is not an exporter this gateway has; use otlp, console, both (otlp,console) or none`,
		"console,none":  `tracing: OTEL_TRACES_EXPORTER="console,none": none turns tracing off and goes alone`,
	} {
		t.Setenv("OTEL_TRACES_EXPORTER", v)
		if tr, err := Start(Settings{Enabled: true}); tr != nil || err == nil || err.Error() != want {
			t.Errorf("%s: %v %v, want %s", v, tr, err, want)
		}
	}

	rcv := otlptest.Start()
	defer rcv.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", " OTLP , console ")
	var buf bytes.Buffer
	tr, err := Start(Settings{Enabled: true, Endpoint: rcv.URL(), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.StartCall(context.Background(), SpanExecute, TraceContext{})
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var logged struct{ Msg, Span string }
	json.Unmarshal(buf.Bytes(), &logged)
	if spans := rcv.Spans(); len(spans) != 1 || logged.Msg != "span" || spans[0].ID() != logged.Span {
		t.Fatalf("collector got %v, log got %q", spans, buf.String())
	}
}

// An export that fails is told on the gateway's log, in its format, not
// as the SDK's plain line on stderr.
func TestFailedExportIsLoggedInTheLogFormat(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusBadRequest) // not retried
	}))
	defer collector.Close()
	var buf bytes.Buffer
	tr, err := Start(Settings{Enabled: true, Endpoint: collector.URL, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.StartCall(context.Background(), SpanExecute, TraceContext{})
	span.End()
	tr.Shutdown(context.Background()) // exports what is buffered, and fails
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	var got map[string]any
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &got) != nil {
		t.Fatalf("want one JSON line, got %q", buf.String())
	}
	if got["level"] != "WARN" || got["msg"] != "tracing failed" || len(got) != 4 {
		t.Fatalf("got %v", got)
	}
	if e, _ := got["error"].(string); !strings.Contains(e, "400 Bad Request") {
		t.Fatalf("the error does not say what the collector answered: %q", e)
	}
}
