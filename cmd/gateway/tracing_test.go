package main

import (
	"regexp"
	"testing"
)

// An OTEL_TRACES_EXPORTER the gateway does not have stops serve at start,
// saying which values it takes.
func TestServeRefusesAnUnknownTracesExporter(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	code, out, errOut := runCmd("serve", "--config", "../../config.example.yaml", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	want := regexp.MustCompile(`^time=\S+ level=ERROR msg="gateway serve failed" error="tracing: OTEL_TRACES_EXPORTER names \\"zipkin\\", which is not an exporter this gateway has; use otlp, console, both \(otlp,console\) or none"\n$`)
	if code != 1 || out != "" || !want.MatchString(errOut) {
		t.Fatalf("%d %q %q", code, out, errOut)
	}
	code, out, errOut = runCmd("serve", "--executor-server", "--listen", "127.0.0.1:0")
	if want := "gateway serve: tracing: OTEL_TRACES_EXPORTER names \"zipkin\", which is not an exporter this gateway has; use otlp, console, both (otlp,console) or none\n"; code != 1 || errOut != want {
		t.Fatalf("executor server: %d %q %q", code, out, errOut)
	}
}
