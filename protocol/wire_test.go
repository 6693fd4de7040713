package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/jsvalue"
)

func TestTimeoutJSON(t *testing.T) {
	for _, c := range []struct {
		text string
		want Timeout
	}{
		{`{}`, Timeout{}},
		{`{"timeout":null}`, TimeoutLifted()},
		{`{"timeout":5000}`, TimeoutOf(5000)},
		{`{"timeout":0.5}`, TimeoutOf(0.5)},
		{`{"timeout":-1}`, TimeoutOf(-1)},
		{`{"timeout":1e400}`, TimeoutOf(math.Inf(1))},
	} {
		var o ExecuteCallOptions
		if err := json.Unmarshal([]byte(c.text), &o); err != nil {
			t.Errorf("%s: %v", c.text, err)
			continue
		}
		if o.Timeout != c.want {
			t.Errorf("%s: read %v, want %v", c.text, o.Timeout, c.want)
		}
	}
	for _, bad := range []string{`{"timeout":"5000"}`, `{"timeout":true}`, `{"timeout":[1]}`, `{"timeout":{}}`} {
		var o ExecuteCallOptions
		if err := json.Unmarshal([]byte(bad), &o); err == nil {
			t.Errorf("%s was read", bad)
		}
	}
	for _, c := range []struct {
		o    ExecuteCallOptions
		want string
	}{
		{ExecuteCallOptions{}, `{}`},
		{ExecuteCallOptions{Timeout: TimeoutLifted()}, `{"timeout":null}`},
		{ExecuteCallOptions{Timeout: TimeoutOf(1500)}, `{"timeout":1500}`},
		{ExecuteCallOptions{Timeout: TimeoutOf(1e21)}, `{"timeout":1e+21}`},
		{ExecuteCallOptions{Timeout: TimeoutOf(math.Inf(1))}, `{"timeout":null}`},
		{ExecuteCallOptions{Timeout: TimeoutOf(-0.5)}, `{"timeout":-0.5}`},
	} {
		b, err := json.Marshal(c.o)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("wrote %s, want %s", b, c.want)
		}
	}
}

func TestTimeoutWithoutJSONForm(t *testing.T) {
	for _, ms := range []float64{math.NaN(), math.Inf(-1)} {
		if b, err := json.Marshal(ExecuteCallOptions{Timeout: TimeoutOf(ms)}); err == nil {
			t.Errorf("%v written as %s", ms, b)
		}
	}
}

