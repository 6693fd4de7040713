package config

import (
	"errors"
	"testing"
)

func TestTracingIsOffByDefault(t *testing.T) {
	c, err := Parse("c.yaml", []byte(good), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.Enabled {
		t.Fatal("tracing is on in a file that does not mention it")
	}
}

func TestTracingParses(t *testing.T) {
	src := good + `tracing:
  enabled: true
  endpoint: http://127.0.0.1:4318
  sampleRatio: 0.25
  headers:
    - {name: Authorization, valueEnv: OTLP_AUTH}
  recordDigests: true
`
	c, err := Parse("c.yaml", []byte(src), func(k string) string {
		if k == "OTLP_AUTH" {
			return "Bearer x"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := c.Tracing
	if !tr.Enabled || tr.Endpoint != "http://127.0.0.1:4318" || tr.SampleRatio == nil || *tr.SampleRatio != 0.25 ||
		len(tr.Headers) != 1 || tr.Headers[0] != (TracingHeader{Name: "Authorization", ValueEnv: "OTLP_AUTH", Value: "Bearer x"}) || !tr.RecordDigests {
		t.Fatalf("parsed %+v", tr)
	}
}

func TestTracingProblems(t *testing.T) {
	src := good + `tracing:
  enabled: true
  endpoint: ftp://collector/
  protocol: thrift
  sampleRatio: 1.5
  headers:
    - {name: "bad name", valueEnv: ""}
    - {name: X-Token, valueEnv: OTLP_TOKEN_UNSET}
`
	_, err := Parse("c.yaml", []byte(src), noEnv)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("got %v, want Problems", err)
	}
	want := map[string]string{
		"tracing.endpoint":            `endpoint "ftp://collector/" is not an http:// or https:// URL`,
		"tracing.protocol":            `"thrift" is not an OTLP protocol this gateway speaks; use http/protobuf or grpc`,
		"tracing.sampleRatio":         "1.5 is not a share of traces; use a number from 0 to 1",
		"tracing.headers[0].name":     `"bad name" is not an HTTP header name`,
		"tracing.headers[0].valueEnv": "is required: the environment variable that holds the header's value",
		"tracing.headers[1].valueEnv": "environment variable OTLP_TOKEN_UNSET is not set; it must hold the value of header X-Token",
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Path] = p.Msg
		if p.Line == 0 {
			t.Errorf("%s: no line", p.Path)
		}
	}
	for path, msg := range want {
		if got[path] != msg {
			t.Errorf("%s: got %q, want %q", path, got[path], msg)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d: %v", len(got), len(want), err)
	}
}
