package sandbox

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/supolka/codemode-gateway/backends/local/internal/queue"
	"github.com/supolka/codemode-gateway/backends/local/internal/webplatform"
	"github.com/supolka/codemode-gateway/protocol"
)

// Bounds the sandbox holds every run to, beside the contract's own.
const (
	// MaxSourceBytes bounds the program and each module-map source, in
	// bytes, before anything parses them.
	MaxSourceBytes = 1 << 20
	// MaxNesting bounds how deep brackets nest in any source, checked
	// before parsing: goja's parser dies with a fatal Go stack overflow
	// on source nested a few hundred thousand deep.
	MaxNesting = 1000
	// MaxCallStackSize is goja's call-depth limit. Without one, recursion
	// that passes through a builtin overflows the Go stack and kills the
	// process; with one, the uninterruptible unwind of such recursion
	// grows with the square of the limit. Measured on 2 vCPUs through
	// Array.prototype.map, a getter and a Proxy trap: at most 60 ms at
	// 1000 frames, 200 ms at 2000, 450 ms at 3000.
	MaxCallStackSize = 1000
	// MaxConcurrentHostCalls bounds the tool calls of one run that are at
	// the host at once; later calls wait their turn in order. A program
	// that fires a million calls with Promise.all then costs a queue, not
	// a million goroutines.
	MaxConcurrentHostCalls = 64
	// MaxHostCallsInFlight bounds the tool calls of one run at the host
	// and waiting their turn together; one more rejects with
	// HostCallBacklogError's text, so the queue cannot grow without bound.
	MaxHostCallsInFlight = MaxConcurrentHostCalls + protocol.MaxWaitingHostCalls
)

// InternalErrorText is the message of the INTERNAL fault a run ends with
// when the sandbox itself broke (a Go panic inside the run): an invariant
// of the executor, not the program, so it goes to the calling application
// as a thrown fault, never to the model in the envelope.
const InternalErrorText = "The executor broke while running this program, through no fault the program can fix. Run it again."

// InternalFault is the fault of a run, or a retained session, during which
// the sandbox broke.
func InternalFault() error { return protocol.NewFault(protocol.CodeInternal, InternalErrorText) }

// StackOverflowText is the envelope error of a run that recursed past
// MaxCallStackSize frames. JavaScript cannot catch it.
const StackOverflowText = "Maximum call stack size exceeded"

//go:embed bootstrap.js
var bootstrapSource string

var bootstrapProgram = func() *goja.Program {
	prg, err := parseAndCompile("bootstrap.js", bootstrapSource, true)
	if err != nil {
		panic("sandbox: bootstrap.js does not compile: " + err.Error())
	}
	return prg
}()

// The values the run's interrupts carry, so the loop knows why goja stopped.
type (
	interruptTimeout struct{}
	interruptCancel  struct{}
	// interruptBroken: a host function of the sandbox panicked.
	interruptBroken struct{}
)

// session is the state of one run. Everything in it is touched only by the
// goroutine that called Run (the loop), except tasks and done.
type session struct {
	ctx  context.Context // cancelled when Run returns
	job  Job
	host Host
	vm   *goja.Runtime
	// gate orders this run with the others of its process (nil: alone);
	// inGate says the loop holds it.
	gate   Gate
	inGate bool

	tasks chan func() // host answers, queued back onto the loop
	done  chan struct{}
	// between is what work between a retained session's invocations spent
	// on its clocks, not yet billed (Retained.TakeBetween).
	between atomic.Int64
	// interruptedAt is when the runtime was interrupted (Unix nanoseconds),
	// zero while it runs on: the clock's timer and the context's end write
	// it from their own goroutines, and the guards' long loops read it
	// (halted) to stop where goja's interrupt cannot reach.
	interruptedAt atomic.Int64

	// clock is the clock of the current turn: the run's until the entry
	// settles, then the clock of a retained session's invocation in flight
	// (inv); nil between invocations.
	clock  *runClock
	inv    *pendingInvocation
	timers timerQueue
	open   int // host calls in flight, queued ones included
	// elsewhere counts the guest's own work running off the loop (a native
	// request): while any is in flight the run clock runs, host calls or not.
	elsewhere int
	// hostCalls admits MaxConcurrentHostCalls tool calls to the host at
	// once; the rest wait their turn, in the order they were made.
	hostCalls queue.Bounded[func()]

	modules   protocol.ModuleMap
	declared  []string
	instances map[string]*goja.Object

	// From bootstrap.js.
	start       goja.Callable
	callHandler goja.Callable
	makeError   goja.Callable
	messageOf   goja.Callable
	jsonParse   goja.Callable
	bytesOf     goja.Callable
	require     *goja.Object

	completed bool // the entry settled
	// granted: the entry settled to a fetch handler under RetainHandles;
	// the session outlives Run and serves invocations (retain.go).
	granted  bool
	handler  goja.Value
	platform *webplatform.Platform
	release  func() // ends the session: its context, clock and tasks
	result   protocol.ExecuteResult
	fatal    failure // why the run stopped before settling, when it did
	stopped  bool
	// broken says the sandbox itself broke: the run ends with an INTERNAL
	// fault instead of an envelope.
	broken bool

	console *protocol.ConsoleCapture
	// unguarded leaves goja's built-ins unwrapped (guards.go), for tests
	// that compare against them.
	unguarded bool
	// guards are its runtime's guards (nil: unguarded), kept here as long
	// as the runtime: the patched templates find them by the runtime.
	guards *guards
}

