package capnweb

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// Decode limits.
const (
	// MaxDepth bounds the nesting of a value, received or sent, as in the
	// JavaScript library.
	MaxDepth = 256
	// MaxBigIntDigits bounds the digits of a received bigint, as in the
	// JavaScript library.
	MaxBigIntDigits = 16384
	// DefaultMaxMessageSize is Options.MaxMessageSize when it is not set.
	DefaultMaxMessageSize = 1 << 20
)

// parseMessageScratch parses one message's JSON text, reusing *scratch
// (see parseJSONScratch). Numbers stay json.Number until evaluated.
// maxDepth is the evaluator's bound; raw JSON may nest about twice as deep,
// since every literal array is wrapped once more.
func parseMessageScratch(msg []byte, maxDepth int, scratch *[]any) ([]any, error) {
	v, err := parseJSONScratch(msg, 2*maxDepth+16, scratch)
	if errors.Is(err, jsvalue.ErrTooDeep) {
		return nil, protoErrorf("message nested deeper than %d", maxDepth)
	}
	if err != nil {
		// "protocol:" names where the reader once lived; peers have always
		// read the reason so.
		return nil, protoErrorf("malformed JSON message: protocol: %v", err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, badMessage(msg)
	}
	if _, ok := arr[0].(string); !ok {
		return nil, badMessage(msg)
	}
	return arr, nil
}

func badMessage(msg []byte) *ProtocolError {
	s := string(msg)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return protoErrorf("bad RPC message: %s", s)
}

// unsupportedError fails one call or resolution (not the session) because
// its value holds something this peer cannot receive.
type unsupportedError struct{ err *Error }

func (u *unsupportedError) Error() string { return u.err.Error() }

func unsupported(what string) *unsupportedError {
	return &unsupportedError{&Error{Name: "TypeError", Message: "capnweb Go peer cannot receive " + what}}
}

// hole is a part of a received value that is not known yet: a promise the
// peer will resolve, or a reference to one of our pending results. Values
// holding holes are completed by fill before delivery.
type hole struct {
	c     *cell
	path  []string // walked on the settled value
	fresh bool     // c is a new call's own result, not an existing entry's
}

// evaluator turns one received expression into a Go value. It runs with
// the session lock held, so every import it introduces is recorded in
// message order.
type evaluator struct {
	s         *Session
	maxDepth  int
	maxBig    int
	keepOrder bool // plain objects decode to jsvalue.Object, not map[string]any
	holes     bool
	stubs     []*Stub        // handles introduced by this message
	promises  []*importEntry // promise imports introduced by this message
	// ref resolves an import/pipeline reference; nil means the session's
	// exports table.
	ref func(id int64, path []string, args []any, hasArgs bool) (any, error)
}

func (ev *evaluator) eval(x any, depth int) (any, error) {
	if depth >= ev.maxDepth {
		return nil, protoErrorf("message nested deeper than %d", ev.maxDepth)
	}
	switch v := x.(type) {
	case nil, bool, string:
		return v, nil
	case json.Number:
		return parseNumber(string(v))
	case jsvalue.Object:
		var ordered jsvalue.Object
		var out map[string]any
		if ev.keepOrder {
			ordered = make(jsvalue.Object, 0, len(v))
		} else {
			out = make(map[string]any, len(v))
		}
		for _, f := range v {
			val, err := ev.eval(f.Value, depth+1)
			if err != nil {
				return nil, err
			}
			if isPrototypeKey(f.Key) {
				// Evaluated (so stubs inside are accounted for) but dropped,
				// as the JavaScript receiver does.
				continue
			}
			if ev.keepOrder {
				ordered = append(ordered, jsvalue.Member{Key: f.Key, Value: val})
			} else {
				out[f.Key] = val
			}
		}
		if ev.keepOrder {
			return ordered, nil
		}
		return out, nil
	case []any:
		return ev.special(v, depth)
	}
	return nil, protoErrorf("unexpected JSON value %T", x)
}

func parseNumber(s string) (any, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Out of range parses to ±Inf, as JSON.parse gives.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, nil
		}
		return nil, protoErrorf("bad number %q", s)
	}
	return jsvalue.BoxFloat64(f), nil
}

