package webplatform

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/supolka/codemode-gateway/backends/local/internal/queue"
	"github.com/supolka/codemode-gateway/protocol"
)

// Loop is what the web platform needs from the event loop of the run that
// owns the runtime.
type Loop interface {
	// Post runs fn on the loop goroutine, the only one that may touch the
	// runtime. It may be called from any goroutine, and must return (and
	// drop fn) once the run has ended rather than block.
	Post(fn func())
	// HostWait opens a wait on the caller's outbound function: while one
	// is open and nothing else runs, the run clock stops. done closes it.
	// Both are called on the loop goroutine, done exactly once.
	HostWait() (done func())
	// GuestWork opens work the guest asked for that runs off the loop (a
	// native request): while one is open the run clock runs, host waits
	// open or not. done closes it. Both are called on the loop goroutine,
	// done exactly once.
	GuestWork() (done func())
	// OffLoop starts work the run needs done on the calling goroutine, off
	// the loop (a native request on its own goroutine), so that its process
	// charges the CPU and the heap it takes to the run; done ends it, on
	// the same goroutine. Any goroutine may call it.
	OffLoop() (done func())
	// Context is the run's context, cancelled when the run ends.
	Context() context.Context
	// Stop ends the run with an error a call into the runtime returned
	// that JavaScript cannot catch (an interrupt, a stack overflow).
	Stop(err error)
}

// StubFunc performs one request of the stub mode: the caller's outbound
// function, as the serialized exchange.
type StubFunc func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error)

// Config is one run's web platform settings.
type Config struct {
	// Mode is the run's outbound setting. An empty or unknown mode reads
	// as disabled.
	Mode protocol.OutboundMode
	// Stub receives every request in the stub mode; nil then behaves as
	// disabled.
	Stub StubFunc
	// Native are the operator's settings for the native mode.
	Native NativeOptions
}

// MaxConcurrentFetches bounds the requests of one run in flight at once;
// later ones wait their turn in order.
const MaxConcurrentFetches = 16

// MaxFetchesInFlight bounds the requests of one run started and not yet
// settled, running or waiting their turn; one more rejects with
// HostCallBacklogError's text.
const MaxFetchesInFlight = MaxConcurrentFetches + protocol.MaxWaitingHostCalls

//go:embed platform.js
var platformSource string

var platformProgram = func() *goja.Program {
	ast, err := parser.ParseFile(nil, "webplatform.js", platformSource, 0, parser.WithDisableSourceMaps)
	if err != nil {
		panic("webplatform: platform.js does not parse: " + err.Error())
	}
	prg, err := goja.CompileAST(ast, true)
	if err != nil {
		panic("webplatform: platform.js does not compile: " + err.Error())
	}
	return prg
}()

// platform is the Go side of one runtime's web platform. Its fields are
// touched only on the loop goroutine.
type platform struct {
	vm     *goja.Runtime
	loop   Loop
	cfg    Config
	native *nativeClient

	// fetches admits MaxConcurrentFetches requests at once; the rest wait
	// their turn, up to protocol.MaxWaitingHostCalls.
	fetches queue.Bounded[func()]
	sent    int // requests that left, in either mode
	// performed are the first native requests, for the run's spans.
	performed []protocol.NativeRequest
	// derivations runs the run's PBKDF2 derivations one at a time; the
	// rest wait their turn (each is a promise the guest holds).
	derivations queue.Bounded[func()]
}

// Platform is the Go side of one runtime's installed web platform: the
// exchange a retained fetch handler needs (Request and Response).
type Platform struct {
	p                 *platform
	vm                *goja.Runtime
	makeRequest       goja.Callable
	serializeResponse goja.Callable
}

// Requests is how many requests the run's fetch sent out so far (in the
// stub or the native mode), past the checks that refuse one before it
// leaves. Call it on the loop goroutine.
func (pl *Platform) Requests() int { return pl.p.sent }

// NativeRequests are the first protocol.MaxTracedRequests requests the
// native mode performed, for the execution's spans. Call it on the loop
// goroutine.
func (pl *Platform) NativeRequests() []protocol.NativeRequest { return pl.p.performed }

// Install defines the web platform's globals in vm (see the package
// documentation for the list). Call it on the loop goroutine, once, after
// the runtime's timers are installed (AbortSignal.timeout uses the
// setTimeout it finds then) and before guest code runs.
func Install(vm *goja.Runtime, loop Loop, cfg Config) (*Platform, error) {
	pl, err := Prepare(vm, loop)
	if err != nil {
		return nil, err
	}
	pl.Configure(cfg)
	return pl, nil
}