// prepare builds a fresh runtime with the whole sandbox scope installed:
// the part of a run that depends on nothing of the job, so that a worker can
// do it while it waits for one. A failure to install is kept and reported
// by the run that uses the session.
func prepare() *session { return prepareSession(guardsOff.Load()) }

// prepareSession is prepare, with goja's built-ins left unguarded when
// unguarded is set.
func prepareSession(unguarded bool) *session {
	s := &session{
		tasks:     make(chan func(), 16),
		done:      make(chan struct{}),
		instances: map[string]*goja.Object{},
		hostCalls: queue.New[func()](MaxConcurrentHostCalls, protocol.MaxWaitingHostCalls),
	}
	s.console = protocol.NewConsoleCapture(0)
	s.unguarded = unguarded
	s.vm = goja.New()
	s.vm.SetParserOptions(parser.WithDisableSourceMaps)
	s.vm.SetMaxCallStackSize(MaxCallStackSize)
	s.install()
	return s
}

// run executes job in the prepared session s, which it uses up.
func (s *session) run(parent context.Context, job Job, host Host) (*protocol.ExecuteResult, *Retained) {
	// What fails before the program runs (a source, a module, a provider)
	// is the program's own failure.
	fail := func(text string) (*protocol.ExecuteResult, *Retained) { return failed(thrown(text)), nil }
	// Compiling is work of the run's too: the gate is held from here until
	// the loop first waits, and again whenever it runs something. A
	// retained session's goroutine takes it over (handedOff).
	handedOff := false
	s.job = job
	// The run clock starts once the program is compiled; the gate sees it
	// from the first piece of work.
	clock := s.newClock(job.CountHostWaits)
	if s.gate = gateOf(host); s.gate != nil {
		if !s.gate.Enter(parent, clock) {
			return failed(causeOf(parent)), nil
		}
		s.inGate = true
		defer func() {
			if !handedOff {
				s.leave()
			}
		}()
	}
	if err := protocol.ValidateProviders(job.Providers); err != nil {
		return fail(err.Error())
	}
	modules, err := protocol.NormalizeModuleMap(job.Modules)
	if err != nil {
		return fail(err.Error())
	}
	if text := checkSource("program", job.Code); text != "" {
		return fail(text)
	}
	names := modules.Names()
	for _, name := range names {
		if m := modules[name]; m.Kind == protocol.KindJS || m.Kind == protocol.KindCJS {
			if text := checkSource("module "+strconv.Quote(name), m.Source); text != "" {
				return fail(text)
			}
		}
	}
	for _, p := range job.Providers {
		for _, src := range []string{p.Prelude, p.ProxySource} {
			if text := checkSource("provider "+strconv.Quote(p.Name), src); text != "" {
				return fail(text)
			}
		}
	}

	entry := compileEntry(buildEntry(job.Code, job.Providers))
	if entry.err != "" {
		return fail(entry.err)
	}
	if text := resolveStaticImports(entry.imports, modules, names); text != "" {
		return fail(text)
	}

	ctx, cancel := context.WithCancel(parent)
	s.ctx = ctx
	s.job = job
	s.host = host
	s.modules = modules
	s.declared = names

	s.clock = clock
	stopCancel := context.AfterFunc(parent, func() { s.interrupt(interruptCancel{}) })
	ih, _ := host.(InterruptHost)
	if ih != nil {
		ih.SetInterrupt(func() { s.interrupt(interruptCancel{}) })
	}
	s.release = func() {
		if ih != nil {
			ih.SetInterrupt(nil)
		}
		stopCancel()
		clock.disarm()
		cancel()
		close(s.done)
	}
	kept := false
	defer func() {
		if !kept {
			s.release()
		}
	}()

	if s.stopped { // the scope did not install
		return s.finish(), nil
	}
	s.configureWebPlatform()
	s.clock.resume()
	wrapper, err := s.vm.RunProgram(entry.program)
	if err != nil {
		s.stop(err)
		return s.finish(), nil
	}
	if _, err := s.start(goja.Undefined(), wrapper, s.require, s.vm.ToValue(job.RetainHandles)); err != nil {
		s.stop(err)
		return s.finish(), nil
	}
	s.loop(nil)
	res := s.finish()
	if !s.granted || s.stopped {
		return res, nil
	}
	kept = true
	s.leave()
	handedOff = true
	return res, s.retain()
}

