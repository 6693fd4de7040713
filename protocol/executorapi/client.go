package executorapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// Client calls ExecutorApi on one capnweb session. It implements
// protocol.PolicyExecutor except Close, which belongs to whoever owns the
// session; backends/remote adds dialing and reconnection around it.
type Client struct {
	main *capnweb.Stub
	// watched are granted executions without an outbound function whose
	// HandlesClosed waits on the session.
	watched watches
	// lendsLifetime: the server keeps a handlesLifetime function.
	lendsLifetime bool
}

// Handshake calls protocolVersion() on the session's main object and
// returns a Client when the versions are equal. A different version is
// PROTOCOL_MISMATCH; a failed call is CONNECTION_REJECTED. It then asks
// which extensions the server implements.
func Handshake(ctx context.Context, sess *capnweb.Session) (*Client, error) {
	v, err := sess.Main().Call(ctx, "protocolVersion")
	if err != nil {
		return nil, protocol.Faultf(protocol.CodeConnectionRejected, fmt.Errorf("executor protocol handshake failed: %w", err))
	}
	n, ok := v.(float64)
	if !ok || n != protocol.ProtocolVersion {
		return nil, protocolMismatch("the server speaks executor protocol %v and this client %d", v, protocol.ProtocolVersion)
	}
	exts := askExtensions(ctx, sess.Main())
	return &Client{main: sess.Main(), lendsLifetime: exts[extensionHandlesLifetime]}, nil
}

// Ping calls protocolVersion() again: the server answers, and still speaks
// this client's version.
func (c *Client) Ping(ctx context.Context) error {
	v, err := c.main.Call(ctx, "protocolVersion")
	if err != nil {
		return Rehydrate(err)
	}
	if n, ok := v.(float64); !ok || n != protocol.ProtocolVersion {
		return protocolMismatch("the server now speaks executor protocol %v and this client %d", v, protocol.ProtocolVersion)
	}
	return nil
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (c *Client) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return c.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor. Of p only HandlesClosed
// applies: the rest of a policy has no wire form, and the server applies
// its own operator's.
func (c *Client) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	opts, err := optionsToWire(req)
	if err != nil {
		var kind *protocol.UnsupportedModuleKindError
		if errors.As(err, &kind) {
			// The map cannot cross the wire; the model reads why, in the
			// envelope, exactly as the local executor reports it.
			return &protocol.ExecuteResult{Error: kind.Error(), HasError: true, Failure: protocol.FailureOf(kind)}, nil
		}
		return nil, err
	}
	opts = withTraceContext(ctx, opts)
	var dispatch any // null when the request carries no tools
	if req.Dispatch != nil {
		dispatch = dispatchFunc(req.Dispatch)
	}
	var watch *handlesWatch
	if req.RetainHandles && p.HandlesClosed != nil {
		watch = newHandlesWatch(p.HandlesClosed)
		if req.Outbound.Func() == nil && c.lendsLifetime {
			opts = append(opts, jsvalue.Member{Key: extensionHandlesLifetime, Value: &handlesLifetime{watch: watch}})
		}
	}
	args := []any{req.Code, providersToWire(req.Providers), opts, dispatch, string(req.Outbound.Mode())}
	if fn := req.Outbound.Func(); fn != nil {
		if watch != nil {
			args = append(args, &watchedOutbound{fn: outboundFunc(fn), watch: watch})
		} else {
			args = append(args, outboundFunc(fn))
		}
	}
	v, err := c.main.Call(ctx, "execute", args...)
	if err != nil {
		if watch != nil {
			watch.settle("")
		}
		return nil, Rehydrate(err)
	}
	res, err := resultFromWire(v)
	if watch != nil {
		id := ""
		if err == nil {
			id = res.ExecutionID
		}
		watch.settle(id)
		if id != "" && req.Outbound.Func() == nil {
			c.watched.add(c.main.Session(), watch)
		}
	}
	return res, err
}

