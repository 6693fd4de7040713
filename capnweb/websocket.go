package capnweb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// NewWebSocketTransport adapts an open WebSocket: one text frame per
// message, never binary. A received binary frame is a *ProtocolError (the
// session aborts and closes with 3000); a message longer than readLimit
// (<= 0: 1 MiB) makes the WebSocket library close the connection with
// 1009.
func NewWebSocketTransport(conn *websocket.Conn, readLimit int64) Transport {
	if readLimit <= 0 {
		readLimit = DefaultMaxMessageSize
	}
	conn.SetReadLimit(readLimit)
	return &wsTransport{conn: conn}
}

type wsTransport struct {
	conn *websocket.Conn
	// cork, when set, is the connection under conn (Accept): a batch of
	// messages goes out in one write.
	cork *corkConn
	// buf is the last message's storage, reused for the next one: the
	// session is done with a message before it reads another.
	buf []byte
}

// Read buffer sizes: the first allocation, and the largest kept for reuse
// once its message is done (a rare large message is not held for the
// connection's life).
const (
	wsReadStart   = 4 << 10
	wsReadKeepMax = 64 << 10
)

// ReadMessage returns the next message. Its bytes are valid until the next
// call, as the Transport contract allows.
func (w *wsTransport) ReadMessage(ctx context.Context) ([]byte, error) {
	return w.readGated(ctx, nil)
}

// readGated is ReadMessage calling gate (when not nil) once the message's
// first frame has arrived and before its payload is read: an idle
// connection reserves nothing, and a message waits in the socket until
// gate returns; false ends the read with errReadStopped.
func (w *wsTransport) readGated(ctx context.Context, gate func() bool) ([]byte, error) {
	typ, r, err := w.conn.Reader(ctx)
	if err != nil {
		return nil, wsReadError(err)
	}
	if typ != websocket.MessageText {
		return nil, &ProtocolError{Reason: "received a binary WebSocket frame; capnweb messages are JSON text frames"}
	}
	if gate != nil && !gate() {
		return nil, errReadStopped
	}
	buf := w.buf[:0]
	if cap(buf) > wsReadKeepMax {
		buf = nil
	}
	if buf == nil {
		buf = make([]byte, 0, wsReadStart)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			w.buf = nil
			return nil, wsReadError(err)
		}
	}
	w.buf = buf
	return buf, nil
}

// gatedReader is a transport that can hold a message that began to
// arrive until gate lets it be read (readGated).
type gatedReader interface {
	readGated(ctx context.Context, gate func() bool) ([]byte, error)
}

// errReadStopped ends a gated read whose session ended while it waited.
var errReadStopped = errors.New("the session ended while a message waited to be read")

// wsReadError maps the WebSocket library's close error to a *CloseError.
func wsReadError(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return &CloseError{Code: int(ce.Code), Reason: ce.Reason}
	}
	return err
}

func (w *wsTransport) WriteMessage(ctx context.Context, msg []byte) error {
	return w.conn.Write(ctx, websocket.MessageText, msg)
}

// WriteMessages writes msgs in order; on an accepted connection all but the
// last are held back and go out with the last in one write.
func (w *wsTransport) WriteMessages(ctx context.Context, msgs [][]byte) error {
	if w.cork == nil || len(msgs) < 2 {
		for _, m := range msgs {
			if err := w.WriteMessage(ctx, m); err != nil {
				return err
			}
		}
		return nil
	}
	w.cork.cork()
	last := len(msgs) - 1
	for _, m := range msgs[:last] {
		if err := w.WriteMessage(ctx, m); err != nil {
			w.cork.reset()
			return err
		}
	}
	w.cork.uncork()
	return w.WriteMessage(ctx, msgs[last])
}

func (w *wsTransport) Close(code int, reason string) error {
	return w.conn.Close(websocket.StatusCode(code), truncateReason(reason))
}

// Dial opens a WebSocket to url (no subprotocol unless opts.Dial asks for
// one) and starts a session serving main (nil: nothing) over it.
func Dial(ctx context.Context, url string, main Target, opts Options) (*Session, error) {
	conn, resp, err := websocket.Dial(ctx, url, opts.Dial)
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, refusal(resp, err)
		}
		return nil, err
	}
	return NewSession(NewWebSocketTransport(conn, opts.withDefaults().MaxMessageSize), main, opts), nil
}

// Accept upgrades an HTTP request to a WebSocket (accepting a handshake
// without a subprotocol) and starts a session serving main over it. The
// handler may return at once or wait on the session's Done.
func Accept(w http.ResponseWriter, r *http.Request, main Target, opts Options) (*Session, error) {
	opts = opts.withDefaults()
	cw := &corkingWriter{ResponseWriter: w}
	conn, err := websocket.Accept(cw, r, opts.Accept)
	if err != nil {
		return nil, err
	}
	t := NewWebSocketTransport(conn, opts.MaxMessageSize).(*wsTransport)
	t.cork = cw.conn
	return NewSession(t, main, opts), nil
}

// RefusedError is a WebSocket upgrade the server answered with an HTTP
// status instead: Text is the start of its body, where a server says why.
type RefusedError struct {
	StatusCode int
	Text       string
	err        error
}

func (e *RefusedError) Error() string {
	if e.Text == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("the server refused the WebSocket upgrade with HTTP %d: %s", e.StatusCode, e.Text)
}

func (e *RefusedError) Unwrap() error { return e.err }

// refusal reads the text of a refused upgrade: the dialer kept the body's
// first kilobyte for this.
func refusal(resp *http.Response, err error) error {
	var text []byte
	if resp.Body != nil {
		text, _ = io.ReadAll(io.LimitReader(resp.Body, 1024))
	}
	return &RefusedError{StatusCode: resp.StatusCode, Text: strings.TrimSpace(string(text)), err: err}
}