// checkSource applies MaxSourceBytes and MaxNesting to one source and
// returns the envelope text when it fails either.
func checkSource(what, src string) string {
	if len(src) > MaxSourceBytes {
		return protocol.NewSourceTooLargeError(what, len(src), MaxSourceBytes).Error()
	}
	if line := maxNestingExceeded(src, MaxNesting); line > 0 {
		return protocol.NewSourceNestingError(what, MaxNesting, line).Error()
	}
	return ""
}

// install builds the sandbox scope in the fresh runtime: the guards of
// goja's unbounded built-ins (first, so that everything installed after
// captures the guarded ones), timers, the bootstrap's console,
// queueMicrotask and codec, the module loader and the web platform. A
// failure stops the session (s.stopped).
func (s *session) install() {
	g := s.vm.GlobalObject()
	// goja's own constructor for wrapped Go errors has no place here.
	_ = g.Delete("GoError")
	if err := s.installGuards(); err != nil {
		s.stop(err)
		return
	}
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"setTimeout":    s.setTimer(false),
		"setInterval":   s.setTimer(true),
		"clearTimeout":  s.clearTimer,
		"clearInterval": s.clearTimer,
	} {
		if err := g.Set(name, s.function(name, fn)); err != nil {
			s.stop(err)
			return
		}
	}
	host := s.vm.NewObject()
	natives := map[string]func(goja.FunctionCall) goja.Value{
		"capture":            s.capture,
		"settle":             s.settle,
		"grant":              s.grant,
		"uncaught":           s.uncaught,
		"dispatch":           s.dispatch,
		"encodeBase64Bytes":  s.encodeBase64,
		"decodeBase64Buffer": s.decodeBase64,
		"parseDispatchText":  s.parseDispatchText,
	}
	for name, fn := range natives {
		_ = host.Set(name, s.function(name, fn))
	}
	_ = host.Set("binaryTag", protocol.BinaryTag)
	fnv, err := s.vm.RunProgram(bootstrapProgram)
	if err != nil {
		s.stop(err)
		return
	}
	boot, _ := goja.AssertFunction(fnv)
	out, err := boot(goja.Undefined(), host)
	if err != nil {
		s.stop(err)
		return
	}
	obj := out.ToObject(s.vm)
	s.start, _ = goja.AssertFunction(obj.Get("start"))
	s.callHandler, _ = goja.AssertFunction(obj.Get("callHandler"))
	s.makeError, _ = goja.AssertFunction(obj.Get("makeError"))
	s.messageOf, _ = goja.AssertFunction(obj.Get("messageOf"))
	s.jsonParse, _ = goja.AssertFunction(obj.Get("jsonParse"))
	s.bytesOf, _ = goja.AssertFunction(obj.Get("bytesOf"))
	s.require = s.function("require", s.requireModule)
	if err := s.prepareWebPlatform(); err != nil {
		s.stop(err)
	}
}