func TestExecuteCallOptionsJSON(t *testing.T) {
	yes := true
	o := ExecuteCallOptions{
		Timeout:        TimeoutOf(5000),
		CountHostWaits: &yes,
		RetainHandles:  true,
		Modules:        []ModulePair{{"greeter", Module{Source: "export const g = 1"}}, {"blob", Module{Kind: KindData, Data: []byte{1}}}},
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"timeout":5000,"countHostWaits":true,"retainHandles":true,"modules":[["greeter","export const g = 1"],["blob",{"data":"AQ=="}]]}`
	if string(b) != want {
		t.Errorf("wrote %s\nwant  %s", b, want)
	}
	var back ExecuteCallOptions
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Timeout != o.Timeout || *back.CountHostWaits != true || !back.RetainHandles || len(back.Modules) != 2 {
		t.Errorf("read back %#v", back)
	}
	// Unknown members are ignored; null members read as absent.
	var o2 ExecuteCallOptions
	if err := json.Unmarshal([]byte(`{"future":1,"countHostWaits":null,"modules":null,"retainHandles":false}`), &o2); err != nil {
		t.Fatal(err)
	}
	if o2.CountHostWaits != nil || o2.Modules != nil || !o2.Timeout.IsZero() {
		t.Errorf("got %#v", o2)
	}
}

func TestCallOptionsRoundTrip(t *testing.T) {
	no := false
	req := &ExecuteRequest{
		Code:           "async () => 1",
		Timeout:        TimeoutLifted(),
		CountHostWaits: &no,
		RetainHandles:  true,
		Modules:        ModuleMap{"b": {Source: "x"}, "a": {Kind: KindText, Source: "y"}},
	}
	opts := req.CallOptions()
	if opts.Modules[0].Name != "a" || opts.Modules[1].Name != "b" {
		t.Errorf("modules not sorted: %#v", opts.Modules)
	}
	var got ExecuteRequest
	if err := ApplyCallOptions(&got, opts); err != nil {
		t.Fatal(err)
	}
	if got.Timeout != req.Timeout || got.CountHostWaits != req.CountHostWaits || got.RetainHandles != req.RetainHandles ||
		!reflect.DeepEqual(got.Modules, req.Modules) {
		t.Errorf("got %#v", got)
	}
	// Absent options stay absent.
	var empty ExecuteRequest
	if err := ApplyCallOptions(&empty, (&ExecuteRequest{}).CallOptions()); err != nil {
		t.Fatal(err)
	}
	if !empty.Timeout.IsZero() || empty.CountHostWaits != nil || empty.Modules != nil {
		t.Errorf("got %#v", empty)
	}
	// A repeated module name leaves the request unchanged.
	keep := ExecuteRequest{RetainHandles: true}
	err := ApplyCallOptions(&keep, ExecuteCallOptions{Modules: []ModulePair{{Name: "a"}, {Name: "a"}}})
	var e *ModuleKeyCollisionError
	if !errors.As(err, &e) || !keep.RetainHandles {
		t.Errorf("got %v, %#v", err, keep)
	}
}

func TestResolveTimeout(t *testing.T) {
	const max = MaxSupportedTimeout
	for _, c := range []struct {
		name           string
		t              Timeout
		def, serverMax int64
		want           int64
	}{
		{"absent, nothing configured", Timeout{}, 0, 0, DefaultTimeout},
		{"absent, configured default", Timeout{}, 5000, 0, 5000},
		{"absent, default above the server's cap", Timeout{}, 90000, 60000, 60000},
		{"absent, negative default", Timeout{}, -5, 0, DefaultTimeout},
		{"null, no server cap", TimeoutLifted(), 5000, 0, max},
		{"null, server cap", TimeoutLifted(), 5000, 600000, 600000},
		{"null, server cap above the supported maximum", TimeoutLifted(), 0, math.MaxInt64, max},
		{"number", TimeoutOf(1500), 5000, 0, 1500},
		{"number wins over the default", TimeoutOf(90000), 5000, 0, 90000},
		{"number above the server's cap", TimeoutOf(90000), 5000, 60000, 60000},
		{"number above the supported maximum", TimeoutOf(1e12), 0, 0, max},
		{"infinity", TimeoutOf(math.Inf(1)), 0, 0, max},
		{"fraction rounds up", TimeoutOf(1500.2), 0, 0, 1501},
		{"tiny fraction is one ms", TimeoutOf(1e-9), 0, 0, 1},
		{"just below the maximum", TimeoutOf(max - 0.5), 0, 0, max},
	} {
		got, err := ResolveTimeout(c.t, c.def, c.serverMax)
		if err != nil || got != c.want {
			t.Errorf("%s: got %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	for _, ms := range []float64{0, math.Copysign(0, -1), -1, -0.5, math.Inf(-1), math.NaN()} {
		_, err := ResolveTimeout(TimeoutOf(ms), 0, 0)
		var e *InvalidTimeoutError
		if !errors.As(err, &e) {
			t.Errorf("%v: got %v", ms, err)
		}
	}
	_, err := ResolveTimeout(TimeoutOf(-5), 0, 0)
	if want := "Timeout -5 is not a positive number of milliseconds, so the run has no bound to keep. Leave the timeout out for the default, set null for the largest bound, or give a positive number."; err.Error() != want {
		t.Errorf("got %q", err)
	}
}

func TestResolveCountHostWaits(t *testing.T) {
	yes, no := true, false
	if !ResolveCountHostWaits(nil, true) || ResolveCountHostWaits(nil, false) {
		t.Error("absent does not read the default")
	}
	if !ResolveCountHostWaits(&yes, false) || ResolveCountHostWaits(&no, true) {
		t.Error("a set value does not win")
	}
}

func TestResultMessageConversions(t *testing.T) {
	for _, r := range []*ExecuteResult{
		{ResultJSON: `{"id":"o1"}`, Logs: []LogLine{{LogLevelLog, "hi"}}},
		{Error: "Execution timed out at its 5 ms bound. Do less work per run and return the part that is already finished.", HasError: true, Logs: []LogLine{}},
		{Error: "", HasError: true, Logs: []LogLine{}},
		{ExecutionID: "ex-1", Handles: []string{"fetch"}, Logs: []LogLine{}},
	} {
		m := ResultMessageOf(r)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var back ExecuteResultMessage
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if got := back.Result(); !reflect.DeepEqual(got, r) {
			t.Errorf("%s: read back %#v, want %#v", b, got, r)
		}
	}
	// MarshalJSON itself writes what JSON.stringify writes (encoding/json's
	// Marshal would HTML-escape its output afterwards).
	b, _ := ResultMessageOf(&ExecuteResult{ResultJSON: "\"<\u2028>\""}).MarshalJSON()
	if want := `{"resultJson":"\"<` + "\u2028" + `>\"","logs":[]}`; string(b) != want {
		t.Errorf("wrote %s, want %s", b, want)
	}
	b, _ = ResultMessageOf(&ExecuteResult{HasError: true, Error: "boom"}).MarshalJSON()
	if want := `{"error":"boom","logs":[]}`; string(b) != want {
		t.Errorf("wrote %s, want %s", b, want)
	}
	v, err := (&ExecuteResult{ResultJSON: `{"a":{"__executor_binary_v1__":"Uint8Array","data":"AQ=="}}`}).Value()
	if err != nil || !reflect.DeepEqual(v, map[string]any{"a": []byte{1}}) {
		t.Errorf("Value: %#v %v", v, err)
	}
	if v, err := (&ExecuteResult{}).Value(); v != jsvalue.Undefined || err != nil {
		t.Errorf("no value: %#v %v", v, err)
	}
}

func TestWireSizes(t *testing.T) {
	for _, l := range []LogLine{{LogLevelLog, ""}, {LogLevelWarn, "a\"b\x01"}, {LogLevelError, "日本\u2028"}} {
		b, _ := StringifyForDispatch(jsvalue.Object{{Key: "level", Value: string(l.Level)}, {Key: "text", Value: l.Text}})
		if got := LogLineWireSize(l); got != len(b)+1 {
			t.Errorf("%#v: %d, want %d", l, got, len(b)+1)
		}
	}
	if LogLineWireSize(LogLine{Level: LogLevelLog}) != 26 {
		t.Error("an empty line does not cost 26 bytes")
	}
	if got := ToolCallWireSize("store", "list", `["a"]`); got != 7+6+len(`"[\"a\"]"`) {
		t.Errorf("tool call: %d", got)
	}
	req := OutboundRequest{Method: "POST", URL: "https://x", Headers: []Header{{"a", "b"}}, Body: []byte{1, 2, 3, 4}}
	if got := OutboundRequestWireSize(req); got != 11+3+3+8 {
		t.Errorf("outbound request: %d", got)
	}
	resp := OutboundResponse{Status: 200, StatusText: "OK", Body: []byte{1}}
	if got := HandleAnswerWireSize(resp); got != 4+4 {
		t.Errorf("handle answer: %d", got)
	}
	if got := RunAnswerWireSize(&ExecuteResult{ResultJSON: `"a"`}); got != 7 {
		t.Errorf("run answer: %d", got)
	}
	if got := RunAnswerWireSize(&ExecuteResult{HasError: true, Error: "\x00"}); got != 8 {
		t.Errorf("run answer error: %d", got)
	}
}

// fillConsole captures lines of text until the capture stops.
func fillConsole(text string) []LogLine {
	c := NewConsoleCapture(0)
	for c.Add(LogLevelLog, text) {
	}
	return c.Lines()
}

// TestEveryBoundAtOnceFitsTheSmallestCeiling builds result messages of runs
// at every bound at once, with the worst escaping JSON has, and measures
// them as a capnweb session would send them: the message's JSON inside a
// ["resolve", id, …] frame, arrays escaped as [[…]]. Every one must stay
// under half of 1 MiB, the smallest message ceiling in the path.
func TestEveryBoundAtOnceFitsTheSmallestCeiling(t *testing.T) {
	const ceiling = 1 << 20
	// The run's answer: worst cases for each way the answer is measured.
	// resultJson is itself JSON, so inside the message every " and \ it
	// holds is escaped once more; control characters were escaped already
	// (\u0001, six bytes) and gain one more backslash.
	quotes := strings.Repeat(`"`, PayloadLimit)
	controls := strings.Repeat("\x01", PayloadLimit)
	answers := map[string]*ExecuteResult{}
	for name, value := range map[string]string{"quotes": quotes, "controls": controls, "backslashes": strings.Repeat(`\`, PayloadLimit)} {
		// Largest answer whose charged size is within PayloadLimit.
		answers["result of "+name] = &ExecuteResult{ResultJSON: largestWithin(t, value, func(s string) int {
			return RunAnswerWireSize(&ExecuteResult{ResultJSON: mustStringify(t, s)})
		}, mustStringify)}
		answers["error of "+name] = &ExecuteResult{HasError: true, Error: largestWithin(t, value, func(s string) int {
			return RunAnswerWireSize(&ExecuteResult{HasError: true, Error: s})
		}, func(_ *testing.T, s string) string { return s })}
	}
	// Measured naively instead (raw resultJson bytes at PayloadLimit), the
	// answer still fits: this is the worst the sandbox could do by
	// charging len(resultJson).
	answers["naive result of quotes"] = &ExecuteResult{ResultJSON: mustStringify(t, quotes[:PayloadLimit/2-1])}
	// The console: lines of the worst-escaping text, filled to the bound.
	consoles := map[string][]LogLine{
		"control characters": fillConsole(strings.Repeat("\x01", 1000)),
		"quotes":             fillConsole(strings.Repeat(`"`, 1000)),
		"empty lines":        fillConsole(""),
	}
	handles := []string{"fetch"}
	for an, answer := range answers {
		if an != "naive result of quotes" && RunAnswerWireSize(answer) > PayloadLimit {
			t.Fatalf("%s: answer charged %d, above the limit", an, RunAnswerWireSize(answer))
		}
		for cn, logs := range consoles {
			r := *answer
			r.Logs = logs
			r.ExecutionID = strings.Repeat("e", 200)
			r.Handles = handles
			msg, err := ResultMessageOf(&r).MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			frame := capnwebResolveFrame(t, msg)
			// encoding/json without HTML escaping, as a Go transport
			// might write it (it escapes U+2028/9, which these lack).
			var std bytes.Buffer
			enc := json.NewEncoder(&std)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(ResultMessageOfStd(&r)); err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{len(msg), len(frame), std.Len()} {
				if size > ceiling/2 {
					t.Errorf("answer %s, console %s: %d bytes, more than half of 1 MiB", an, cn, size)
				}
			}
			t.Logf("answer %-24s console %-18s message %6d, capnweb frame %6d, encoding/json %6d bytes",
				an, cn, len(msg), len(frame), std.Len())
		}
	}
}

// ResultMessageOfStd mirrors the message as a plain struct for
// encoding/json, bypassing ExecuteResultMessage's own MarshalJSON.
func ResultMessageOfStd(r *ExecuteResult) any {
	type plain ExecuteResultMessage
	m := plain(ResultMessageOf(r))
	return m
}

func mustStringify(t *testing.T, v string) string {
	s, err := StringifyForDispatch(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// largestWithin returns build(prefix) for the longest prefix of value
// whose cost is within PayloadLimit.
func largestWithin(t *testing.T, value string, cost func(string) int, build func(*testing.T, string) string) string {
	lo, hi := 0, len(value)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if cost(value[:mid]) <= PayloadLimit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if cost(value[:lo]) > PayloadLimit || (lo < len(value) && cost(value[:lo+1]) <= PayloadLimit) {
		t.Fatal("search failed")
	}
	return build(t, value[:lo])
}

// capnwebResolveFrame wraps a message as capnweb sends a resolved value:
// ["resolve",1,value], with every array inside the value escaped as [[…]].
func capnwebResolveFrame(t *testing.T, msg []byte) []byte {
	v, err := ParseForDispatchOrdered(string(msg))
	if err != nil {
		t.Fatal(err)
	}
	var escape func(any) any
	escape = func(v any) any {
		switch x := v.(type) {
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = escape(e)
			}
			return []any{out}
		case jsvalue.Object:
			out := make(jsvalue.Object, len(x))
			for i, m := range x {
				out[i] = jsvalue.Member{Key: m.Key, Value: escape(m.Value)}
			}
			return out
		}
		return v
	}
	s, err := StringifyForDispatch([]any{"resolve", 1, escape(v)})
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}
