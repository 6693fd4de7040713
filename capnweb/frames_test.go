package capnweb

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// The traces below are the real frames quoted in capnweb.md (sections 5
// and 1.2); the Go peer must put exactly the same bytes on the wire.

// Section 5.3: the Go peer as the server of a JS client, calling both
// callbacks it was passed and returning.
func TestFramesServerCallsCallbacks(t *testing.T) {
	var gotArgs []any
	r := newRaw(t, Methods{
		"protocolVersion": func(ctx context.Context, args []any) (any, error) { return 1, nil },
		"execute": func(ctx context.Context, args []any) (any, error) {
			gotArgs = args
			dispatch := args[3].(*Stub)
			outbound := args[5].(*Stub)
			d, err := dispatch.Call(ctx, "", "store", "listOrders", `["ada",3]`)
			if err != nil {
				return nil, err
			}
			resp, err := outbound.Call(ctx, "", jsvalue.Object{
				{Key: "method", Value: "GET"},
				{Key: "url", Value: "https://example.com/"},
				{Key: "headers", Value: [][]string{{"accept", "*/*"}}},
				{Key: "body", Value: nil},
			})
			if err != nil {
				return nil, err
			}
			m := resp.(map[string]any)
			body, _ := m["body"].(Bytes)
			if body.Type != TypeArrayBuffer || string(body.Data) != "hi" {
				return nil, errors.New("bad body")
			}
			return jsvalue.Object{{Key: "resultJson", Value: d.(string)}, {Key: "logs", Value: []any{}}}, nil
		},
	})
	r.send(`["push",["pipeline",0,["protocolVersion"],[]]]`)
	r.send(`["pull",1]`)
	r.expect(`["resolve",1,1]`)
	r.send(`["release",1,1]`)
	r.send(`["push",["pipeline",0,["execute"],["async () => 1",[[{"name":"store","tools":[["listOrders"]]}]],{"timeout":1000},["export",-1],"stub",["export",-2]]]]`)
	r.send(`["pull",2]`)
	r.expect(`["push",["pipeline",-1,[],["store","listOrders","[\"ada\",3]"]]]`)
	r.expect(`["pull",1]`)
	r.send(`["resolve",1,"{\"result\":1}"]`)
	r.expect(`["release",1,1]`)
	r.expect(`["push",["pipeline",-2,[],[{"method":"GET","url":"https://example.com/","headers":[[[["accept","*/*"]]]],"body":null}]]]`)
	r.expect(`["pull",2]`)
	r.send(`["resolve",2,{"status":200,"statusText":"OK","headers":[[[["content-type","text/plain"]]]],"body":["bytes","aGk","ArrayBuffer"]}]`)
	r.expect(`["release",2,1]`)
	r.expect(`["release",-1,1]`)
	r.expect(`["release",-2,1]`)
	r.expect(`["resolve",2,{"resultJson":"{\"result\":1}","logs":[[]]}]`)
	r.send(`["release",2,1]`)
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
	if len(gotArgs) != 6 || gotArgs[0] != "async () => 1" || gotArgs[4] != "stub" {
		t.Fatalf("args = %#v", gotArgs)
	}
	if mustJSON(gotArgs[1]) != `[{"name":"store","tools":["listOrders"]}]` || mustJSON(gotArgs[2]) != `{"timeout":1000}` {
		t.Fatalf("args = %s %s", mustJSON(gotArgs[1]), mustJSON(gotArgs[2]))
	}
}

// Section 5.3, reverse direction: the Go peer as a client passing a
// callback that the server calls once.
func TestFramesClientCallback(t *testing.T) {
	r := newRaw(t, nil)
	res := make(chan any, 1)
	go func() {
		v, err := r.sess.Main().Call(context.Background(), "callOnce", Func(func(ctx context.Context, args []any) (any, error) {
			return args[0].(string) + "!", nil
		}))
		if err != nil {
			res <- err
			return
		}
		res <- v
	}()
	r.expect(`["push",["pipeline",0,["callOnce"],[["export",-1]]]]`)
	r.expect(`["pull",1]`)
	r.send(`["push",["pipeline",-1,[],["hello"]]]`)
	r.send(`["pull",1]`)
	r.expect(`["resolve",1,"hello!"]`)
	r.send(`["release",1,1]`)
	r.send(`["release",-1,1]`)
	r.send(`["resolve",1,"callback said: hello!"]`)
	r.expect(`["release",1,1]`)
	if v := <-res; v != "callback said: hello!" {
		t.Fatalf("result = %v", v)
	}
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
}

