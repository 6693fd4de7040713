package testutil

import (
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// WaitFor polls cond until it holds, and fails t when it still does not
// after within; format and args say what was awaited. It polls 500 times
// over within (every 10 ms for 5 s), so a slow condition is not hammered.
func WaitFor(t testing.TB, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	every := max(within/500, time.Millisecond)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+format, append([]any{within}, args...)...)
		}
		time.Sleep(every)
	}
}

// WaitBroken waits up to within for the error of a call in flight on errc,
// and fails t unless it is a CONNECTION_BROKEN fault: the end of a call
// whose connection, member or executor went away under it. what names the
// call in the messages.
func WaitBroken(t testing.TB, errc <-chan error, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if protocol.CodeOf(err) != protocol.CodeConnectionBroken {
			t.Fatalf("%s failed with %v, want CONNECTION_BROKEN", what, err)
		}
	case <-time.After(within):
		t.Fatalf("%s did not fail within %v", what, within)
	}
}