// function makes a host function the guest can call. Its name is set
// explicitly (goja would otherwise name it after the Go symbol), and a Go
// panic inside it becomes a plain JavaScript Error instead of unwinding
// through goja, while goja's own throws (JavaScript exceptions, interrupts,
// stack overflows) pass.
func (s *session) function(name string, fn func(goja.FunctionCall) goja.Value) *goja.Object {
	obj := s.vm.ToValue(s.guard(fn)).ToObject(s.vm)
	_ = obj.DefineDataProperty("name", s.vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return obj
}

func (s *session) guard(fn func(goja.FunctionCall) goja.Value) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) (out goja.Value) {
		defer func() {
			if r := recover(); r != nil {
				switch r.(type) {
				case goja.Value, *goja.Exception, *goja.InterruptedError, *goja.StackOverflowError:
					panic(r)
				}
				// The sandbox broke: the interrupt ends the run before any
				// more JavaScript runs, with an INTERNAL fault; nothing of
				// it reaches the program.
				s.breakRun()
				out = goja.Undefined()
			}
		}()
		return fn(call)
	}
}

// breakRun marks the run broken and interrupts the runtime, so that no
// JavaScript runs after it and the run ends with an INTERNAL fault.
func (s *session) breakRun() {
	s.broken = true
	s.interrupt(interruptBroken{})
}

// interrupt records that the run was interrupted, then interrupts the
// runtime with v (one of the interrupt values). Any goroutine may call it.
func (s *session) interrupt(v any) {
	s.interruptedAt.CompareAndSwap(0, time.Now().UnixNano())
	s.vm.Interrupt(v)
}

// halted reports whether the runtime was interrupted and not cleared
// since: goja stops at its next instruction, and native work in progress
// (a guard's long loop) should stop too.
func (s *session) halted() bool { return s.interruptedAt.Load() != 0 }

// newError builds a plain Error with message text, through the Error
// constructor the bootstrap captured.
func (s *session) newError(text string) goja.Value {
	v, err := s.makeError(goja.Undefined(), s.vm.ToValue(text))
	if err != nil {
		panic(err)
	}
	return v
}

// stop ends the run because a call into the runtime failed in a way
// JavaScript could not catch: an interrupt, a stack overflow, or an
// exception nobody was left to catch (a timer callback's).
func (s *session) stop(err error) {
	if s.stopped {
		return
	}
	s.stopped = true
	var ex *goja.Exception
	if errors.As(err, &ex) {
		s.fatal = s.thrownFailure(ex.Value())
		return
	}
	s.fatal = s.uncatchable(err)
}

// uncatchable is the failure of an error JavaScript cannot catch: an
// interrupt or a stack overflow. Anything else means the sandbox broke:
// the run is marked so, and the failure is empty.
func (s *session) uncatchable(err error) failure {
	var ie *goja.InterruptedError
	var so *goja.StackOverflowError
	switch {
	case errors.As(err, &ie):
		// A run whose context ended (the memory watchdog's cancel) reports
		// that, even when the clock's interrupt came after it: the cancel
		// is what stopped it, however long the native call it was in took.
		switch ie.Value().(type) {
		case interruptBroken:
		case interruptTimeout:
			if s.ctx != nil && s.ctx.Err() != nil {
				return s.cancelled()
			}
			return s.timedOut()
		case interruptMemory:
			if s.ctx != nil && s.ctx.Err() != nil {
				return s.cancelled()
			}
			return failure{text: protocol.NewMemoryLimitError(s.job.MemoryLimitMB).Error(), kind: protocol.FailureMemory}
		default:
			return s.cancelled()
		}
	case errors.As(err, &so):
		return thrown(StackOverflowText)
	}
	s.broken = true
	return failure{}
}

// bound is the run's bound in milliseconds: Job.TimeoutMs, read as
// DefaultTimeout when it is not positive and held to MaxSupportedTimeout.
func (s *session) bound() int64 {
	switch b := s.job.TimeoutMs; {
	case b <= 0:
		return protocol.DefaultTimeout
	case b > protocol.MaxSupportedTimeout:
		return protocol.MaxSupportedTimeout
	default:
		return b
	}
}

// failure is how a run failed: the envelope's text, which the model
// reads, and its kind, which the layers above decide by.
type failure struct {
	text string
	kind protocol.FailureKind
}

// thrown is the failure of the program's own making whose text is text.
func thrown(text string) failure { return failure{text: text, kind: protocol.FailureThrown} }

// failed is the result envelope of a run that failed with f before it
// logged anything.
func failed(f failure) *protocol.ExecuteResult {
	return &protocol.ExecuteResult{Error: f.text, HasError: true, Failure: f.kind, Logs: []protocol.LogLine{}}
}