// Section 5.4: a thrown error with own properties, a nested error and
// special values among them.
func TestFramesRejectWithProps(t *testing.T) {
	r := newRaw(t, Methods{
		"throwTyped": func(ctx context.Context, args []any) (any, error) {
			return nil, &Error{Name: "TypeError", Message: "bad type", Props: jsvalue.Object{
				{Key: "code", Value: "E_BAD"},
				{Key: "details", Value: jsvalue.Object{
					{Key: "n", Value: big.NewInt(1)},
					{Key: "when", Value: time.UnixMilli(0)},
					{Key: "list", Value: []any{1, 2}},
				}},
				{Key: "cause", Value: &Error{Name: "RangeError", Message: "inner"}},
			}}
		},
		"throwPlain":  func(ctx context.Context, args []any) (any, error) { return nil, errors.New("boom") },
		"throwString": func(ctx context.Context, args []any) (any, error) { return nil, &Thrown{Value: "just a string"} },
	})
	r.send(`["push",["pipeline",0,["throwTyped"],[]]]`)
	r.send(`["pull",1]`)
	r.expect(`["reject",1,["error","TypeError","bad type",null,{"code":"E_BAD","details":{"n":["bigint","1"],"when":["date",0],"list":[[1,2]]},"cause":["error","RangeError","inner"]}]]`)
	r.send(`["push",["pipeline",0,["throwPlain"],[]]]`)
	r.send(`["pull",2]`)
	r.expect(`["reject",2,["error","Error","boom"]]`)
	r.send(`["push",["pipeline",0,["throwString"],[]]]`)
	r.send(`["pull",3]`)
	r.expect(`["reject",3,"just a string"]`)
	r.send(`["push",["pipeline",0,["nonexistent"],[]]]`)
	r.send(`["pull",4]`)
	r.expect(`["reject",4,["error","TypeError","'nonexistent' is not a function."]]`)
}

// Section 5.4, received: the JS server's reject decodes to an *Error with
// its properties.
func TestFramesReceiveRejectWithProps(t *testing.T) {
	r := newRaw(t, nil)
	errc := make(chan error, 1)
	go func() {
		_, err := r.sess.Main().Call(context.Background(), "throwTyped")
		errc <- err
	}()
	r.expect(`["push",["pipeline",0,["throwTyped"],[]]]`)
	r.expect(`["pull",1]`)
	r.send(`["reject",1,["error","TypeError","bad type",null,{"code":"E_BAD","details":{"n":["bigint","1"],"when":["date",0],"list":[[1,2]]},"cause":["error","RangeError","inner"]}]]`)
	r.expect(`["release",1,1]`)
	err := <-errc
	var je *Error
	if !errors.As(err, &je) {
		t.Fatalf("err = %#v", err)
	}
	if je.Name != "TypeError" || je.Message != "bad type" || je.Code() != "E_BAD" {
		t.Fatalf("err = %+v", je)
	}
	d, _ := je.Props.Get("details")
	dm := d.(map[string]any)
	if dm["n"].(*big.Int).Int64() != 1 || !dm["when"].(time.Time).Equal(time.UnixMilli(0)) || mustJSON(dm["list"]) != "[1,2]" {
		t.Fatalf("details = %#v", dm)
	}
	c, _ := je.Props.Get("cause")
	if ce, ok := c.(*Error); !ok || ce.Name != "RangeError" || ce.Message != "inner" {
		t.Fatalf("cause = %#v", c)
	}
}

// Section 1.2's batch: pipelined calls, the pushes the JS client writes.
func TestFramesPipelinedPushes(t *testing.T) {
	r := newRaw(t, nil)
	main := r.sess.Main()
	v := main.Invoke("protocolVersion")
	c := main.Invoke("makeCounter")
	n := c.Invoke("inc", 5)
	b := main.Invoke("boom")
	r.expect(`["push",["pipeline",0,["protocolVersion"],[]]]`)
	r.expect(`["push",["pipeline",0,["makeCounter"],[]]]`)
	r.expect(`["push",["pipeline",2,["inc"],[5]]]`)
	r.expect(`["push",["pipeline",0,["boom"],[]]]`)
	done := make(chan []any, 1)
	go func() {
		ctx := context.Background()
		rv, _ := v.Await(ctx)
		rn, _ := n.Await(ctx)
		_, eb := b.Await(ctx)
		done <- []any{rv, rn, eb}
	}()
	r.expect(`["pull",1]`)
	r.send(`["resolve",1,1]`)
	r.expect(`["release",1,1]`)
	r.expect(`["pull",3]`)
	r.send(`["resolve",3,5]`)
	r.expect(`["release",3,1]`)
	r.expect(`["pull",4]`)
	r.send(`["reject",4,["error","RangeError","nope"]]`)
	r.expect(`["release",4,1]`)
	got := <-done
	if got[0] != 1.0 || got[1] != 5.0 {
		t.Fatalf("results = %v", got)
	}
	if e, ok := got[2].(*Error); !ok || e.Name != "RangeError" || e.Message != "nope" {
		t.Fatalf("boom = %#v", got[2])
	}
	c.Release()
	r.expect(`["release",2,1]`)
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
}