func (ev *evaluator) special(v []any, depth int) (any, error) {
	if len(v) == 0 {
		return nil, protoErrorf("unknown special value: []")
	}
	if inner, ok := v[0].([]any); ok {
		if len(v) != 1 {
			return nil, ev.unknown(v)
		}
		out := make([]any, len(inner))
		for i, el := range inner {
			val, err := ev.eval(el, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = val
		}
		return out, nil
	}
	tag, ok := v[0].(string)
	if !ok {
		return nil, ev.unknown(v)
	}
	switch tag {
	case "undefined":
		if len(v) != 1 {
			return nil, ev.unknown(v)
		}
		return jsvalue.Undefined, nil
	case "nan":
		return math.NaN(), nil
	case "inf":
		return math.Inf(1), nil
	case "-inf":
		return math.Inf(-1), nil
	case "bigint":
		s, ok := str(v, 1)
		if !ok {
			return nil, ev.unknown(v)
		}
		digits := strings.TrimPrefix(s, "-")
		if len(digits) > ev.maxBig {
			return nil, protoErrorf("bigint longer than %d digits", ev.maxBig)
		}
		if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
			return nil, protoErrorf("bad bigint %q", truncate(s, 40))
		}
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, protoErrorf("bad bigint %q", truncate(s, 40))
		}
		return n, nil
	case "date":
		if len(v) < 2 {
			return nil, ev.unknown(v)
		}
		if v[1] == nil {
			return time.Time{}, nil
		}
		num, ok := v[1].(json.Number)
		if !ok {
			return nil, ev.unknown(v)
		}
		f, err := parseNumber(string(num))
		if err != nil {
			return nil, err
		}
		ms := f.(float64)
		if math.IsInf(ms, 0) || math.Abs(ms) > 8.64e15 {
			return time.Time{}, nil
		}
		return time.UnixMilli(int64(ms)).UTC(), nil
	case "bytes":
		s, ok := str(v, 1)
		if !ok {
			return nil, ev.unknown(v)
		}
		data, err := decodeBase64(s)
		if err != nil {
			return nil, protoErrorf("bad base64 in bytes value")
		}
		if len(v) < 3 {
			return data, nil
		}
		marker, ok := v[2].(string)
		if !ok {
			return nil, ev.unknown(v)
		}
		size, known := bytesElemSize[marker]
		if !known {
			return nil, protoErrorf("unknown byte array type %q", truncate(marker, 40))
		}
		if len(data)%size != 0 {
			return nil, protoErrorf("byte length %d is not a multiple of %s element size", len(data), marker)
		}
		return Bytes{Type: marker, Data: data}, nil
	case "url":
		s, ok := str(v, 1)
		if !ok {
			return nil, ev.unknown(v)
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, protoErrorf("bad url value")
		}
		return u, nil
	case "headers":
		if len(v) < 2 {
			return nil, ev.unknown(v)
		}
		pairs, ok := v[1].([]any)
		if !ok {
			return nil, ev.unknown(v)
		}
		out := make(Headers, 0, len(pairs))
		for _, p := range pairs {
			pa, ok := p.([]any)
			if !ok || len(pa) != 2 {
				return nil, ev.unknown(v)
			}
			k, ok1 := pa[0].(string)
			val, ok2 := pa[1].(string)
			if !ok1 || !ok2 {
				return nil, ev.unknown(v)
			}
			out = append(out, [2]string{k, val})
		}
		return out, nil
	case "error":
		return ev.errorValue(v, depth)
	case "import", "pipeline":
		return ev.reference(v, depth)
	case "export", "promise", "writable":
		if len(v) < 2 {
			return nil, ev.unknown(v)
		}
		id, ok := intID(v[1])
		if !ok {
			return nil, ev.unknown(v)
		}
		switch tag {
		case "export":
			return ev.s.introduceStub(ev, id)
		case "writable":
			// Imported so that it is released, then refused.
			if _, err := ev.s.introduceStub(ev, id); err != nil {
				return nil, err
			}
			return nil, unsupported("a WritableStream")
		}
		ent, err := ev.s.introducePromise(ev, id)
		if err != nil {
			return nil, err
		}
		ev.holes = true
		return &hole{c: ent.cell}, nil
	case "readable":
		return nil, unsupported("a ReadableStream")
	case "blob":
		return nil, unsupported("a Blob")
	case "request":
		return nil, unsupported("a Request")
	case "response":
		return nil, unsupported("a Response")
	case "remap":
		return ev.remap(v, depth)
	}
	return nil, ev.unknown(v)
}