// timedOut is the failure of a run past its bound: the timeout text.
func (s *session) timedOut() failure {
	return failure{text: protocol.NewExecutionTimeoutError(s.bound()).Error(), kind: protocol.FailureTimeout}
}

// cancelled is the failure of a run whose context ended: the cause's
// text and kind (a MemoryLimitError from the worker's watchdog, say).
func (s *session) cancelled() failure { return causeOf(s.ctx) }

// causeOf is the failure that ctx's cause is.
func causeOf(ctx context.Context) failure {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = context.Canceled
	}
	return failure{text: cause.Error(), kind: protocol.FailureOf(cause)}
}

// thrownFailure is the failure of a thrown value, its text computed the
// way the bootstrap computes it for a rejection.
func (s *session) thrownFailure(v goja.Value) failure {
	if s.messageOf == nil || v == nil {
		s.broken = true
		return failure{}
	}
	out, err := s.messageOf(goja.Undefined(), v)
	if err != nil {
		// messageOf catches every exception: only an interrupt or a stack
		// overflow gets out of it.
		if isException(err) {
			s.broken = true
			return failure{}
		}
		return s.uncatchable(err)
	}
	return thrown(out.String())
}

// finish composes the result envelope.
func (s *session) finish() *protocol.ExecuteResult {
	res := s.result
	res.Logs = s.console.Lines()
	if s.granted && !s.stopped {
		res.ResultJSON, res.Error, res.HasError = "", "", false
		res.Handles = []string{HandleFetch}
	}
	if !s.completed || (s.granted && s.stopped) {
		res.ResultJSON = ""
		res.Handles = nil
		res.Error, res.Failure = s.fatal.text, s.fatal.kind
		res.HasError = true
		if res.Error == "" {
			// A run that stopped without saying why: nothing the envelope
			// could tell the program.
			s.broken = true
		}
	}
	if size := protocol.RunAnswerWireSize(&res); res.HasError && size > protocol.PayloadLimit {
		res.Error = protocol.NewPayloadTooLargeError(protocol.PartRunAnswer, size, protocol.PayloadLimit).Error()
		res.Failure = protocol.FailurePayload
	}
	if s.clock != nil {
		res.RunClock = s.clock.elapsed()
	}
	if s.platform != nil {
		res.OutboundRequests = s.platform.Requests()
		res.NativeRequests = s.platform.NativeRequests()
	}
	return &res
}

// settle records how the entry settled: settle(true, json) with the
// result's codec text (undefined for no value), settle(false, text) with the
// thrown message.
func (s *session) settle(call goja.FunctionCall) goja.Value {
	if s.completed || s.stopped {
		return goja.Undefined()
	}
	s.completed = true
	ok := call.Argument(0).ToBoolean()
	v := call.Argument(1)
	if ok {
		if goja.IsUndefined(v) {
			// JSON.stringify gives undefined for undefined, functions and
			// symbols: the run produced no value.
			return goja.Undefined()
		}
		text := v.String()
		if size := protocol.RunAnswerWireSize(&protocol.ExecuteResult{ResultJSON: text}); size > protocol.PayloadLimit {
			s.result.HasError = true
			s.result.Error = protocol.NewPayloadTooLargeError(protocol.PartRunAnswer, size, protocol.PayloadLimit).Error()
			s.result.Failure = protocol.FailurePayload
			return goja.Undefined()
		}
		s.result.ResultJSON = text
		return goja.Undefined()
	}
	s.result.HasError = true
	s.result.Error = v.String()
	s.result.Failure = protocol.FailureThrown
	return goja.Undefined()
}

// uncaught ends the run with the message of an exception nobody could
// catch (a queueMicrotask callback's), interrupting the job drain it was
// thrown in.
func (s *session) uncaught(call goja.FunctionCall) goja.Value {
	if s.completed || s.stopped {
		// After the run settled (a retained session's invocations and
		// timers) nothing is left to report it to: it is discarded, as
		// console output is.
		return goja.Undefined()
	}
	s.stopped = true
	s.fatal = thrown(call.Argument(0).String())
	s.interrupt(interruptCancel{})
	return goja.Undefined()
}

// capture records one console line in the run's protocol.ConsoleCapture,
// the one implementation of the console bound.
func (s *session) capture(call goja.FunctionCall) goja.Value {
	// A retained session's logs were delivered with the grant.
	if !s.granted {
		s.console.Add(protocol.LogLevel(call.Argument(0).String()), call.Argument(1).String())
	}
	return goja.Undefined()
}
