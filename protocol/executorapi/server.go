package executorapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// DefaultResponseLimit bounds, in bytes of its JSON form, each result
// envelope and handle response a server sends: capnweb's default message
// ceiling (1 MiB) less 64 KiB for the message around it. A run that stays
// inside every bound of the contract answers far below it.
const DefaultResponseLimit = 1<<20 - 64<<10

// ServerOptions configures a Server.
type ServerOptions struct {
	// ResponseLimit bounds each result envelope and handle response;
	// DefaultResponseLimit when 0. Above it the call fails with
	// RESPONSE_TOO_LARGE.
	ResponseLimit int
	// AllowBeforeHandshake serves calls made before protocolVersion().
	// By default they are refused with PROTOCOL_MISMATCH.
	AllowBeforeHandshake bool
	// Session configures the capnweb sessions ServeHTTP accepts.
	Session capnweb.Options
	// Tracing makes spans of connections, executions, tool calls, outbound
	// requests and handle invocations; nil makes none.
	Tracing *telemetry.Tracing
}

// Server exposes a protocol.Executor as the contract's ExecutorApi. Handles
// are keyed on the executor, not on the connection: any connection to the
// same Server may invoke the handles another was granted.
type Server struct {
	exec protocol.Executor
	opts ServerOptions

	mu sync.Mutex
	// kept holds the caller's stubs each retained execution keeps (its
	// outbound function in the stub mode, its handlesLifetime), released
	// when its handles close or its session ends.
	kept map[string]*keptStubs
	// turns orders the invocations of each execution (see invokeOrder).
	turns invokeOrder
}

// NewServer returns a Server for exec.
func NewServer(exec protocol.Executor, opts ServerOptions) *Server {
	if opts.ResponseLimit <= 0 {
		opts.ResponseLimit = DefaultResponseLimit
	}
	if opts.Session.Memory == nil {
		opts.Session.Memory = capnweb.NewMemoryBudget(DefaultWireMemory)
	}
	return &Server{exec: exec, opts: opts, kept: map[string]*keptStubs{}}
}

// Target returns the main object for one new connection.
func (s *Server) Target() capnweb.Target {
	return &connection{srv: s}
}

// ServeHTTP upgrades the request to a WebSocket and serves ExecutorApi on
// it until the session ends.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	opts := SessionOptions(s.opts.Session)
	if opts.BaseContext == nil {
		opts.BaseContext = r.Context()
	}
	var span trace.Span
	opts.BaseContext, span = s.connectionContext(opts.BaseContext, r)
	defer span.End()
	sess, err := capnweb.Accept(w, r, s.Target(), opts)
	if err != nil {
		return // Accept has written the HTTP error
	}
	<-sess.Done()
}

// DefaultWireMemory bounds what a Server's sessions hold together for
// their callers (capnweb.MemoryBudget) when ServerOptions.Session sets no
// budget.
const DefaultWireMemory = 512 << 20

// SessionOptions are base with what a session serving Target needs: plain
// objects decoded in the order the caller wrote them, so that a json
// module's value keeps its key order, and errors sent with their fault
// codes (ErrorProps).
func SessionOptions(base capnweb.Options) capnweb.Options {
	base.KeepObjectOrder = true
	base.ErrorProps = ErrorProps
	return base
}

// Close releases every kept stub. It does not close the executor.
func (s *Server) Close() error {
	s.mu.Lock()
	kept := s.kept
	s.kept = map[string]*keptStubs{}
	s.mu.Unlock()
	for _, k := range kept {
		k.release()
	}
	return nil
}

func (s *Server) keep(executionID string, k *keptStubs) {
	s.mu.Lock()
	s.kept[executionID] = k
	s.mu.Unlock()
	// The duplicates are references into their session and go with it.
	go func() {
		<-k.session().Done()
		s.drop(executionID, k)
	}()
}

// drop releases the stubs kept for executionID (only k, when k is not
// nil, so that a later grant under the same id is left alone).
func (s *Server) drop(executionID string, k *keptStubs) {
	s.mu.Lock()
	cur, ok := s.kept[executionID]
	if ok && (k == nil || cur == k) {
		delete(s.kept, executionID)
	}
	s.mu.Unlock()
	if ok && (k == nil || cur == k) {
		cur.release()
	}
}

// connection is the main object of one connection.
type connection struct {
	srv        *Server
	handshaken atomic.Bool
}

