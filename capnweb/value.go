package capnweb

import (
	"context"
	"fmt"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// Byte-array type markers of ["bytes", b64, marker]. An empty Bytes.Type
// sends no marker, which a JavaScript receiver reads as a Uint8Array (a
// Buffer on Node).
const (
	TypeArrayBuffer       = "ArrayBuffer"
	TypeDataView          = "DataView"
	TypeInt8Array         = "Int8Array"
	TypeUint8Array        = "Uint8Array"
	TypeUint8ClampedArray = "Uint8ClampedArray"
	TypeInt16Array        = "Int16Array"
	TypeUint16Array       = "Uint16Array"
	TypeInt32Array        = "Int32Array"
	TypeUint32Array       = "Uint32Array"
	TypeBigInt64Array     = "BigInt64Array"
	TypeBigUint64Array    = "BigUint64Array"
	TypeFloat32Array      = "Float32Array"
	TypeFloat64Array      = "Float64Array"
)

// bytesElemSize maps each marker a JavaScript peer understands to its
// element size; a byte length that is not a multiple of it is malformed.
var bytesElemSize = map[string]int{
	TypeArrayBuffer: 1, TypeDataView: 1, TypeInt8Array: 1, TypeUint8Array: 1,
	TypeUint8ClampedArray: 1, TypeInt16Array: 2, TypeUint16Array: 2,
	TypeInt32Array: 4, TypeUint32Array: 4, TypeBigInt64Array: 8,
	TypeBigUint64Array: 8, TypeFloat32Array: 4, TypeFloat64Array: 8,
}

// Bytes is binary data with the JavaScript type it stands for. Data is the
// raw little-endian content. Type "" sends no marker; TypeArrayBuffer makes
// a JavaScript receiver get an ArrayBuffer.
type Bytes struct {
	Type string
	Data []byte
}

// AsBytes returns the content of a received []byte or Bytes.
func AsBytes(v any) ([]byte, bool) {
	switch b := v.(type) {
	case []byte:
		return b, true
	case Bytes:
		return b.Data, true
	case *Bytes:
		if b == nil {
			return nil, false
		}
		return b.Data, true
	}
	return nil, false
}

// Headers is a list of HTTP header name and value pairs, the form of a
// JavaScript Headers object on the wire (["headers", [[name, value]…]]).
type Headers [][2]string

// Error is a JavaScript error crossing the wire: ["error", name, message]
// or ["error", name, message, stack|null, props]. A JavaScript receiver
// keeps Name only if it is one of the eight standard error names. Stack is
// sent only when not empty. Props are the error's own properties, "code"
// above all, in order.
type Error struct {
	Name    string
	Message string
	Stack   string
	Props   jsvalue.Object
}

// NewError returns an Error with the given name ("Error" when empty),
// message and own properties.
func NewError(name, message string, props ...jsvalue.Member) *Error {
	if name == "" {
		name = "Error"
	}
	return &Error{Name: name, Message: message, Props: jsvalue.Object(props)}
}

// Error formats the error as JavaScript's String(err) does.
func (e *Error) Error() string {
	if e.Name == "" {
		return e.Message
	}
	if e.Message == "" {
		return e.Name
	}
	return e.Name + ": " + e.Message
}

// Code returns the "code" property when it is a string, else "".
func (e *Error) Code() string {
	v, _ := e.Props.Get("code")
	s, _ := v.(string)
	return s
}

// ErrorProps is how the application protocol tells a session what its Go
// errors carry to the peer beside their message, a fault code above all:
// capnweb knows no codes of its own.
type ErrorProps interface {
	// ErrorProps returns the own properties err is sent with, or nil for
	// none.
	ErrorProps(err error) jsvalue.Object
}

// Thrown is a rejection whose value is not an error, as JavaScript's
// throw "text" produces. Return one from a Handler to reject with Value;
// a received non-error rejection arrives as *Thrown.
type Thrown struct {
	Value any
}

func (t *Thrown) Error() string {
	if s, ok := t.Value.(string); ok {
		return s
	}
	return fmt.Sprintf("thrown value: %v", t.Value)
}

// Handler serves one method: it receives the call's arguments and returns
// its result or error. ctx is cancelled when the session ends.
type Handler func(ctx context.Context, args []any) (any, error)

// Func is a callable value: passed as an argument or result it becomes a
// stub the peer can call, and a call on it runs the function.
type Func func(ctx context.Context, args []any) (any, error)

// CallMethod calls f itself when name is "", as the peer does on a stub of
// a function; functions have no methods.
func (f Func) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	if name != "" {
		return nil, notAFunction(name)
	}
	return f(ctx, args)
}

// Target is something the peer can call: the main object, or any object
// passed by reference. CallMethod runs the method named name; name "" means
// calling the target itself (a function stub). An unknown name should fail
// with an error such as NotAFunction's.
type Target interface {
	CallMethod(ctx context.Context, name string, args []any) (any, error)
}

// Disposer is implemented by targets that want to know when the peer is
// done with them: Dispose runs once per export, on its own goroutine,
// when the peer releases its last reference or the session ends, as the
// JavaScript library calls a target's Symbol.dispose.
type Disposer interface {
	Dispose()
}

// PropertyGetter is implemented by targets whose properties can be read by
// a pipelined path (promise.foo.bar) rather than only called.
type PropertyGetter interface {
	GetProperty(ctx context.Context, name string) (any, error)
}

// Methods is a Target made of named handlers.
type Methods map[string]Handler

// CallMethod runs the handler named name.
func (m Methods) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	h, ok := m[name]
	if !ok || h == nil || isPrototypeKey(name) {
		return nil, notAFunction(name)
	}
	return h(ctx, args)
}

// GetProperty returns the handler named name as a Func, as reading a method
// of a JavaScript object yields the function; an unknown name is undefined.
func (m Methods) GetProperty(ctx context.Context, name string) (any, error) {
	h, ok := m[name]
	if !ok || h == nil || isPrototypeKey(name) {
		return jsvalue.Undefined, nil
	}
	return Func(h), nil
}

// NotAFunction returns the error a JavaScript peer gives for calling a
// method that does not exist: TypeError: 'name' is not a function.
func NotAFunction(name string) *Error { return notAFunction(name) }

func notAFunction(name string) *Error {
	return &Error{Name: "TypeError", Message: fmt.Sprintf("'%s' is not a function.", name)}
}

// prototypeKeys are the Object.prototype member names of Node 20 plus
// "toJSON": a JavaScript receiver drops object keys with these names, and a
// path element naming one reads as undefined.
var prototypeKeys = map[string]bool{
	"constructor": true, "__defineGetter__": true, "__defineSetter__": true,
	"hasOwnProperty": true, "__lookupGetter__": true, "__lookupSetter__": true,
	"isPrototypeOf": true, "propertyIsEnumerable": true, "toString": true,
	"valueOf": true, "__proto__": true, "toLocaleString": true, "toJSON": true,
}

func isPrototypeKey(k string) bool { return prototypeKeys[k] }
