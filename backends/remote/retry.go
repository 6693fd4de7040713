package remote

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// Retry bounds how ExecuteWith tries an execution again after the server
// turned it away with QUEUE_OVERFLOW (a full queue, a tenant bound, a
// draining server, a gateway with no executor server that could take it):
// the execution never started, so trying it again runs it once. The
// handle calls, InvokeHandle and CloseHandles, are tried again the same
// way (a gateway that could not reach the executor server holding the
// handles refuses them with QUEUE_OVERFLOW: the call never started). The
// contract makes WORKER_CRASHED retryable too, but a worker may crash
// after the program made tool calls, so whether to run it again is the
// caller's to decide, and it is returned. No other failure is retried:
// CONNECTION_BROKEN leaves the outcome unknown, and the rest do not heal
// by waiting.
//
// The zero value retries up to four times, waiting about 3 s at most in
// all: long enough for an executor server to come back from a restart.
// The waits grow from BaseDelay, doubling, with jitter (each is between
// half and all of its step), and are never shorter than the retry hint a
// refusal carries.
type Retry struct {
	// Attempts is how many times one execution or handle call is tried
	// in all: 5 when 0; 1 turns retries off.
	Attempts int
	// BaseDelay is the step before the first retry, doubled for each
	// later one; 200 ms when 0.
	BaseDelay time.Duration
	// MaxDelay caps one wait; 2 s when 0. A refusal whose retry hint is
	// longer than that is returned at once, for the caller to read the
	// hint.
	MaxDelay time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 5
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 200 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 2 * time.Second
	}
	return r
}

// wait is how long to wait before retry number n (1 for the first) after
// err, and false when err's hint is past MaxDelay.
func (r Retry) wait(n int, err error) (time.Duration, bool) {
	step := r.BaseDelay
	for i := 1; i < n && step < r.MaxDelay; i++ {
		step *= 2
	}
	step = min(step, r.MaxDelay)
	// Jitter over the upper half of the step, so that callers refused
	// together do not come back together.
	d := step/2 + rand.N(step/2+1)
	if hint, ok := protocol.RetryAfterOf(err); ok {
		if hint > r.MaxDelay {
			return 0, false
		}
		d = max(d, hint)
	}
	return d, true
}

// retrying runs attempt until it succeeds, fails with a code that is not
// retryable, or the attempts are spent; it returns the last outcome. The
// context ending during a wait returns the last fault too.
func retrying[T any](ctx context.Context, r Retry, attempt func() (T, error)) (T, error) {
	r = r.withDefaults()
	for n := 1; ; n++ {
		v, err := attempt()
		if err == nil || n >= r.Attempts || protocol.CodeOf(err) != protocol.CodeQueueOverflow {
			return v, err
		}
		d, ok := r.wait(n, err)
		if !ok {
			return v, err
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}
