// Package remote is the executor backend that runs programs on a remote
// executor server: it speaks the contract's ExecutorApi over a capnweb
// WebSocket session and implements protocol.PolicyExecutor, so the gateway
// (or any Go application) uses a remote server exactly like the local
// backend.
//
// One connection carries many executions at once. When it dies, every call
// in flight fails with CONNECTION_BROKEN and is never replayed; the next
// call dials again, with backoff after a failed attempt. An execution or
// a call on a retained execution that the server turned away before it
// started (QUEUE_OVERFLOW) is tried again with backoff (Options.Retry).
package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// Options configures a remote executor.
type Options struct {
	// Header is sent with every WebSocket handshake (credentials above all).
	Header http.Header
	// DialTimeout bounds one connection attempt, handshake included;
	// 10 s when 0.
	DialTimeout time.Duration
	// ReadLimit bounds one received message; capnweb's default (1 MiB)
	// when 0.
	ReadLimit int64
	// MaxBackoff caps the wait between failed reconnection attempts;
	// 5 s when 0. The first wait is 100 ms and doubles per failure.
	MaxBackoff time.Duration
	// HTTPClient dials the WebSocket; http.DefaultClient when nil.
	HTTPClient *http.Client
	// Retry bounds the retries of an execution or a handle call the
	// server turned away with QUEUE_OVERFLOW (see Retry); the zero value
	// retries up to four times, and Retry{Attempts: 1} turns retries off.
	Retry Retry
}

const firstBackoff = 100 * time.Millisecond

// Executor is a protocol.PolicyExecutor on a remote executor server.
type Executor struct {
	url  string
	opts Options

	mu     sync.Mutex
	sess   *capnweb.Session
	client *executorapi.Client
	closed bool
	// draining is the session whose server refused an execution as
	// draining: it keeps serving what it holds (calls on retained
	// executions above all) until the server closes it.
	draining *capnweb.Session
	backoff  time.Duration // current wait after a failed attempt
	retryAt  time.Time     // no attempt before this
	lastFail error
}

// Dial connects to the executor server at url (ws:// or wss://) and performs
// the protocolVersion handshake. A socket or handshake failure is
// CONNECTION_REJECTED; a different protocol version is PROTOCOL_MISMATCH.
func Dial(ctx context.Context, url string, opts Options) (*Executor, error) {
	e := New(url, opts)
	if _, err := e.live(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// New returns an executor for the server at url that connects on first
// use, so a gateway can start while a member is still down.
func New(url string, opts Options) *Executor {
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	return &Executor{url: url, opts: opts}
}

// Ping makes sure a live, handshaken session exists, dialing when there is
// none: the health check of a gateway's remote backend group.
func (e *Executor) Ping(ctx context.Context) error {
	c, err := e.live(ctx)
	if err != nil {
		return err
	}
	return c.Ping(ctx)
}

// URL is the executor server's address.
func (e *Executor) URL() string { return e.url }

func (e *Executor) connect(ctx context.Context) (*capnweb.Session, *executorapi.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.DialTimeout)
	defer cancel()
	sess, err := capnweb.Dial(ctx, e.url, nil, capnweb.Options{
		MaxMessageSize: e.opts.ReadLimit,
		ErrorProps:     executorapi.ErrorProps,
		Dial:           &websocket.DialOptions{HTTPHeader: e.opts.Header, HTTPClient: e.opts.HTTPClient},
	})
	if err != nil {
		return nil, nil, protocol.Faultf(protocol.CodeConnectionRejected, fmt.Errorf("connecting to the executor server %s: %w", e.url, err))
	}
	client, err := executorapi.Handshake(ctx, sess)
	if err != nil {
		sess.Close()
		return nil, nil, err
	}
	return sess, client, nil
}

// live returns a client on a live session, dialing again when the last one
// ended. Calls already in flight on a dead session have failed on their own.
func (e *Executor) live(ctx context.Context) (*executorapi.Client, error) {
	c, _, err := e.liveSession(ctx)
	return c, err
}

// liveSession is live with the session the client calls on.
func (e *Executor) liveSession(ctx context.Context) (*executorapi.Client, *capnweb.Session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, protocol.NewFault(protocol.CodeConnectionBroken, "the remote executor was closed")
	}
	if e.sess != nil {
		select {
		case <-e.sess.Done():
			e.sess, e.client = nil, nil
		default:
			return e.client, e.sess, nil
		}
	}
	if now := time.Now(); now.Before(e.retryAt) {
		return nil, nil, protocol.Faultf(protocol.CodeConnectionRejected,
			fmt.Errorf("not reconnecting to %s for another %v after: %w", e.url, e.retryAt.Sub(now).Round(time.Millisecond), e.lastFail))
	}
	sess, client, err := e.connect(ctx)
	if err != nil {
		if e.backoff == 0 {
			e.backoff = firstBackoff
		} else {
			e.backoff = min(2*e.backoff, e.opts.MaxBackoff)
		}
		e.retryAt, e.lastFail = time.Now().Add(e.backoff), err
		return nil, nil, err
	}
	e.backoff, e.retryAt, e.lastFail = 0, time.Time{}, nil
	e.sess, e.client = sess, client
	return client, sess, nil
}

