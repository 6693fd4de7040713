package testutil

import (
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// loadAllowance is how many times its expected time a wait may take before
// it fails. The times the tests name are what a quiet machine takes, with
// room; make test runs four jobs at once on two CPUs, and a wait there can
// take several times as long without anything being wrong. A wait is a
// guard against a hang, never a measurement (speed goals are benchmarks):
// one that took longer than named says so in the log.
const loadAllowance = 3

// WaitFor polls cond until it holds, and fails t when it still does not
// after loadAllowance times within; format and args say what was awaited.
// It polls 500 times over within (every 10 ms for 5 s), so a slow condition
// is not hammered.
func WaitFor(t testing.TB, within time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	every := max(within/500, time.Millisecond)
	start := time.Now()
	deadline := start.Add(loadAllowance * within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+format, append([]any{loadAllowance * within}, args...)...)
		}
		time.Sleep(every)
	}
	if took := time.Since(start); took > within {
		t.Logf("took %v, more than the %v expected: "+format, append([]any{took.Round(time.Millisecond), within}, args...)...)
	}
}

// WaitBroken waits up to loadAllowance times within for the error of a
// call in flight on errc, and fails t unless it is a CONNECTION_BROKEN
// fault: the end of a call whose connection, member or executor went away
// under it. what names the call in the messages.
func WaitBroken(t testing.TB, errc <-chan error, within time.Duration, what string) {
	t.Helper()
	select {
	case err := <-errc:
		if protocol.CodeOf(err) != protocol.CodeConnectionBroken {
			t.Fatalf("%s failed with %v, want CONNECTION_BROKEN", what, err)
		}
	case <-time.After(loadAllowance * within):
		t.Fatalf("%s did not fail within %v", what, loadAllowance*within)
	}
}