// Prepare is the first half of Install: it defines the globals but leaves
// fetch unconfigured (it behaves as disabled) until Configure. It needs
// nothing of the run, so a worker can build a runtime ahead of the job that
// will use it; loop.Context is not called before Configure.
func Prepare(vm *goja.Runtime, loop Loop) (*Platform, error) {
	p := &platform{vm: vm, loop: loop, fetches: queue.New[func()](MaxConcurrentFetches, protocol.MaxWaitingHostCalls),
		derivations: queue.New[func()](1, math.MaxInt)}
	host := vm.NewObject()
	if err := host.Set("native", p.dispatcher()); err != nil {
		return nil, err
	}
	texts := vm.NewObject()
	for k, v := range map[string]string{
		"compressionStream":   protocol.NewCompressionAbsentError("CompressionStream").Error(),
		"decompressionStream": protocol.NewCompressionAbsentError("DecompressionStream").Error(),
		"resize":              protocol.NewBufferGrowthAbsentError("ArrayBuffer.prototype.resize").Error(),
		"grow":                protocol.NewBufferGrowthAbsentError("SharedArrayBuffer.prototype.grow").Error(),
		"caches":              protocol.NewCacheStorageAbsentError().Error(),
	} {
		_ = texts.Set(k, v)
	}
	_ = host.Set("texts", texts)
	var publish goja.Callable // set once platform.js returns it
	getters, table := p.defineLazyGlobals(&publish)
	_ = host.Set("getters", getters)
	_ = host.Set("lazyGlobals", table)
	fnv, err := vm.RunProgram(platformProgram)
	if err != nil {
		return nil, err
	}
	boot, ok := goja.AssertFunction(fnv)
	if !ok {
		return nil, fmt.Errorf("webplatform: platform.js is not a function")
	}
	out, err := boot(goja.Undefined(), host)
	if err != nil {
		return nil, err
	}
	obj := out.ToObject(vm)
	publish, _ = goja.AssertFunction(obj.Get("publish"))
	pl := &Platform{p: p, vm: vm}
	pl.makeRequest, _ = goja.AssertFunction(obj.Get("makeRequest"))
	pl.serializeResponse, _ = goja.AssertFunction(obj.Get("serializeResponse"))
	return pl, nil
}

// Configure gives a prepared platform the run's outbound setting. Call it
// once, on the loop goroutine, before guest code runs and once
// loop.Context is the run's: the native client closes with it.
func (pl *Platform) Configure(cfg Config) {
	p := pl.p
	p.cfg = cfg
	if cfg.Mode == protocol.OutboundNative && !cfg.Native.Vetoed {
		p.native = newNativeClient(cfg.Native)
		context.AfterFunc(p.loop.Context(), p.native.close)
	}
}

// lazyGlobals are the globals published on first touch, by the section of
// platform.js that builds them.
var lazyGlobals = []struct {
	section string
	names   []string
}{
	{"dom", []string{"DOMException", "Event", "EventTarget", "AbortController", "AbortSignal"}},
	{"encoding", []string{"TextEncoder", "TextDecoder", "atob", "btoa"}},
	{"url", []string{"URL", "URLSearchParams"}},
	{"fetchApi", []string{"Headers", "Request", "Response", "fetch", "Blob", "File", "FormData"}},
	{"cloneSection", []string{"structuredClone"}},
	{"cryptoSection", []string{"crypto", "Crypto", "SubtleCrypto", "CryptoKey"}},
	{"absences", []string{"CompressionStream", "DecompressionStream", "SharedArrayBuffer", "caches"}},
}

// enumerableGlobals are the names Web IDL makes enumerable on the global:
// operations and attributes; interface objects are not.
var enumerableGlobals = map[string]bool{"fetch": true, "atob": true, "btoa": true, "structuredClone": true, "crypto": true, "caches": true}

