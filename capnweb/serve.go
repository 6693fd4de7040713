package capnweb

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"unicode"
	"unicode/utf8"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// TargetFromMethods returns a Target whose methods are v's exported
// methods, named with their first letter lower-cased (ProtocolVersion is
// "protocolVersion"). A method may take a leading context.Context, then
// parameters of types the decoder produces (any, float64, integer kinds,
// bool, string, []any, map[string]any, []byte, *Stub, …), or a final
// variadic ...any holding the rest; a missing argument is the zero value.
// It may return nothing, a value, an error, or a value and an error.
func TargetFromMethods(v any) (Target, error) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return nil, fmt.Errorf("capnweb: TargetFromMethods(nil)")
	}
	t := rv.Type()
	m := methodTarget{}
	for i := 0; i < t.NumMethod(); i++ {
		meth := t.Method(i)
		if !meth.IsExported() {
			continue
		}
		fn := rv.Method(i)
		if err := checkSignature(fn.Type()); err != nil {
			return nil, fmt.Errorf("capnweb: method %s: %w", meth.Name, err)
		}
		r, size := utf8.DecodeRuneInString(meth.Name)
		name := string(unicode.ToLower(r)) + meth.Name[size:]
		m[name] = fn
	}
	return m, nil
}

type methodTarget map[string]reflect.Value

var (
	ctxType   = reflect.TypeOf((*context.Context)(nil)).Elem()
	errorType = reflect.TypeOf((*error)(nil)).Elem()
)

func checkSignature(ft reflect.Type) error {
	switch ft.NumOut() {
	case 0, 1:
	case 2:
		if ft.Out(1) != errorType {
			return fmt.Errorf("second result must be error")
		}
	default:
		return fmt.Errorf("too many results")
	}
	return nil
}

func (m methodTarget) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	fn, ok := m[name]
	if !ok || isPrototypeKey(name) {
		return nil, notAFunction(name)
	}
	ft := fn.Type()
	in := make([]reflect.Value, 0, ft.NumIn())
	first := 0
	if ft.NumIn() > 0 && ft.In(0) == ctxType {
		in = append(in, reflect.ValueOf(ctx))
		first = 1
	}
	n := ft.NumIn()
	if ft.IsVariadic() {
		n--
	}
	ai := 0
	for i := first; i < n; i++ {
		var a any
		if ai < len(args) {
			a = args[ai]
		}
		ai++
		val, err := convertArg(a, ft.In(i))
		if err != nil {
			return nil, &Error{Name: "TypeError", Message: fmt.Sprintf("argument %d of %s: %v", ai, name, err)}
		}
		in = append(in, val)
	}
	if ft.IsVariadic() {
		et := ft.In(ft.NumIn() - 1).Elem()
		for ; ai < len(args); ai++ {
			val, err := convertArg(args[ai], et)
			if err != nil {
				return nil, &Error{Name: "TypeError", Message: fmt.Sprintf("argument %d of %s: %v", ai+1, name, err)}
			}
			in = append(in, val)
		}
	}
	out := fn.Call(in)
	switch len(out) {
	case 0:
		return jsvalue.Undefined, nil
	case 1:
		if ft.Out(0) == errorType {
			if err, _ := out[0].Interface().(error); err != nil {
				return nil, err
			}
			return jsvalue.Undefined, nil
		}
		return out[0].Interface(), nil
	}
	if err, _ := out[1].Interface().(error); err != nil {
		return nil, err
	}
	return out[0].Interface(), nil
}

// GetProperty returns a method as a Func.
func (m methodTarget) GetProperty(ctx context.Context, name string) (any, error) {
	if _, ok := m[name]; !ok || isPrototypeKey(name) {
		return jsvalue.Undefined, nil
	}
	return Func(func(ctx context.Context, args []any) (any, error) {
		return m.CallMethod(ctx, name, args)
	}), nil
}

// convertArg converts a received value to parameter type t.
func convertArg(a any, t reflect.Type) (reflect.Value, error) {
	if a == nil || a == jsvalue.Undefined {
		return reflect.Zero(t), nil
	}
	av := reflect.ValueOf(a)
	if av.Type().AssignableTo(t) {
		v := reflect.New(t).Elem()
		v.Set(av)
		return v, nil
	}
	if f, ok := a.(float64); ok {
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return integerArg(f, t)
		case reflect.Float32:
			return reflect.ValueOf(float32(f)), nil
		}
	}
	if b, ok := a.(Bytes); ok && t == reflect.TypeOf([]byte(nil)) {
		return reflect.ValueOf(b.Data), nil
	}
	return reflect.Value{}, fmt.Errorf("cannot use %T as %s", a, t)
}

// integerArg converts a received number to the integer type t. The range
// is checked on the float: converting an out-of-range float to an integer
// gives no defined value in Go, so 1e30 must never reach int64(f).
func integerArg(f float64, t reflect.Type) (reflect.Value, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return reflect.Value{}, fmt.Errorf("%v is not an integer", f)
	}
	v := reflect.New(t).Elem()
	if v.CanInt() {
		limit := math.Ldexp(1, t.Bits()-1)
		if f < -limit || f >= limit {
			return reflect.Value{}, fmt.Errorf("%v out of range", f)
		}
		v.SetInt(int64(f))
		return v, nil
	}
	if f < 0 {
		return reflect.Value{}, fmt.Errorf("%v is not a non-negative integer", f)
	}
	if f >= math.Ldexp(1, t.Bits()) {
		return reflect.Value{}, fmt.Errorf("%v out of range", f)
	}
	v.SetUint(uint64(f))
	return v, nil
}
