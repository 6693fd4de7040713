package protocol

import (
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/jsvalue"
)

var benchValue = jsvalue.Object{
	{Key: "result", Value: []any{
		jsvalue.Object{{Key: "id", Value: "o1"}, {Key: "total", Value: 42.5}, {Key: "note", Value: strings.Repeat("line\n\"quoted\" ", 20)}},
		[]byte(strings.Repeat("x", 1024)),
		map[string]any{"b": 1, "a": []any{true, nil, 1e21}},
	}},
}

func BenchmarkStringifyForDispatch(b *testing.B) {
	for b.Loop() {
		if _, err := StringifyForDispatch(benchValue); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseForDispatch(b *testing.B) {
	text, err := StringifyForDispatch(benchValue)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := ParseForDispatch(text); err != nil {
			b.Fatal(err)
		}
	}
}