func (c *connection) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	switch name {
	case "protocolVersion":
		c.handshaken.Store(true)
		return protocol.ProtocolVersion, nil
	case methodExtensions:
		return serverExtensions(), nil
	}
	switch name {
	case "execute", "invokeHandle", "closeHandles":
	default:
		return nil, capnweb.NotAFunction(name)
	}
	// An invocation takes its place behind the earlier ones of its
	// execution while it still holds the connection's delivery turn, so
	// pipelined invocations keep the order they arrived in.
	var turn invokeTurn
	if name == "invokeHandle" {
		if id, ok := arg(args, 0).(string); ok {
			turn = c.srv.turns.take(id)
			defer turn.done()
		}
	}
	// An execution holds its call for the whole run; the connection's next
	// call must not wait for it.
	capnweb.Detach(ctx)
	if !c.handshaken.Load() && !c.srv.opts.AllowBeforeHandshake {
		return nil, protocolMismatch("call protocolVersion() before %s: this server speaks executor protocol %d", name, protocol.ProtocolVersion)
	}
	switch name {
	case "execute":
		return c.srv.execute(ctx, args)
	case "invokeHandle":
		if err := turn.wait(ctx); err != nil {
			return nil, err
		}
		return c.srv.invokeHandle(ctx, args)
	default:
		return c.srv.closeHandles(ctx, args)
	}
}

func arg(args []any, i int) any {
	if i < len(args) {
		return args[i]
	}
	return jsvalue.Undefined
}

func (s *Server) execute(ctx context.Context, args []any) (_ any, err error) {
	code, ok := arg(args, 0).(string)
	if !ok {
		return nil, shapeError("execute: code must be a string")
	}
	tc, err := traceContextOf("execute", arg(args, 2))
	if err != nil {
		return nil, err
	}
	ctx, span := s.opts.Tracing.StartCall(ctx, telemetry.SpanExecute, tc, s.opts.Tracing.CodeAttributes(code)...)
	defer func() { telemetry.EndCall(span, err) }()
	req := &protocol.ExecuteRequest{Code: code}
	providers, err := providersFromWire(arg(args, 1))
	if err != nil {
		return nil, err
	}
	req.Providers = providers
	if err := applyOptions(req, arg(args, 2)); err != nil {
		var te *capnweb.Error
		if errors.As(err, &te) {
			return nil, err
		}
		// A module map the rules refuse is a declared failure: it goes to
		// the model in the envelope, as the local executor reports it.
		return protocol.ResultMessageOf(&protocol.ExecuteResult{Error: err.Error(), HasError: true, Failure: protocol.FailureOf(err)}).Object(), nil
	}
	switch d := arg(args, 3).(type) {
	case *capnweb.Stub:
		req.Dispatch = s.tracedDispatch(span, stubDispatch(d))
	default:
		if !isAbsent(d) {
			return nil, shapeError("execute: dispatch must be a function or null")
		}
	}
	lifetime, err := lifetimeOf(arg(args, 2))
	if err != nil {
		return nil, err
	}
	mode, _ := arg(args, 4).(string)
	// kept is what the execution keeps of the caller's until its handles
	// close; nil when it keeps nothing.
	var kept *keptStubs
	switch protocol.OutboundMode(mode) {
	case protocol.OutboundNative:
	case protocol.OutboundDisabled:
		req.Outbound = protocol.NoOutbound()
	case protocol.OutboundStub:
		st, ok := arg(args, 5).(*capnweb.Stub)
		if !ok {
			return nil, protocolMismatch("execute: outboundMode is 'stub' but no outbound function came with it")
		}
		if req.RetainHandles {
			// A retained execution keeps fetching through the caller after
			// this call returns, so the stub must outlive it, until the
			// handles close, however they close.
			st = st.Dup()
			kept = &keptStubs{}
			kept.add(st)
		}
		req.Outbound = protocol.OutboundVia(s.tracedOutbound(span, stubOutbound(st)))
	default:
		return nil, protocolMismatch("execute: unknown outboundMode %q; this server speaks 'native', 'stub' and 'disabled'", mode)
	}
	if lifetime != nil && req.RetainHandles {
		// The caller learns that the handles closed from its release.
		if kept == nil {
			kept = &keptStubs{}
		}
		kept.add(lifetime.Dup())
	}
	var policy protocol.Policy
	// granted, made only for an execution that keeps something, is
	// closed once execute knows the id it keeps the stubs under, so that
	// a close that comes first still finds the entry.
	var granted *grant
	if kept != nil {
		granted = &grant{ready: make(chan struct{})}
		defer close(granted.ready)
		// (Release is idempotent; a close that beats keep leaves a
		// released entry that goes with the session.)
		policy.HandlesClosed = func(string) {
			// The table is keyed by the id this server answered with,
			// whatever id the executor names.
			<-granted.ready
			if granted.id != "" {
				s.drop(granted.id, kept)
			}
			kept.release()
		}
	}

	if span.IsRecording() {
		span.SetAttributes(telemetry.BytesIn.Int(requestBytes(req)))
	}
	res, err := s.run(ctx, req, policy)
	if err != nil {
		kept.release()
		return nil, err
	}
	// The message's object is built once: measured, then sent.
	obj := protocol.ResultMessageOf(res).Object()
	size, err := protocol.DispatchSize(obj)
	if span.IsRecording() {
		span.SetAttributes(telemetry.BytesOut.Int(size))
	}
	telemetry.RecordUsage(span, res.Usage)
	if err != nil || size > s.opts.ResponseLimit {
		kept.release()
		if res.ExecutionID != "" {
			_ = s.exec.CloseHandles(context.WithoutCancel(ctx), res.ExecutionID)
		}
		if err != nil {
			return nil, protocol.Faultf(protocol.CodeInternal, err)
		}
		return nil, protocol.NewResponseTooLargeError(size, s.opts.ResponseLimit)
	}
	if kept != nil {
		if res.ExecutionID != "" {
			s.keep(res.ExecutionID, kept)
			granted.id = res.ExecutionID
		} else {
			kept.release()
		}
	}
	return obj, nil
}

