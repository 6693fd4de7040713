package executorapi

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// FuzzDecoders feeds every decoder of wire values any JSON-shaped value: a
// caller controls all of them, so each must answer with a value or an
// error and never panic.
func FuzzDecoders(f *testing.F) {
	for _, seed := range []string{
		`{"timeout":null,"countHostWaits":true,"retainHandles":false,"modules":[["a","x"],["b",{"json":{"k":[1]}}],["c",{"data":"AQ=="}]]}`,
		`[{"name":"store","tools":["a"],"positionalArgs":true,"prelude":"","proxySource":"x"}]`,
		`{"method":"GET","url":"/","headers":[["a","b"]],"body":null}`,
		`{"status":200,"statusText":"OK","headers":[],"body":null}`,
		`{"resultJson":"1","error":"e","logs":[{"level":"log","text":"t"}],"executionId":"x","handles":["fetch"]}`,
		`{"modules":[["m",{"cjs":1}],["m",{}],[1,2]]}`,
		`[[["x"]]]`, `null`, `7`, `"s"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		_ = applyOptions(&protocol.ExecuteRequest{}, v)
		_, _ = providersFromWire(v)
		_, _ = requestFromWire(v)
		_, _ = responseFromWire(v)
		_, _ = resultFromWire(v)
		_, _ = moduleFromWire("m", v)
		_, _ = headersFromWire("x", v)
	})
}

func TestRequestAndResponseRoundTrip(t *testing.T) {
	req := protocol.OutboundRequest{Method: "PUT", URL: "https://x/y?z", Headers: []protocol.Header{{"a", "1"}, {"A", "2"}}, Body: []byte{}}
	got, err := requestFromWire(objectToMap(requestToWire(req)))
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("request came back as %+v, %v", got, err)
	}
	req.Body = nil // null body stays null, not empty
	got, err = requestFromWire(objectToMap(requestToWire(req)))
	if err != nil || got.Body != nil {
		t.Fatalf("a null body came back as %#v, %v", got.Body, err)
	}
	resp := protocol.OutboundResponse{Status: 404, StatusText: "Not Found", Headers: []protocol.Header{{"x", "y"}}, Body: []byte("no")}
	gotResp, err := responseFromWire(objectToMap(responseToWire(resp)))
	if err != nil || !reflect.DeepEqual(gotResp, resp) {
		t.Fatalf("response came back as %+v, %v", gotResp, err)
	}
	for _, bad := range []map[string]any{
		{"status": 200.5, "headers": []any{}}, {"status": -1.0}, {"status": "200"}, {"status": 1000.0},
		{"status": 200.0, "body": "text"}, {"status": 200.0, "headers": []any{[]any{"a"}}},
	} {
		if _, err := responseFromWire(bad); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

// objectToMap mimics what the receiving session decodes an Object into.
func objectToMap(o jsvalue.Object) map[string]any {
	m := map[string]any{}
	for _, f := range o {
		switch v := f.Value.(type) {
		case capnweb.Bytes:
			m[f.Key] = v.Data
		case int:
			m[f.Key] = float64(v)
		default:
			m[f.Key] = v
		}
	}
	return m
}
