package capnweb

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// errTooDeep is the JavaScript sender's text for a value nested too deep.
const errTooDeep = "Serialization exceeded maximum allowed depth. (Does the message contain cycles?)"

// encoder writes one message as JSON.stringify would, turning stubs,
// promises and callable values into references of its session. It runs
// with the session's lock held; exports it creates are committed only if
// the whole message encodes.
type encoder struct {
	s        *Session // nil: stubs and targets cannot be encoded
	buf      []byte
	maxDepth int
	pending  []*export  // new exports, committed with the message
	dups     []*Stub    // handles taken on stubs of other sessions
	post     []func()   // run after the session lock is released
	promises []*export  // promise exports whose resolve must be sent
	foreign  []*Promise // the promises those exports wait for, in order
}

func (e *encoder) fail(format string, args ...any) error {
	return &Error{Name: "TypeError", Message: fmt.Sprintf(format, args...)}
}

func (e *encoder) value(v any, depth int) error {
	if depth >= e.maxDepth {
		return &Error{Name: "TypeError", Message: errTooDeep}
	}
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case jsvalue.UndefinedValue:
		e.buf = append(e.buf, `["undefined"]`...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		e.buf = jsvalue.AppendString(e.buf, x)
	case float64:
		e.number(x)
	case int:
		e.number(float64(x))
	case int64:
		e.number(float64(x))
	case *big.Int:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, `["bigint","`...)
		e.buf = x.Append(e.buf, 10)
		e.buf = append(e.buf, `"]`...)
	case big.Int:
		return e.value(&x, depth)
	case time.Time:
		if x.IsZero() {
			e.buf = append(e.buf, `["date",null]`...)
			return nil
		}
		e.buf = append(e.buf, `["date",`...)
		e.number(float64(x.UnixMilli()))
		e.buf = append(e.buf, ']')
	case []byte:
		e.bytes(x, "")
	case Bytes:
		return e.typedBytes(x)
	case *Bytes:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.typedBytes(*x)
	case *url.URL:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, `["url",`...)
		e.buf = jsvalue.AppendString(e.buf, x.String())
		e.buf = append(e.buf, ']')
	case Headers:
		e.buf = append(e.buf, `["headers",[`...)
		for i, h := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, '[')
			e.buf = jsvalue.AppendString(e.buf, h[0])
			e.buf = append(e.buf, ',')
			e.buf = jsvalue.AppendString(e.buf, h[1])
			e.buf = append(e.buf, ']')
		}
		e.buf = append(e.buf, "]]"...)
	case *Error:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.errorValue(x, depth)
	case *Thrown:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(x.Value, depth)
	case []any:
		if x == nil {
			// A nil slice is still an array, as in JSON.stringify of [].
			e.buf = append(e.buf, "[[]]"...)
			return nil
		}
		e.buf = append(e.buf, "[["...)
		for i, el := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(el, depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, "]]"...)
	case map[string]any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.object(sortedObject(x, func(v any) any { return v }), depth)
	case jsvalue.Object:
		return e.object(x, depth)
	case *Stub:
		return e.stub(x)
	case *Promise:
		return e.promise(x, depth)
	case Target:
		return e.export(x)
	case func(context.Context, []any) (any, error):
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.export(Func(x))
	case error:
		return e.errorValue(errorToJS(x, e.errorProps()), depth)
	default:
		return e.reflectValue(reflect.ValueOf(v), depth)
	}
	return nil
}

func (e *encoder) number(f float64) {
	switch {
	case math.IsNaN(f):
		e.buf = append(e.buf, `["nan"]`...)
	case math.IsInf(f, 1):
		e.buf = append(e.buf, `["inf"]`...)
	case math.IsInf(f, -1):
		e.buf = append(e.buf, `["-inf"]`...)
	default:
		e.buf = jsvalue.AppendNumber(e.buf, f)
	}
}

