package protocol

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// TestEnvelopeDispatchContractExamples runs the three createEnvelopeDispatch
// examples of the contract's dispatch chapter.
func TestEnvelopeDispatchContractExamples(t *testing.T) {
	ctx := context.Background()
	var gotArgs []any
	var gotProvider, gotTool string
	answering := NewEnvelopeDispatch(NewEnvelopeState(), func(_ context.Context, provider, tool string, args []any) (any, error) {
		gotProvider, gotTool, gotArgs = provider, tool, args
		return jsvalue.Object{{Key: "id", Value: "o1"}, {Key: "total", Value: 42}}, nil
	})
	out, err := answering(ctx, "store", "listOrders", `["ada",3]`)
	if err != nil || out != `{"result":{"id":"o1","total":42}}` {
		t.Errorf("answering: %s, %v", out, err)
	}
	if gotProvider != "store" || gotTool != "listOrders" || !reflect.DeepEqual(gotArgs, []any{"ada", 3.0}) {
		t.Errorf("the tool saw %s %s %#v", gotProvider, gotTool, gotArgs)
	}

	throwing := NewEnvelopeDispatch(NewEnvelopeState(), func(context.Context, string, string, []any) (any, error) {
		return nil, errors.New("No such customer.")
	})
	out, err = throwing(ctx, "store", "listOrders", "")
	if err != nil || out != `{"error":"No such customer."}` {
		t.Errorf("throwing: %s, %v", out, err)
	}

	settledState := NewEnvelopeState()
	settledState.Complete()
	called := false
	settled := NewEnvelopeDispatch(settledState, func(context.Context, string, string, []any) (any, error) {
		called = true
		return jsvalue.Undefined, nil
	})
	out, err = settled(ctx, "store", "listOrders", "")
	if err != nil || out != `{"error":"Execution has already completed."}` || called {
		t.Errorf("settled: %s, %v, called %v", out, err, called)
	}
}

func TestEnvelopeDispatchEdges(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		args string
		fn   ToolFunc
		want string
	}{
		{"undefined result", "", func(context.Context, string, string, []any) (any, error) { return jsvalue.Undefined, nil }, `{}`},
		{"null result", "", func(context.Context, string, string, []any) (any, error) { return nil, nil }, `{"result":null}`},
		{"bytes result", "", func(context.Context, string, string, []any) (any, error) { return []byte{1, 2, 3, 255}, nil },
			`{"result":{"__executor_binary_v1__":"Uint8Array","data":"AQID/w=="}}`},
		{"tool not found", "", func(_ context.Context, _, tool string, _ []any) (any, error) { return nil, NewToolNotFoundError(tool) },
			`{"error":"Tool \"t\" not found"}`},
		{"error text escaped", "", func(context.Context, string, string, []any) (any, error) { return nil, errors.New("a\"b\n<c>") },
			`{"error":"a\"b\n<c>"}`},
		{"bad arguments", "[1,", func(context.Context, string, string, []any) (any, error) { t.Error("called"); return nil, nil },
			`{"error":"The arguments of tool t are not valid dispatch JSON: protocol: invalid JSON at byte 3: unexpected end of input"}`},
		{"unwritable result", "", func(context.Context, string, string, []any) (any, error) { return complex(1, 1), nil },
			`{"error":"The answer of tool t cannot be written as JSON: protocol: a complex128 has no JSON form"}`},
	} {
		out, err := NewEnvelopeDispatch(NewEnvelopeState(), c.fn)(ctx, "p", "t", c.args)
		if err != nil || out != c.want {
			t.Errorf("%s: %s, %v; want %s", c.name, out, err, c.want)
		}
	}
}

func TestEnvelopeStateConcurrent(t *testing.T) {
	s := NewEnvelopeState()
	if !s.Active() {
		t.Fatal("a new state is not active")
	}
	d := NewEnvelopeDispatch(s, func(context.Context, string, string, []any) (any, error) { return 1, nil })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				out, _ := d(context.Background(), "p", "t", "")
				if out != `{"result":1}` && out != `{"error":"Execution has already completed."}` {
					t.Errorf("got %s", out)
				}
			}
		})
	}
	s.Complete()
	s.Complete()
	wg.Wait()
	if s.Active() {
		t.Error("still active after Complete")
	}
	if out, _ := d(context.Background(), "p", "t", ""); out != `{"error":"Execution has already completed."}` {
		t.Errorf("after Complete: %s", out)
	}
}

func TestErrorEnvelope(t *testing.T) {
	if s := ErrorEnvelope("x\u2028"); s != "{\"error\":\"x\u2028\"}" {
		t.Errorf("ErrorEnvelope: %s", s)
	}
}
