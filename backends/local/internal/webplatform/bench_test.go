package webplatform

import (
	"context"
	"testing"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

// BenchmarkInstall is the cost the web platform adds to every run: the glue
// evaluated in a fresh runtime.
func BenchmarkInstall(b *testing.B) {
	l := newTestLoop()
	defer l.close()
	for b.Loop() {
		l.vm = goja.New()
		if _, err := Install(l.vm, l, disabled); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetch100Stub is a program that makes 100 sequential fetch calls
// through the stub outbound function and reads each body.
func BenchmarkFetch100Stub(b *testing.B) {
	cfg := Config{Mode: protocol.OutboundStub, Stub: func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		return protocol.OutboundResponse{Status: 200, Headers: []protocol.Header{{"content-type", "application/json"}}, Body: []byte(`{"ok":true}`)}, nil
	}}
	for b.Loop() {
		got, _ := runProgram(b, cfg, `let n = 0; for (let i = 0; i < 100; i++) { const r = await fetch('https://api.example/item/' + i, {headers: {accept: 'application/json'}}); if ((await r.json()).ok) n++ } return n`)
		if got.String() != "100" {
			b.Fatalf("got %s", got)
		}
	}
}
