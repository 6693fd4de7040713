package capnweb

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Transport carries whole messages, each one JSON text. ReadMessage blocks
// until a message arrives; the message's bytes are valid until the next
// ReadMessage call (an implementation may reuse them). It returns a
// *CloseError when the peer closed, a *ProtocolError for a frame that
// cannot be a message (the session then aborts), and any other error when
// the transport failed. WriteMessage
// sends one message. Close ends the transport with a close code and reason
// and unblocks ReadMessage. The session calls ReadMessage from one
// goroutine and WriteMessage from one other goroutine.
type Transport interface {
	ReadMessage(ctx context.Context) ([]byte, error)
	WriteMessage(ctx context.Context, msg []byte) error
	Close(code int, reason string) error
}

// Close codes the session uses.
const (
	// CloseNormal ends a session that was closed on purpose.
	CloseNormal = 1000
	// CloseAbort ends a session after an abort or protocol error, as the
	// JavaScript library does.
	CloseAbort = 3000
)

// CloseError reports that the transport was closed, with the code and
// reason given by whoever closed it.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("closed: %d %s", e.Code, e.Reason)
}

// ProtocolError is malformed input from the peer. The session aborts with
// its text as the reason.
type ProtocolError struct {
	Reason string
}

func (e *ProtocolError) Error() string { return e.Reason }

func protoErrorf(format string, args ...any) *ProtocolError {
	return &ProtocolError{Reason: fmt.Sprintf(format, args...)}
}

// BrokenError is how every pending call fails once its session has ended.
// CloseCode and Reason are the
// transport's close code and reason when known (0 and "" otherwise); Cause
// is the error that ended the session: a *CloseError, the decoded reason
// of an abort the peer sent, a *ProtocolError, or a transport error.
type BrokenError struct {
	CloseCode int
	Reason    string
	Cause     error
	text      string
}

func (e *BrokenError) Error() string { return e.text }

// Unwrap returns the cause.
func (e *BrokenError) Unwrap() error { return e.Cause }

// ErrSessionClosed is the cause of a BrokenError for a session closed by
// its own side with Session.Close.
var ErrSessionClosed = errors.New("RPC session was closed")

// Pipe returns two connected in-memory transports, for tests and for
// joining two sessions inside one process.
func Pipe() (Transport, Transport) {
	a := &pipeEnd{in: make(chan []byte, 64), closed: make(chan struct{})}
	b := &pipeEnd{in: make(chan []byte, 64), closed: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

type pipeEnd struct {
	in     chan []byte
	peer   *pipeEnd
	once   sync.Once
	closed chan struct{}
	mu     sync.Mutex
	cerr   *CloseError
}

func (p *pipeEnd) ReadMessage(ctx context.Context) ([]byte, error) {
	// Deliver what was queued before a close, as a socket would.
	select {
	case m := <-p.in:
		return m, nil
	default:
	}
	select {
	case m := <-p.in:
		return m, nil
	case <-p.closed:
		select {
		case m := <-p.in:
			return m, nil
		default:
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return nil, p.cerr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeEnd) WriteMessage(ctx context.Context, msg []byte) error {
	select {
	case <-p.closed:
		return errors.New("pipe closed")
	default:
	}
	select {
	case p.peer.in <- append([]byte(nil), msg...):
		return nil
	case <-p.closed:
		return errors.New("pipe closed")
	case <-p.peer.closed:
		return errors.New("pipe closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipeEnd) Close(code int, reason string) error {
	ce := &CloseError{Code: code, Reason: reason}
	p.shut(ce)
	p.peer.shut(ce)
	return nil
}

func (p *pipeEnd) shut(ce *CloseError) {
	p.once.Do(func() {
		p.mu.Lock()
		p.cerr = ce
		p.mu.Unlock()
		close(p.closed)
	})
}