// InvokeHandle implements protocol.Executor. When ctx holds a span, its
// trace context goes in an options object after the request, an extension
// that servers which do not read it ignore.
func (c *Client) InvokeHandle(ctx context.Context, executionID, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	args := []any{executionID, handle, requestToWire(req)}
	if opts := withTraceContext(ctx, nil); len(opts) > 0 {
		args = append(args, opts)
	}
	v, err := c.main.Call(ctx, "invokeHandle", args...)
	if err != nil {
		err = Rehydrate(err)
		if EndsHandles(err) {
			c.watched.ended(executionID)
		}
		return protocol.OutboundResponse{}, err
	}
	resp, err := responseFromWire(v)
	if err != nil {
		return resp, protocolMismatch("invokeHandle answered outside the response shape: %v", err)
	}
	return resp, nil
}

// CloseHandles implements protocol.Executor.
func (c *Client) CloseHandles(ctx context.Context, executionID string) error {
	_, err := c.main.Call(ctx, "closeHandles", executionID)
	err = Rehydrate(err)
	if closeEnds(err) {
		c.watched.ended(executionID)
	}
	return err
}

// Rehydrate turns an error that crossed the wire back into a typed error:
// one with a code from the taxonomy becomes the protocol package's fault
// (protocol.Rehydrate); otherwise a broken session becomes the
// CONNECTION_BROKEN fault around its *capnweb.BrokenError, and anything else
// (a user error, a provider rejection) passes through untouched.
func Rehydrate(err error) error {
	var e *capnweb.Error
	if err == nil || !errors.As(err, &e) {
		return brokenFault(err)
	}
	code := e.Code()
	if !protocol.Code(code).Known() {
		return brokenFault(err)
	}
	var props map[string]any
	for _, f := range e.Props {
		if f.Key == "code" {
			continue
		}
		if props == nil {
			props = map[string]any{}
		}
		props[f.Key] = f.Value
	}
	return protocol.Rehydrate(e.Message, protocol.Code(code), props)
}

// Message is the text an error carries as the program's side wrote it: the
// message of an error that crossed the wire (without the "Error: " that
// its Error method adds, as JavaScript's String(err) does), else err's text.
func Message(err error) string {
	var e *capnweb.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}

// EndsHandles reports whether an invokeHandle error means the execution's
// handles are gone: HANDLES_CLOSED, or a run bound (an
// *ExecutionTimeoutError or *MemoryLimitError, as an executor in this
// process returns it) that ended the invocation and closed them. It reads
// types, never texts: a bound's text that crossed the wire is no proof
// (the handler may have thrown it), so a Client learns of those closes
// from the server releasing the execution's outbound function or its
// handlesLifetime, or from HANDLES_CLOSED on its next call.
func EndsHandles(err error) bool {
	return err != nil && (protocol.CodeOf(err) == protocol.CodeHandlesClosed || protocol.FailureOf(err).EndsHandles())
}

// dispatchFunc exports a DispatchFunc as a callable capnweb value with the
// contract's signature (provider, tool, argsJson) => Promise<string>.
func dispatchFunc(fn protocol.DispatchFunc) capnweb.Func {
	return func(ctx context.Context, args []any) (any, error) {
		capnweb.Detach(ctx) // tool calls of one run are answered concurrently
		provider, ok1 := arg(args, 0).(string)
		tool, ok2 := arg(args, 1).(string)
		argsJSON, ok3 := arg(args, 2).(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, shapeError("dispatch(provider, tool, argsJson) takes three strings")
		}
		return fn(ctx, provider, tool, argsJSON)
	}
}

// outboundFunc exports an OutboundFunc as a callable capnweb value with the
// contract's signature (request) => Promise<response>.
func outboundFunc(fn protocol.OutboundFunc) capnweb.Func {
	return func(ctx context.Context, args []any) (any, error) {
		capnweb.Detach(ctx) // so are outbound requests
		req, err := requestFromWire(arg(args, 0))
		if err != nil {
			return nil, err
		}
		resp, err := fn(ctx, req)
		if err != nil {
			return nil, err
		}
		return responseToWire(resp), nil
	}
}