// grant is what a close of an execution's handles waits for: ready is
// closed once execute knows id, the id it keeps the execution's stubs
// under ("" when none).
type grant struct {
	ready chan struct{}
	id    string
}

// run executes req, with p when the executor takes a Policy (a gateway's
// tenant, an executor server, the local backend). Another executor runs
// req alone, and its kept stubs go when its handles are closed through
// this server or the session ends.
func (s *Server) run(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	if pe, ok := s.exec.(protocol.PolicyExecutor); ok {
		return pe.ExecuteWith(ctx, req, p)
	}
	return s.exec.Execute(ctx, req)
}

func (s *Server) invokeHandle(ctx context.Context, args []any) (_ any, err error) {
	id, ok1 := arg(args, 0).(string)
	handle, ok2 := arg(args, 1).(string)
	if !ok1 || !ok2 {
		return nil, shapeError("invokeHandle: executionId and handleName must be strings")
	}
	tc, err := invokeOptionsOf(arg(args, 3))
	if err != nil {
		return nil, err
	}
	ctx, span := s.opts.Tracing.StartCall(ctx, telemetry.SpanInvokeHandle, tc, telemetry.HandleName.String(handle))
	defer func() { telemetry.EndCall(span, err) }()
	req, err := requestFromWire(arg(args, 2))
	if err != nil {
		return nil, err
	}
	resp, err := s.exec.InvokeHandle(ctx, id, handle, req)
	if err != nil {
		// A run bound that ended the invocation closed the handles too: the
		// caller reads that text instead of HANDLES_CLOSED.
		if EndsHandles(err) {
			s.drop(id, nil)
		}
		return nil, err
	}
	if size := protocol.HandleAnswerWireSize(resp); size > s.opts.ResponseLimit {
		return nil, protocol.NewResponseTooLargeError(size, s.opts.ResponseLimit)
	}
	return responseToWire(resp), nil
}

func (s *Server) closeHandles(ctx context.Context, args []any) (any, error) {
	id, ok := arg(args, 0).(string)
	if !ok {
		return nil, shapeError("closeHandles: executionId must be a string")
	}
	err := s.exec.CloseHandles(ctx, id)
	if err == nil || protocol.CodeOf(err) == protocol.CodeHandlesClosed {
		s.drop(id, nil)
	}
	if err != nil {
		return nil, err
	}
	return jsvalue.Undefined, nil
}

// stubDispatch calls the caller's dispatch function over the wire.
func stubDispatch(st *capnweb.Stub) protocol.DispatchFunc {
	return func(ctx context.Context, provider, tool, argsJSON string) (string, error) {
		v, err := st.Call(ctx, "", provider, tool, argsJSON)
		if err != nil {
			return "", brokenFault(err)
		}
		s, ok := v.(string)
		if !ok {
			return "", protocol.ErrOutsideEnvelope
		}
		return s, nil
	}
}

// stubOutbound calls the caller's outbound function over the wire.
func stubOutbound(st *capnweb.Stub) protocol.OutboundFunc {
	return func(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
		v, err := st.Call(ctx, "", requestToWire(req))
		if err != nil {
			return protocol.OutboundResponse{}, brokenFault(err)
		}
		return responseFromWire(v)
	}
}