// A pipelined argument (section 4.2) is resolved before the call, never
// dropped: add(add(1,2),10) is 13.
func TestFramesPipelinedArgumentResolved(t *testing.T) {
	r := newRaw(t, Methods{
		"add": func(ctx context.Context, args []any) (any, error) {
			return args[0].(float64) + args[1].(float64), nil
		},
	})
	r.send(`["push",["pipeline",0,["add"],[1,2]]]`)
	r.send(`["push",["pipeline",0,["add"],[["pipeline",1],10]]]`)
	r.send(`["pull",2]`)
	r.expect(`["resolve",2,13]`)
	r.send(`["release",1,1]`)
	r.send(`["release",2,1]`)
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
}

// Section 4.2's remap (promise.map) received from a JS client.
func TestFramesRemap(t *testing.T) {
	r := newRaw(t, Methods{
		"list": func(ctx context.Context, args []any) (any, error) {
			return []any{map[string]any{"id": 1, "name": "x"}, map[string]any{"id": 2, "name": "y"}}, nil
		},
		"lookup": func(ctx context.Context, args []any) (any, error) {
			return "name#" + mustJSON(args[0]), nil
		},
	})
	r.send(`["push",["pipeline",0,["list"],[]]]`)
	r.send(`["push",["remap",1,[],[["import",0]],[["pipeline",-1,["lookup"],[["pipeline",0,["id"]]]],["pipeline",1]]]]`)
	r.send(`["pull",2]`)
	r.expect(`["resolve",2,[["name#1","name#2"]]]`)
}

// Pipelining into an array element with the string index a JS client
// sends ("0"), which this peer accepts.
func TestFramesPipelineArrayIndex(t *testing.T) {
	r := newRaw(t, Methods{
		"list": func(ctx context.Context, args []any) (any, error) {
			return []any{map[string]any{"id": 7}}, nil
		},
		"lookup": func(ctx context.Context, args []any) (any, error) {
			return "name#" + mustJSON(args[0]), nil
		},
	})
	r.send(`["push",["pipeline",0,["list"],[]]]`)
	r.send(`["push",["pipeline",0,["lookup"],[["pipeline",1,["0","id"]]]]]`)
	r.send(`["pull",2]`)
	r.expect(`["resolve",2,"name#7"]`)
}

// A promise argument (JS new RpcPromise(p)) delays delivery until its
// resolve arrives, and is released then.
func TestFramesPromiseArgument(t *testing.T) {
	r := newRaw(t, echoMain())
	r.send(`["push",["pipeline",0,["echo"],[["promise",-1]]]]`)
	r.send(`["pull",1]`)
	r.send(`["resolve",-1,{"late":true}]`)
	r.expect(`["release",-1,1]`)
	r.expect(`["resolve",1,{"late":true}]`)
	r.send(`["release",1,1]`)
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
}

// Returning a Func exports it with a fresh id per occurrence; the peer
// calls it and releases each.
func TestFramesExportPerOccurrence(t *testing.T) {
	f := Func(func(ctx context.Context, args []any) (any, error) { return "called", nil })
	r := newRaw(t, Methods{"two": func(ctx context.Context, args []any) (any, error) {
		return map[string]any{"a": f, "b": f}, nil
	}})
	r.send(`["push",["pipeline",0,["two"],[]]]`)
	r.send(`["pull",1]`)
	r.expect(`["resolve",1,{"a":["export",-1],"b":["export",-2]}]`)
	r.send(`["release",1,1]`)
	r.send(`["push",["pipeline",-2,[],[]]]`)
	r.send(`["pull",2]`)
	r.expect(`["resolve",2,"called"]`)
	r.send(`["release",2,1]`)
	r.send(`["release",-1,1]`)
	r.send(`["release",-2,1]`)
	waitStats(t, r.sess, Stats{Imports: 1, Exports: 1})
	// Using a released id is a protocol error.
	r.send(`["push",["pipeline",-1,[],[]]]`)
	if got := r.next(); !contains(got, "no such entry on exports table: -1") {
		t.Fatalf("got %s", got)
	}
}

// A call waiting for a promise argument does not hold up later calls on
// the same target (as in JavaScript); it runs once the promise settles.
func TestFramesPendingArgumentDoesNotBlock(t *testing.T) {
	r := newRaw(t, echoMain())
	r.send(`["push",["pipeline",0,["echo"],[["promise",-1]]]]`)
	r.send(`["pull",1]`)
	r.send(`["push",["pipeline",0,["echo"],["now"]]]`)
	r.send(`["pull",2]`)
	r.expect(`["resolve",2,"now"]`)
	r.send(`["resolve",-1,"later"]`)
	r.expect(`["release",-1,1]`)
	r.expect(`["resolve",1,"later"]`)
}
