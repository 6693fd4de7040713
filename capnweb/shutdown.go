package capnweb

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// How a session ends: the shutdown every path takes, and the protocol
// errors that lead to it.

// closeTimeout bounds flushing the last messages when a session ends.
const closeTimeout = 5 * time.Second

func (s *Session) shutdown(cause error, abortMsg []byte, code int, reason string) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	be := &BrokenError{Cause: cause}
	var ce *CloseError
	var pe *ProtocolError
	switch {
	case errors.As(cause, &ce):
		be.CloseCode, be.Reason = ce.Code, ce.Reason
		be.text = fmt.Sprintf("capnweb: connection broken: peer closed the connection: %d %s", ce.Code, ce.Reason)
	case errors.As(cause, &pe):
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: protocol error: " + pe.Reason
	case cause == ErrSessionClosed:
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: RPC session was closed"
	case abortMsg != nil:
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: session aborted: " + cause.Error()
	default:
		be.CloseCode, be.Reason = code, reason
		be.text = "capnweb: connection broken: " + cause.Error()
	}
	s.err = be
	s.releaseAll()
	s.ended = true
	var cells []*cell
	for _, ent := range s.imports {
		ent.dropped = true
		if ent.cell != nil {
			cells = append(cells, ent.cell)
		}
	}
	var post []func()
	for _, ex := range s.exports {
		ex.freed = true
		post = append(post, ex.releaseOwned()...)
		if ex.prom != nil {
			cells = append(cells, ex.prom)
		}
		for _, d := range ex.queue {
			cells = append(cells, d.result)
		}
		ex.queue = nil
	}
	s.imports = map[int64]*importEntry{}
	s.exports = map[int64]*export{}
	if abortMsg != nil {
		s.outq = append(s.outq, abortMsg)
	}
	s.closing = true
	s.closeCode, s.closeReason = code, truncateReason(reason)
	s.closeTimer = time.AfterFunc(closeTimeout, s.writeCancel)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.mu.Unlock()
	s.cancel(be)
	for _, c := range cells {
		c.settle(nil, be)
	}
	runAll(post)
	close(s.done)
}

// releaseOwned returns the releases of the stubs an export holds. Caller
// holds s.mu.
func (ex *export) releaseOwned() []func() {
	var post []func()
	for _, st := range ex.retained {
		post = append(post, st.Release)
	}
	ex.retained = nil
	if st, ok := ex.value.(*Stub); ok {
		post = append(post, st.Release)
	}
	if d, ok := ex.value.(Disposer); ok {
		post = append(post, func() { go d.Dispose() })
	}
	return post
}

// truncateReason cuts a close reason to 123 bytes on a character
// boundary, the most a WebSocket close frame carries.
func truncateReason(r string) string {
	r = strings.ToValidUTF8(r, "\uFFFD")
	if len(r) <= 123 {
		return r
	}
	r = r[:123]
	for len(r) > 0 && !utf8.ValidString(r) {
		r = r[:len(r)-1]
	}
	return r
}

// protocolError aborts the session because the peer sent malformed input.
// The reason may quote the peer's bytes: what goes back is valid UTF-8
// (each invalid sequence, lone surrogates included, becomes U+FFFD), so
// the abort never echoes what the peer should not have sent.
func (s *Session) protocolError(pe *ProtocolError) {
	reason := strings.ToValidUTF8(pe.Reason, "\uFFFD")
	e := &encoder{maxDepth: MaxDepth}
	e.buf = append(e.buf, `["abort",`...)
	_ = e.errorValue(&Error{Name: "Error", Message: reason}, 0)
	e.buf = append(e.buf, ']')
	s.shutdown(pe, e.buf, CloseAbort, reason)
}