// Execute implements protocol.Executor: ExecuteWith with no policy.
func (e *Executor) Execute(ctx context.Context, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	return e.ExecuteWith(ctx, req, protocol.Policy{})
}

// ExecuteWith implements protocol.PolicyExecutor. Of p only HandlesClosed
// applies: the rest has no wire form, and the server holds executions to
// its own operator's bounds.
//
// An execution turned away with QUEUE_OVERFLOW is tried again as
// Options.Retry says, and the last fault is returned once the attempts
// are spent; WORKER_CRASHED is the caller's to retry (see Retry). A server that refuses
// the execution as draining (protocol.IsExecutorDraining) marks the
// session Draining until it ends.
func (e *Executor) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	return retrying(ctx, e.opts.Retry, func() (*protocol.ExecuteResult, error) { return e.executeOnce(ctx, req, p) })
}

// executeOnce is one attempt of ExecuteWith.
func (e *Executor) executeOnce(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	c, sess, err := e.liveSession(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.ExecuteWith(ctx, req, p)
	if protocol.IsExecutorDraining(err) {
		e.mu.Lock()
		if e.sess == sess {
			e.draining = sess
		}
		e.mu.Unlock()
	}
	return res, err
}

// Draining reports whether the server on the current session refused an
// execution as draining: it takes no new executions, but still serves
// the retained executions it holds, until it closes the session. The next
// session (to the server's replacement, say) starts out not draining.
func (e *Executor) Draining() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess == nil || e.sess != e.draining {
		return false
	}
	select {
	case <-e.sess.Done():
		return false
	default:
		return true
	}
}

// InvokeHandle implements protocol.Executor. Handles live on the server,
// so a reconnected session may invoke the handles an earlier one was
// granted. A call turned away with QUEUE_OVERFLOW (a gateway that could
// not reach the executor server holding the handles, say) never started,
// so it is tried again as Options.Retry says.
func (e *Executor) InvokeHandle(ctx context.Context, executionID, handle string, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return retrying(ctx, e.opts.Retry, func() (protocol.OutboundResponse, error) {
		c, err := e.live(ctx)
		if err != nil {
			return protocol.OutboundResponse{}, err
		}
		return c.InvokeHandle(ctx, executionID, handle, req)
	})
}

// CloseHandles implements protocol.Executor; a QUEUE_OVERFLOW is retried
// as for InvokeHandle.
func (e *Executor) CloseHandles(ctx context.Context, executionID string) error {
	_, err := retrying(ctx, e.opts.Retry, func() (struct{}, error) {
		c, err := e.live(ctx)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, c.CloseHandles(ctx, executionID)
	})
	return err
}

// Close ends the session; calls in flight and every later call fail with
// CONNECTION_BROKEN.
func (e *Executor) Close() error {
	e.mu.Lock()
	sess := e.sess
	e.sess, e.client, e.closed = nil, nil, true
	e.mu.Unlock()
	if sess != nil {
		if err := sess.Close(); err != nil && !errors.Is(err, capnweb.ErrSessionClosed) {
			return err
		}
	}
	return nil
}

var _ protocol.PolicyExecutor = (*Executor)(nil)
