package capnweb

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Outgoing: the writer goroutine, and how messages are encoded, committed
// and queued for it.

// enqueue queues one message for the writer. Caller holds s.mu.
func (s *Session) enqueue(msg []byte) {
	if !s.queue(msg) {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// queue appends msg to the writer's queue without waking it; false when
// the session has ended. Caller holds s.mu.
func (s *Session) queue(msg []byte) bool {
	if s.ended {
		return false
	}
	// Messages waiting for the writer count until written; an abort this
	// picks runs on its own, since the caller holds s.mu.
	if abort := s.account(int64(len(msg))); abort != nil {
		go abort()
	}
	s.outq = append(s.outq, msg)
	return true
}

// releaseDelay bounds how long a release queued by enqueueRelease waits
// for another message to go out with.
const releaseDelay = 5 * time.Millisecond

// enqueueRelease queues a release without waking the writer: it goes out
// with the next message, or after releaseDelay. A call's answer is
// followed by its release, and the caller's next call a moment later; two
// writes, and two wake-ups of the peer, become one. A release only lets
// the peer free what it kept, so a few milliseconds' delay changes nothing
// else. Caller holds s.mu.
func (s *Session) enqueueRelease(msg []byte) {
	if !s.queue(msg) {
		return
	}
	if !s.releaseArmed {
		s.releaseArmed = true
		if s.releaseTimer == nil {
			s.releaseTimer = time.AfterFunc(releaseDelay, s.flushReleases)
		} else {
			s.releaseTimer.Reset(releaseDelay)
		}
	}
}

// flushReleases wakes the writer for the releases still queued.
func (s *Session) flushReleases() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.releaseArmed {
		s.releaseArmed = false
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// writeFailGrace is how long a failed write waits for the reader to report
// why the connection ended before the session ends with the write's error.
const writeFailGrace = 250 * time.Millisecond

func (s *Session) writeLoop() {
	defer close(s.writerDone)
	var werr error
	// spare is the last batch's slice, emptied, handed back as the next
	// queue: a session's queue is then not a new slice for every batch.
	var spare [][]byte
	for {
		s.mu.Lock()
		for len(s.outq) == 0 && !s.closing {
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		batch := s.outq
		s.outq = spare
		if s.releaseArmed {
			// The releases go out in this batch.
			s.releaseArmed = false
			s.releaseTimer.Stop()
		}
		closing, code, reason := s.closing, s.closeCode, s.closeReason
		s.mu.Unlock()
		if werr == nil && len(batch) > 0 {
			if bw, ok := s.t.(MessageBatchWriter); ok && len(batch) > 1 {
				werr = bw.WriteMessages(s.writeCtx, batch)
			} else {
				for _, m := range batch {
					if werr = s.t.WriteMessage(s.writeCtx, m); werr != nil {
						break
					}
				}
			}
			if werr != nil {
				// A write fails at once when the peer has closed the
				// connection, and the reader is then about to report the
				// peer's close code and reason (every way it stops ends the
				// session): let it speak first, for a moment, so that the
				// session ends with the peer's words (1001 "reconnect")
				// rather than the socket's.
				select {
				case <-s.done:
				case <-time.After(writeFailGrace):
				}
				s.shutdown(fmt.Errorf("write failed: %w", werr), nil, 1011, "write failed")
			}
			var written int64
			for _, m := range batch {
				written += int64(len(m))
			}
			s.mu.Lock()
			s.account(-written) // giving back never aborts
			s.mu.Unlock()
		}
		clear(batch) // the messages are garbage now
		spare = nil
		if cap(batch) <= outqKeepMax {
			spare = batch[:0]
		}
		if closing && len(batch) == 0 {
			_ = s.t.Close(code, reason)
			s.mu.Lock()
			if s.closeTimer != nil {
				s.closeTimer.Stop()
			}
			s.mu.Unlock()
			s.writeCancel()
			return
		}
	}
}

// outqKeepMax is the longest queue whose slice the writer hands back for
// reuse; a rare burst's is not held for the session's life.
const outqKeepMax = 1024

// idMessage is a message of ids after its opening, such as ["pull",3] or
// ["release",-2,1], built in one allocation.
func idMessage(opening string, ids ...int64) []byte {
	msg := make([]byte, 0, len(opening)+len(ids)*21)
	msg = append(msg, opening...)
	for i, id := range ids {
		if i > 0 {
			msg = append(msg, ',')
		}
		msg = strconv.AppendInt(msg, id, 10)
	}
	return append(msg, ']')
}

func (s *Session) newEncoder() *encoder {
	return &encoder{s: s, maxDepth: MaxDepth, buf: make([]byte, 0, 128)}
}

// commit makes the exports created by a successful encoding live. Caller
// holds s.mu; the returned actions run after it is released.
func (s *Session) commit(e *encoder) []func() {
	for _, ex := range e.pending {
		s.exports[ex.id] = ex
	}
	post := e.post
	for i, ex := range e.promises {
		ex, p := ex, e.foreign[i]
		post = append(post, func() {
			ex.prom.then(func(v any, err error) { s.sendResolution(ex, v, err) })
			go func() {
				v, err := p.Await(s.ctx)
				ex.prom.settle(v, err)
			}()
		})
	}
	return post
}

// rollback undoes a failed encoding; the ids it took stay used, as in JS.
func (s *Session) rollback(e *encoder) []func() {
	var post []func()
	for _, d := range e.dups {
		post = append(post, d.Release)
	}
	return post
}

func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// sendResolution answers a pulled promise export with resolve or reject.
func (s *Session) sendResolution(ex *export, v any, err error) {
	s.mu.Lock()
	if s.ended || ex.freed {
		s.mu.Unlock()
		return
	}
	var post []func()
	if err == nil {
		e := s.newEncoder()
		e.buf = append(e.buf, `["resolve",`...)
		e.buf = strconv.AppendInt(e.buf, ex.id, 10)
		e.buf = append(e.buf, ',')
		if encErr := e.value(v, 0); encErr != nil {
			post = append(post, s.rollback(e)...)
			err = encErr
		} else {
			e.buf = append(e.buf, ']')
			post = append(post, s.commit(e)...)
			s.enqueue(e.buf)
		}
	}
	if err != nil {
		s.enqueue(s.rejectMessage(ex.id, err, &post))
	}
	s.mu.Unlock()
	runAll(post)
}

// rejectMessage encodes ["reject", id, reason]. Caller holds s.mu.
func (s *Session) rejectMessage(id int64, reason error, post *[]func()) []byte {
	var val any
	var th *Thrown
	if errors.As(reason, &th) {
		val = th.Value
	} else {
		val = errorToJS(reason, s.opts.ErrorProps)
	}
	e := s.newEncoder()
	e.buf = append(e.buf, `["reject",`...)
	e.buf = strconv.AppendInt(e.buf, id, 10)
	e.buf = append(e.buf, ',')
	if err := e.value(val, 0); err != nil {
		*post = append(*post, s.rollback(e)...)
		je := errorToJS(reason, s.opts.ErrorProps)
		e = s.newEncoder()
		e.buf = append(e.buf, `["reject",`...)
		e.buf = strconv.AppendInt(e.buf, id, 10)
		e.buf = append(e.buf, ',')
		_ = e.errorValue(&Error{Name: je.Name, Message: je.Message}, 0)
	} else {
		*post = append(*post, s.commit(e)...)
	}
	return append(e.buf, ']')
}