func (ev *evaluator) unknown(v []any) error {
	b, _ := json.Marshal(v)
	return protoErrorf("unknown special value: %s", truncate(string(b), 200))
}

func (ev *evaluator) errorValue(v []any, depth int) (any, error) {
	if len(v) < 3 {
		return nil, ev.unknown(v)
	}
	name, ok1 := v[1].(string)
	msg, ok2 := v[2].(string)
	if !ok1 || !ok2 {
		return nil, ev.unknown(v)
	}
	e := &Error{Name: name, Message: msg}
	if len(v) > 3 {
		if s, ok := v[3].(string); ok {
			e.Stack = s
		}
	}
	if len(v) > 4 {
		props, ok := v[4].(jsvalue.Object)
		if !ok {
			return nil, ev.unknown(v)
		}
		for _, f := range props {
			val, err := ev.eval(f.Value, depth+1)
			if err != nil {
				return nil, err
			}
			if isPrototypeKey(f.Key) || f.Key == "name" || f.Key == "message" || f.Key == "stack" {
				continue
			}
			e.Props = append(e.Props, jsvalue.Member{Key: f.Key, Value: val})
		}
	}
	return e, nil
}

// reference evaluates ["import"|"pipeline", id, path?, args?].
func (ev *evaluator) reference(v []any, depth int) (any, error) {
	if len(v) < 2 || len(v) > 4 {
		return nil, ev.unknown(v)
	}
	id, ok := intID(v[1])
	if !ok {
		return nil, ev.unknown(v)
	}
	var path []string
	if len(v) > 2 {
		p, err := parsePath(v[2])
		if err != nil {
			return nil, err
		}
		path = p
	}
	var args []any
	hasArgs := len(v) > 3
	if hasArgs {
		raw, ok := v[3].([]any)
		if !ok {
			return nil, ev.unknown(v)
		}
		args = make([]any, len(raw))
		for i, a := range raw {
			val, err := ev.eval(a, depth+1)
			if err != nil {
				return nil, err
			}
			args[i] = val
		}
	}
	if ev.ref != nil {
		return ev.ref(id, path, args, hasArgs)
	}
	return ev.s.reference(ev, id, path, args, hasArgs)
}

func parsePath(x any) ([]string, error) {
	raw, ok := x.([]any)
	if !ok {
		return nil, protoErrorf("bad property path")
	}
	path := make([]string, len(raw))
	for i, p := range raw {
		switch q := p.(type) {
		case string:
			path[i] = q
		case json.Number:
			path[i] = string(q)
		default:
			return nil, protoErrorf("bad property path")
		}
	}
	return path, nil
}

func intID(x any) (int64, bool) {
	n, ok := x.(json.Number)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		// JSON.parse reads 1.0 and 1e0 as 1 too.
		f, ferr := strconv.ParseFloat(string(n), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false
		}
		id = int64(f)
	}
	if id > 1<<53 || id < -(1<<53) {
		return 0, false
	}
	return id, true
}