// defineLazyGlobals defines every name of lazyGlobals on the global object
// as an accessor: one Go function serves as getter (no argument: publish the
// section, through *publish, and answer the value) and setter (one
// argument: the program's value becomes a plain data property). It returns
// the accessors by name and the table, for platform.js.
func (p *platform) defineLazyGlobals(publish *goja.Callable) (*goja.Object, *goja.Object) {
	vm := p.vm
	g := vm.GlobalObject()
	getters := vm.NewObject()
	table := make([]any, 0, len(lazyGlobals))
	for _, sec := range lazyGlobals {
		names := make([]any, len(sec.names))
		for i, name := range sec.names {
			names[i] = name
			section := vm.ToValue(sec.section)
			key := vm.ToValue(name)
			enumerable := goja.FLAG_FALSE
			if enumerableGlobals[name] {
				enumerable = goja.FLAG_TRUE
			}
			name := name
			acc := vm.ToValue(func(c goja.FunctionCall) goja.Value {
				if len(c.Arguments) > 0 {
					_ = g.DefineDataProperty(name, c.Arguments[0], goja.FLAG_TRUE, goja.FLAG_TRUE, enumerable)
					return goja.Undefined()
				}
				if *publish == nil {
					return goja.Undefined()
				}
				v, err := (*publish)(goja.Undefined(), section, key)
				if err != nil {
					panic(err)
				}
				return v
			}).ToObject(vm)
			// goja would name it after the Go symbol.
			_ = acc.DefineDataProperty("name", key, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
			_ = getters.Set(name, acc)
			_ = g.DefineAccessorProperty(name, acc, acc, goja.FLAG_TRUE, enumerable)
		}
		table = append(table, vm.NewArray(sec.section, vm.NewArray(names...)))
	}
	return getters, vm.NewArray(table...)
}

// dispatcher is the one native the glue calls, native(op, …): goja spends
// a few dozen allocations on every function object, and this runs for every
// run, so the ops share one. A Go panic inside an op becomes a plain
// TypeError instead of unwinding through goja, while goja's own throws
// (JavaScript exceptions, interrupts) pass.
func (p *platform) dispatcher() goja.Value {
	ops := p.natives()
	return p.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		name := call.Argument(0).String()
		fn, ok := ops[name]
		if !ok {
			panic(p.vm.NewTypeError("unknown native " + strconv.Quote(name)))
		}
		defer func() {
			if r := recover(); r != nil {
				switch r.(type) {
				case goja.Value, *goja.Exception, *goja.InterruptedError, *goja.StackOverflowError:
					panic(r)
				}
				panic(p.vm.NewTypeError("internal error in " + name))
			}
		}()
		var args []goja.Value
		if len(call.Arguments) > 1 {
			args = call.Arguments[1:]
		}
		return fn(goja.FunctionCall{This: call.This, Arguments: args})
	})
}

// bytesArg reads an ArrayBuffer argument (the glue always passes a whole,
// freshly copied buffer). A missing one is nil.
func (p *platform) bytesArg(v goja.Value) []byte {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil
	}
	ab, ok := v.Export().(goja.ArrayBuffer)
	if !ok {
		panic(p.vm.NewTypeError("expected an ArrayBuffer"))
	}
	return ab.Bytes()
}

// byteRange is the part of an ArrayBuffer argument from offset for length
// bytes, not a copy: a native that writes into it writes into the caller's
// buffer.
func (p *platform) byteRange(buf, offset, length goja.Value) []byte {
	ab, ok := buf.Export().(goja.ArrayBuffer)
	if !ok {
		panic(p.vm.NewTypeError("expected an ArrayBuffer"))
	}
	b := ab.Bytes()
	off, n := offset.ToInteger(), length.ToInteger()
	if off < 0 || n < 0 || off > int64(len(b)) || n > int64(len(b))-off {
		panic(p.vm.NewTypeError("byte range outside the buffer"))
	}
	return b[off : off+n]
}

// dataAt is byteRange of the arguments i, i+1 and i+2 of c.
func (p *platform) dataAt(c goja.FunctionCall, i int) []byte {
	return p.byteRange(c.Argument(i), c.Argument(i+1), c.Argument(i+2))
}

// arrayBufferType is what goja exports an ArrayBuffer as.
var arrayBufferType = reflect.TypeOf(goja.ArrayBuffer{})

func (p *platform) buffer(b []byte) goja.Value {
	if b == nil {
		b = []byte{}
	}
	return p.vm.ToValue(p.vm.NewArrayBuffer(b))
}

func (p *platform) strings(ss []string) goja.Value {
	items := make([]any, len(ss))
	for i, s := range ss {
		items[i] = s
	}
	return p.vm.NewArray(items...)
}

