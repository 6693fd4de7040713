package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// fatalRecorder is a testing.TB whose Fatalf records the message and ends
// the goroutine, as the real one does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs fn with a recorder and returns what it failed with ("" for
// no failure).
func failure(t *testing.T, fn func(tb testing.TB)) string {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.msg
}

func TestWaitFor(t *testing.T) {
	var calls atomic.Int32
	msg := failure(t, func(tb testing.TB) {
		WaitFor(tb, time.Second, func() bool { return calls.Add(1) == 3 }, "the third call")
	})
	if msg != "" || calls.Load() != 3 {
		t.Errorf("a condition that comes true: failed with %q after %d calls", msg, calls.Load())
	}
	msg = failure(t, func(tb testing.TB) {
		WaitFor(tb, 50*time.Millisecond, func() bool { return false }, "the %s", "impossible")
	})
	if want := "not within 150ms: the impossible"; msg != want {
		t.Errorf("a condition that never comes true: %q, want %q", msg, want)
	}
}

func TestWaitBroken(t *testing.T) {
	broken := make(chan error, 1)
	broken <- protocol.NewFault(protocol.CodeConnectionBroken, "gone")
	if msg := failure(t, func(tb testing.TB) { WaitBroken(tb, broken, time.Second, "the call") }); msg != "" {
		t.Errorf("a broken call: %q", msg)
	}
	other := make(chan error, 1)
	other <- errors.New("no")
	if msg, want := failure(t, func(tb testing.TB) { WaitBroken(tb, other, time.Second, "the call") }), "the call failed with no, want CONNECTION_BROKEN"; msg != want {
		t.Errorf("another error: %q, want %q", msg, want)
	}
	if msg, want := failure(t, func(tb testing.TB) { WaitBroken(tb, make(chan error), 50*time.Millisecond, "the call") }), "the call did not fail within 150ms"; msg != want {
		t.Errorf("no error: %q, want %q", msg, want)
	}
}
