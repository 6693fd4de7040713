package sandbox

import (
	"context"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// panicHost is an embedding whose host broke: every tool call panics.
type panicHost struct{ fakeHost }

func (*panicHost) Dispatch(context.Context, string, string, string) (string, error) {
	panic("the host broke")
}

// A broken invariant of the executor (its host panicked under a tool call)
// ends the run with an INTERNAL fault for the calling application; the
// program never reads it, even when it catches the call's rejection.
func TestBrokenHostIsAnInternalFault(t *testing.T) {
	j := toolJob(`async () => { try { await store.x() } catch (e) { return 'caught: ' + e.message } }`, 5000)
	res, err := Run(context.Background(), j, &panicHost{})
	wantInternal(t, res, err)
	if protocol.CodeOf(err).Retryable() {
		t.Fatal("INTERNAL is not retryable")
	}
}