func (e *encoder) bytes(b []byte, marker string) {
	e.buf = append(e.buf, `["bytes","`...)
	e.buf = base64.RawStdEncoding.AppendEncode(e.buf, b)
	e.buf = append(e.buf, '"')
	if marker != "" {
		e.buf = append(e.buf, ',')
		e.buf = jsvalue.AppendString(e.buf, marker)
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) typedBytes(b Bytes) error {
	if b.Type != "" {
		size, ok := bytesElemSize[b.Type]
		if !ok {
			return e.fail("Cannot serialize value: unknown byte array type %q", b.Type)
		}
		if len(b.Data)%size != 0 {
			return e.fail("Cannot serialize value: %d bytes is not a whole number of %s elements", len(b.Data), b.Type)
		}
	}
	e.bytes(b.Data, b.Type)
	return nil
}

// sortedObject is a Go map as the object JavaScript builds by inserting
// its keys sorted, each value through val.
func sortedObject[V any](m map[string]V, val func(V) any) jsvalue.Object {
	o := make(jsvalue.Object, 0, len(m))
	for _, k := range jsvalue.SortedKeys(m) {
		o = append(o, jsvalue.Member{Key: k, Value: val(m[k])})
	}
	return o
}

func (e *encoder) object(o jsvalue.Object, depth int) error {
	e.buf = append(e.buf, '{')
	for i, f := range o {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = jsvalue.AppendString(e.buf, f.Key)
		e.buf = append(e.buf, ':')
		if err := e.value(f.Value, depth+1); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// errorValue writes ["error",name,message] or, with a stack or props, the
// five-element form with null in the stack slot when there is none.
func (e *encoder) errorValue(x *Error, depth int) error {
	name := x.Name
	if name == "" {
		name = "Error"
	}
	e.buf = append(e.buf, `["error",`...)
	e.buf = jsvalue.AppendString(e.buf, name)
	e.buf = append(e.buf, ',')
	e.buf = jsvalue.AppendString(e.buf, x.Message)
	if x.Stack == "" && len(x.Props) == 0 {
		e.buf = append(e.buf, ']')
		return nil
	}
	e.buf = append(e.buf, ',')
	if x.Stack == "" {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = jsvalue.AppendString(e.buf, x.Stack)
	}
	if len(x.Props) > 0 {
		e.buf = append(e.buf, ',')
		if err := e.object(x.Props, depth+1); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

// errorToJS converts a Go error to the error a JavaScript peer receives:
// an *Error anywhere in the chain as is, else its text, with the own
// properties props gives it (none when props is nil).
func errorToJS(err error, props ErrorProps) *Error {
	var je *Error
	if errors.As(err, &je) {
		return je
	}
	out := &Error{Name: "Error", Message: err.Error()}
	if props != nil {
		out.Props = props.ErrorProps(err)
	}
	return out
}

// errorProps is the session's ErrorProps; an encoder outside a session
// has none.
func (e *encoder) errorProps() ErrorProps {
	if e.s == nil {
		return nil
	}
	return e.s.opts.ErrorProps
}

// stub writes a reference to a peer object: ["import",id] when it belongs
// to this session, else a new export that forwards to it.
func (e *encoder) stub(st *Stub) error {
	if st == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if e.s == nil {
		return e.fail("Cannot serialize value: stub outside a session")
	}
	if st.sess == e.s {
		if st.released.Load() || st.ent.dropped {
			return e.fail("Attempted to use RPC stub after it has been disposed.")
		}
		e.buf = append(e.buf, `["import",`...)
		e.buf = strconv.AppendInt(e.buf, st.ent.id, 10)
		e.buf = append(e.buf, ']')
		return nil
	}
	d := st.Dup()
	if d.released.Load() {
		return e.fail("Attempted to use RPC stub after it has been disposed.")
	}
	e.dups = append(e.dups, d)
	return e.export(d)
}

// export writes ["export",-N] with a fresh id for a local object; the peer
// releases it when done.
func (e *encoder) export(v any) error {
	if e.s == nil {
		return e.fail("Cannot serialize value: callable outside a session")
	}
	id := e.s.nextExport
	e.s.nextExport--
	e.pending = append(e.pending, &export{id: id, refcount: 1, value: v})
	e.buf = append(e.buf, `["export",`...)
	e.buf = strconv.AppendInt(e.buf, id, 10)
	e.buf = append(e.buf, ']')
	return nil
}

// promise writes a promise: a pipeline reference when it is an unsettled
// result of this session, its value when settled, and otherwise a promise
// export resolved later.
func (e *encoder) promise(p *Promise, depth int) error {
	if p == nil {
		e.buf = append(e.buf, "null"...)
		return nil
	}
	if e.s == nil {
		return e.fail("Cannot serialize value: promise outside a session")
	}
	if p.sess == e.s && p.ent != nil && !p.ent.dropped && !p.ent.cell.isSettled() {
		e.buf = append(e.buf, `["pipeline",`...)
		e.buf = strconv.AppendInt(e.buf, p.ent.id, 10)
		if len(p.path) > 0 {
			e.buf = append(e.buf, ',')
			e.path(p.path)
		}
		e.buf = append(e.buf, ']')
		return nil
	}
	if v, err, ok := p.peek(); ok {
		if err != nil {
			return e.fail("Cannot serialize value: a rejected promise (%v)", err)
		}
		return e.value(v, depth)
	}
	id := e.s.nextExport
	e.s.nextExport--
	ex := &export{id: id, refcount: 1, prom: newCell(), pulled: true}
	e.pending = append(e.pending, ex)
	e.promises = append(e.promises, ex)
	e.foreign = append(e.foreign, p)
	e.buf = append(e.buf, `["promise",`...)
	e.buf = strconv.AppendInt(e.buf, id, 10)
	e.buf = append(e.buf, ']')
	return nil
}

func (e *encoder) path(path []string) {
	e.buf = append(e.buf, '[')
	for i, p := range path {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = jsvalue.AppendString(e.buf, p)
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) reflectValue(rv reflect.Value, depth int) error {
	if v, ok := jsvalue.Scalar(rv); ok {
		return e.value(v, depth)
	}
	switch rv.Kind() {
	case reflect.Invalid:
		e.buf = append(e.buf, "null"...)
		return nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.value(rv.Elem().Interface(), depth+1)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			e.bytes(rv.Bytes(), "")
			return nil
		}
		e.buf = append(e.buf, "[["...)
		for i := 0; i < rv.Len(); i++ {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(rv.Index(i).Interface(), depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, "]]"...)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return e.fail("Cannot serialize value: map with %s keys", rv.Type().Key())
		}
		if rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		m := make(map[string]reflect.Value, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value()
		}
		return e.object(sortedObject(m, reflect.Value.Interface), depth)
	case reflect.Struct:
		e.buf = append(e.buf, '{')
		n := 0
		for _, f := range structFields(rv.Type()) {
			fv := rv.FieldByIndex(f.index)
			if f.omitEmpty && fv.IsZero() {
				continue
			}
			if n > 0 {
				e.buf = append(e.buf, ',')
			}
			n++
			e.buf = jsvalue.AppendString(e.buf, f.name)
			e.buf = append(e.buf, ':')
			if err := e.value(fv.Interface(), depth+1); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
	default:
		return e.fail("Cannot serialize value: %s", rv.Type())
	}
	return nil
}

type structField struct {
	name      string
	index     []int
	omitEmpty bool
}

var structCache sync.Map // reflect.Type → []structField

// structFields lists the fields encoding/json would write, with their
// json tag names, embedded structs flattened.
func structFields(t reflect.Type) []structField {
	if c, ok := structCache.Load(t); ok {
		return c.([]structField)
	}
	var out []structField
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), index...), i)
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, structField{name: name, index: idx, omitEmpty: strings.Contains(opts, "omitempty")})
		}
	}
	walk(t, nil)
	structCache.Store(t, out)
	return out
}
