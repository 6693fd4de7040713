package gateway

import (
	"context"

	"github.com/supolka/codemode-gateway/capnweb"
)

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// whenAnswered runs release once the capnweb call ctx serves has its answer
// queued for the client (capnweb.AfterAnswer), or at once outside a served
// call (a Go caller of the tenant).
func whenAnswered(ctx context.Context, release func()) {
	if !capnweb.AfterAnswer(ctx, release) {
		release()
	}
}