func str(v []any, i int) (string, bool) {
	if len(v) <= i {
		return "", false
	}
	s, ok := v[i].(string)
	return s, ok
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	return base64.RawStdEncoding.DecodeString(s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// fill replaces the holes in v with their settled values. It waits for
// each; ctx bounds the wait.
func fill(ctx context.Context, v any) (any, error) {
	switch x := v.(type) {
	case *hole:
		val, err := x.c.wait(ctx)
		if err != nil {
			return nil, err
		}
		if len(x.path) > 0 {
			return walkPath(ctx, val, x.path)
		}
		return val, nil
	case []any:
		for i, el := range x {
			f, err := fill(ctx, el)
			if err != nil {
				return nil, err
			}
			x[i] = f
		}
	case map[string]any:
		for k, el := range x {
			f, err := fill(ctx, el)
			if err != nil {
				return nil, err
			}
			x[k] = f
		}
	case jsvalue.Object:
		for i := range x {
			f, err := fill(ctx, x[i].Value)
			if err != nil {
				return nil, err
			}
			x[i].Value = f
		}
	case *Error:
		for i := range x.Props {
			f, err := fill(ctx, x.Props[i].Value)
			if err != nil {
				return nil, err
			}
			x.Props[i].Value = f
		}
	}
	return v, nil
}

// holesSettled reports whether every hole in v can be filled at once.
func holesSettled(v any, depth int) bool {
	if depth > MaxDepth+8 {
		return true
	}
	switch x := v.(type) {
	case *hole:
		return x.c.isSettled() && !needsRemoteWalk(x)
	case []any:
		for _, el := range x {
			if !holesSettled(el, depth+1) {
				return false
			}
		}
	case map[string]any:
		for _, el := range x {
			if !holesSettled(el, depth+1) {
				return false
			}
		}
	case jsvalue.Object:
		for _, f := range x {
			if !holesSettled(f.Value, depth+1) {
				return false
			}
		}
	case *Error:
		if x != nil {
			return holesSettled(x.Props, depth+1)
		}
	}
	return true
}

// needsRemoteWalk reports whether filling h walks a path on a value that
// may need the peer (a stub or promise), which must not block a queue.
func needsRemoteWalk(h *hole) bool {
	if len(h.path) == 0 {
		return false
	}
	v, _, _ := h.c.peek()
	switch v.(type) {
	case map[string]any, jsvalue.Object, []any:
		return false
	}
	return true
}

// walkStubs calls fn for every *Stub in a received or returned value. It
// stops at the encoding depth limit, so a cyclic value cannot recurse
// forever (it fails to encode anyway).
func walkStubs(v any, fn func(*Stub)) {
	switch v.(type) {
	case *Stub, []any, map[string]any, jsvalue.Object, *Error:
		walkStubsDepth(v, fn, 0)
	}
	// Anything else holds no stub: most results are scalars, and skipping
	// the walk's frame keeps a fresh goroutine from growing its stack.
}

func walkStubsDepth(v any, fn func(*Stub), depth int) {
	if depth > MaxDepth+8 {
		return
	}
	switch x := v.(type) {
	case *Stub:
		fn(x)
	case []any:
		for _, el := range x {
			walkStubsDepth(el, fn, depth+1)
		}
	case map[string]any:
		walkMapStubs(x, fn, depth)
	case jsvalue.Object:
		for _, f := range x {
			walkStubsDepth(f.Value, fn, depth+1)
		}
	case *Error:
		if x != nil {
			walkStubsDepth(x.Props, fn, depth+1)
		}
	}
}

// walkMapStubs is walkStubsDepth's map case, apart because a map iterator
// makes a large frame that every other case would otherwise carry.
func walkMapStubs(m map[string]any, fn func(*Stub), depth int) {
	for _, el := range m {
		walkStubsDepth(el, fn, depth+1)
	}
}

// walkPath reads path from a local value: object keys, array indexes
// (numeric strings accepted), target properties, and through stubs.
func walkPath(ctx context.Context, v any, path []string) (any, error) {
	for i, name := range path {
		if isPrototypeKey(name) {
			return jsvalue.Undefined, nil
		}
		switch x := v.(type) {
		case map[string]any:
			val, ok := x[name]
			if !ok {
				val = jsvalue.Undefined
			}
			v = val
		case jsvalue.Object:
			val, ok := x.Get(name)
			if !ok {
				val = jsvalue.Undefined
			}
			v = val
		case []any:
			n, err := strconv.Atoi(name)
			if err != nil || n < 0 || n >= len(x) {
				if name == "length" {
					v = float64(len(x))
				} else {
					v = jsvalue.Undefined
				}
			} else {
				v = x[n]
			}
		case *Stub:
			return x.Get(path[i:]...).Await(ctx)
		case *Promise:
			return x.Get(path[i:]...).Await(ctx)
		case PropertyGetter:
			val, err := x.GetProperty(ctx, name)
			if err != nil {
				return nil, err
			}
			v = val
		case nil, jsvalue.UndefinedValue:
			return nil, &Error{Name: "TypeError", Message: fmt.Sprintf("Cannot read properties of %s (reading '%s')", jsNullish(x), name)}
		default:
			v = jsvalue.Undefined
		}
	}
	return v, nil
}

func jsNullish(v any) string {
	if v == nil {
		return "null"
	}
	return "undefined"
}