func (p *platform) natives() map[string]func(goja.FunctionCall) goja.Value {
	vm := p.vm
	return map[string]func(goja.FunctionCall) goja.Value{
		// urlParse(input, base?) → parts, or null when invalid.
		"urlParse": func(c goja.FunctionCall) goja.Value {
			var base *webURL
			if b := c.Argument(1); !goja.IsUndefined(b) {
				bu, err := parseURL(b.String(), nil)
				if err != nil {
					return goja.Null()
				}
				base = bu
			}
			u, err := parseURL(c.Argument(0).String(), base)
			if err != nil {
				return goja.Null()
			}
			return p.strings(u.parts())
		},
		// urlSet(href, field, value) → parts, or null to leave it as it is.
		"urlSet": func(c goja.FunctionCall) goja.Value {
			u := setURLPart(c.Argument(0).String(), c.Argument(1).String(), c.Argument(2).String())
			if u == nil {
				return goja.Null()
			}
			return p.strings(u.parts())
		},
		// formParse(text) → [name, value, name, value, …].
		"formParse": func(c goja.FunctionCall) goja.Value {
			pairs := parseForm(c.Argument(0).String())
			flat := make([]string, 0, 2*len(pairs))
			for _, pr := range pairs {
				flat = append(flat, pr[0], pr[1])
			}
			return p.strings(flat)
		},
		// formSerialize([name, value, …]) → text.
		"formSerialize": func(c goja.FunctionCall) goja.Value {
			flat := p.stringList(c.Argument(0))
			pairs := make([][2]string, len(flat)/2)
			for i := range pairs {
				pairs[i] = [2]string{flat[2*i], flat[2*i+1]}
			}
			return vm.ToValue(serializeForm(pairs))
		},
		"utf8Encode": func(c goja.FunctionCall) goja.Value {
			return p.buffer([]byte(c.Argument(0).String()))
		},
		// utf8EncodeInto(text, buffer, offset, length) → [read, written].
		"utf8EncodeInto": func(c goja.FunctionCall) goja.Value {
			dst := p.byteRange(c.Argument(1), c.Argument(2), c.Argument(3))
			r, w := encodeUTF8Into(c.Argument(0).String(), dst)
			return vm.NewArray(r, w)
		},
		// utf8Decode(buffer, fatal, stream, encoding?) → [text, consumed],
		// or null when fatal and the bytes do not decode. encoding is
		// "utf-16le", "windows-1252" or (absent) UTF-8.
		"utf8Decode": func(c goja.FunctionCall) goja.Value {
			var s string
			var n int
			ok := true
			b, fatal, stream := p.bytesArg(c.Argument(0)), c.Argument(1).ToBoolean(), c.Argument(2).ToBoolean()
			switch c.Argument(3).String() {
			case "utf-16le":
				s, n, ok = decodeUTF16LE(b, fatal, stream)
			case "windows-1252":
				s, n = decodeWindows1252(b), len(b)
			default:
				s, n, ok = decodeUTF8(b, fatal, stream)
			}
			if !ok {
				return goja.Null()
			}
			return vm.NewArray(s, n)
		},
		// btoa(latin1 text) → base64; the glue checked every code unit.
		"btoa": func(c goja.FunctionCall) goja.Value {
			return vm.ToValue(encodeBase64(latin1Bytes(c.Argument(0).String())))
		},
		// atob(text) → latin1 text, or null where atob throws.
		"atob": func(c goja.FunctionCall) goja.Value {
			b, ok := forgivingBase64Decode(c.Argument(0).String())
			if !ok {
				return goja.Null()
			}
			return vm.ToValue(latin1String(b))
		},
		// randomFill(buffer, offset, length) fills a byte range.
		"randomFill": func(c goja.FunctionCall) goja.Value {
			dst := p.byteRange(c.Argument(0), c.Argument(1), c.Argument(2))
			copy(dst, randomBytes(len(dst)))
			return goja.Undefined()
		},
		"randomBytes": func(c goja.FunctionCall) goja.Value {
			n := c.Argument(0).ToInteger()
			if n < 0 || n > 1<<16 {
				panic(vm.NewTypeError("byte count out of range"))
			}
			return p.buffer(randomBytes(int(n)))
		},
		"randomUUID": func(goja.FunctionCall) goja.Value {
			b := randomBytes(16)
			b[6] = b[6]&0x0f | 0x40
			b[8] = b[8]&0x3f | 0x80
			return vm.ToValue(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
		},
		// isArrayBuffer(value) → boolean, without throwing.
		"isArrayBuffer": func(c goja.FunctionCall) goja.Value {
			obj, ok := c.Argument(0).(*goja.Object)
			return vm.ToValue(ok && obj.ExportType() == arrayBufferType)
		},
		// The data of digest, HMAC and AES-GCM comes as buffer, offset,
		// length (dataAt): the bytes in place, not a copy, read before the
		// native returns.

		// digest(hash, data…) → ArrayBuffer, or null for an unknown hash.
		"digest": func(c goja.FunctionCall) goja.Value {
			d, ok := digest(c.Argument(0).String(), p.dataAt(c, 1))
			if !ok {
				return goja.Null()
			}
			return p.buffer(d)
		},
		// hmacSign(hash, key, data…) → ArrayBuffer.
		"hmacSign": func(c goja.FunctionCall) goja.Value {
			d, ok := hmacSign(c.Argument(0).String(), p.bytesArg(c.Argument(1)), p.dataAt(c, 2))
			if !ok {
				return goja.Null()
			}
			return p.buffer(d)
		},
		// hmacVerify(hash, key, signature, data…) → boolean.
		"hmacVerify": func(c goja.FunctionCall) goja.Value {
			return vm.ToValue(hmacVerify(c.Argument(0).String(), p.bytesArg(c.Argument(1)),
				p.bytesArg(c.Argument(2)), p.dataAt(c, 3)))
		},
		// aesGcm(seal, key, iv, aad, tagBytes, data…) → ArrayBuffer, or null.
		"aesGcm": func(c goja.FunctionCall) goja.Value {
			out, ok := aesGCM(c.Argument(0).ToBoolean(), p.bytesArg(c.Argument(1)), p.bytesArg(c.Argument(2)),
				p.bytesArg(c.Argument(3)), p.dataAt(c, 5), int(c.Argument(4).ToInteger()))
			if !ok {
				return goja.Null()
			}
			return p.buffer(out)
		},
		// hkdf(hash, key, salt, info, bytes) → ArrayBuffer, or null when
		// the length is past what HKDF derives.
		"hkdf": func(c goja.FunctionCall) goja.Value {
			out, ok := hkdfKey(c.Argument(0).String(), p.bytesArg(c.Argument(1)), p.bytesArg(c.Argument(2)),
				p.bytesArg(c.Argument(3)), int(c.Argument(4).ToInteger()))
			if !ok {
				return goja.Null()
			}
			return p.buffer(out)
		},
		"pbkdf2": p.pbkdf2,
		"asym":   p.asym,
		"fetch":  p.fetch,
	}
}

// asym is the one native behind ECDSA P-256 and Ed25519 (see
// asymmetric.go): asym(op, …) with ArrayBuffer arguments. It answers null
// where the operation fails.
func (p *platform) asym(c goja.FunctionCall) goja.Value {
	arg := func(i int) []byte { return p.bytesArg(c.Argument(i)) }
	maybe := func(b []byte, ok bool) goja.Value {
		if !ok {
			return goja.Null()
		}
		return p.buffer(b)
	}
	pair := func(a, b []byte) goja.Value {
		if a == nil || b == nil {
			panic(p.vm.NewTypeError("key generation failed"))
		}
		return p.vm.NewArray(p.buffer(a), p.buffer(b))
	}
	switch c.Argument(0).String() {
	case "ecGenerate":
		return pair(ecGenerate())
	case "edGenerate":
		return pair(edGenerate())
	case "ecPublicOf":
		return maybe(ecPublicOf(arg(1)))
	case "edPublicOf":
		return maybe(edPublicOf(arg(1)))
	case "ecValid":
		return p.vm.ToValue(ecValidPublic(arg(1)))
	case "ecSign":
		return maybe(ecSign(arg(1), c.Argument(2).String(), arg(3)))
	case "ecVerify":
		return p.vm.ToValue(ecVerify(arg(1), c.Argument(2).String(), arg(3), arg(4)))
	case "edSign":
		return maybe(edSign(arg(1), arg(2)))
	case "edVerify":
		return p.vm.ToValue(edVerify(arg(1), arg(2), arg(3)))
	case "pkcs8":
		kind, priv, pub, ok := parsePKCS8(arg(1))
		if !ok {
			return goja.Null()
		}
		return p.vm.NewArray(kind, p.buffer(priv), p.buffer(pub))
	case "spki":
		kind, pub, ok := parseSPKI(arg(1))
		if !ok {
			return goja.Null()
		}
		return p.vm.NewArray(kind, p.buffer(pub))
	case "toPKCS8":
		return maybe(marshalPKCS8(c.Argument(1).String(), arg(2)))
	case "toSPKI":
		return maybe(marshalSPKI(c.Argument(1).String(), arg(2)))
	}
	panic(p.vm.NewTypeError("unknown operation"))
}

// stringList reads a JS array of strings.
func (p *platform) stringList(v goja.Value) []string {
	obj, ok := v.(*goja.Object)
	if !ok {
		panic(p.vm.NewTypeError("expected an array"))
	}
	n := obj.Get("length").ToInteger()
	if n < 0 || n > 1<<24 {
		panic(p.vm.NewTypeError("array length out of range"))
	}
	out := make([]string, n)
	for i := range out {
		out[i] = obj.Get(strconv.Itoa(i)).String()
	}
	return out
}
