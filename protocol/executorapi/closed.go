package executorapi

import (
	"context"
	"sync"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/protocol"
)

// The wire has no message that says a server closed a retained execution
// by itself (its idle bound, a crash). Two things do say it: the server
// drops its duplicate of the caller's outbound function when the handles
// close (the contract keeps it until then, not longer), and a session that
// ends takes that duplicate and the server's reach into it along. A Client
// watches both and calls the policy's HandlesClosed then.

// handlesWatch calls a policy's HandlesClosed once, with the granted id,
// when the server let go of the execution.
type handlesWatch struct {
	fn    func(executionID string)
	ready chan struct{} // closed once the result is known
	id    string        // the granted id; "" when nothing was granted
	once  sync.Once
	done  chan struct{} // closed when fn ran (or never will)
}

func newHandlesWatch(fn func(string)) *handlesWatch {
	return &handlesWatch{fn: fn, ready: make(chan struct{}), done: make(chan struct{})}
}

// settle records the outcome of execute: the granted id, or "".
func (w *handlesWatch) settle(id string) {
	w.id = id
	close(w.ready)
	if id == "" {
		w.once.Do(func() { close(w.done) })
	}
}

// closed reports that the server let go, once the outcome is known.
func (w *handlesWatch) closed() {
	<-w.ready
	w.once.Do(func() {
		close(w.done)
		if w.id != "" {
			w.fn(w.id)
		}
	})
}

// watchedOutbound is the caller's outbound function as exported to the
// server: its release by the server is the handles closing.
type watchedOutbound struct {
	fn    capnweb.Func
	watch *handlesWatch
}

func (o *watchedOutbound) CallMethod(ctx context.Context, name string, args []any) (any, error) {
	return o.fn.CallMethod(ctx, name, args)
}

// Dispose runs when the server released its last reference.
func (o *watchedOutbound) Dispose() { o.watch.closed() }

// watches are the granted executions of one Client whose HandlesClosed
// waits on the session (no outbound function to watch), by id.
type watches struct {
	mu   sync.Mutex
	byID map[string]*handlesWatch
}

// add watches w's execution until the session ends or forget drops it.
func (ws *watches) add(sess *capnweb.Session, w *handlesWatch) {
	ws.mu.Lock()
	if ws.byID == nil {
		ws.byID = map[string]*handlesWatch{}
	}
	ws.byID[w.id] = w
	ws.mu.Unlock()
	go func() {
		select {
		case <-sess.Done():
			w.closed()
		case <-w.done:
		}
		ws.mu.Lock()
		if ws.byID[w.id] == w {
			delete(ws.byID, w.id)
		}
		ws.mu.Unlock()
	}()
}

// ended reports that a call learned the execution's handles are gone.
func (ws *watches) ended(id string) {
	ws.mu.Lock()
	w := ws.byID[id]
	ws.mu.Unlock()
	if w != nil {
		w.closed()
	}
}

// closeEnds reports whether a closeHandles call ended the handles: success
// does, and so does HANDLES_CLOSED.
func closeEnds(err error) bool {
	return err == nil || protocol.CodeOf(err) == protocol.CodeHandlesClosed
}
