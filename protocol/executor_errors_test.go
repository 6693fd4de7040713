package protocol

import (
	"testing"
	"time"
)

// Each of the executor's own texts, pinned word for word, with its code
// when it is a fault.
func TestExecutorErrorTexts(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
		code Code
	}{
		{NewSourceTooLargeError(`module "a"`, 300000, 262144),
			`The module "a" is 300000 bytes, past the sandbox's 262144-byte bound on one source. Send less code, and move what is shared into the module map.`, ""},
		{NewSourceNestingError("program", 1000, 3),
			"The program nests brackets more than 1000 deep (line 3), past what the sandbox parses. Flatten that code and run it again.", ""},
		{NewHostCallBacklogError(4352),
			"Too many host calls in flight: at most 4352 may wait at once. Await some before starting more.", ""},
		{NewHostAnswerTooLargeError(),
			"The host's answer is too large to deliver to the sandbox. Ask the tool for less at once.", ""},
		{NewNotAResponseError(),
			"The fetch handler answered with something other than a Response. Return a Response, for example new Response(body, {status: 200}).", ""},
		{NewNetworkErrorResponseError(),
			"The fetch handler answered with Response.error(), a network error, not an HTTP response. Return a Response with a status from 200 to 599.", ""},
		{NewDeliveryTooLargeError(DeliveryExecution, 70000000, 67108864),
			"The execution is 70000000 bytes, past the 67108864-byte bound on one message to the executor's worker process, so it was not delivered. Send less code, and fewer or smaller modules.", CodeInternal},
		{NewDeliveryTooLargeError(DeliveryHandleRequest, 70000000, 67108864),
			"The handle request is 70000000 bytes, past the 67108864-byte bound on one message to the executor's worker process, so it was not delivered. Send a smaller body.", CodeInternal},
		{NewDrainingError(),
			"This gateway is draining for a restart, so the execution was turned away before it started. Retry it; another replica, or this one after the restart, will run it.", CodeQueueOverflow},
		{NewExecutorDrainingError(),
			"This executor server is draining for a restart, so the execution was turned away before it started. Retry it; another executor server, or this one after the restart, will run it.", CodeQueueOverflow},
		{NewNoExecutorError(),
			"No executor server behind this gateway could take the execution, so it did not start. Retry it in a few seconds; an executor server that is down or restarting takes executions again once it is back.", CodeQueueOverflow},
		{NewHandlesUnreachableError(),
			"The executor server that holds this execution's handles could not be reached, so the call did not start. Retry it in a few seconds; if that server restarted meanwhile, its handles are gone and the retry reads HANDLES_CLOSED.", CodeQueueOverflow},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("%T:\ngot  %q\nwant %q", c.err, got, c.want)
		}
		if got := CodeOf(c.err); got != c.code {
			t.Errorf("%T: code %q, want %q", c.err, got, c.code)
		}
	}
}

// The tenant bound texts, whole: each bound's words inside
// TenantLimitError's text.
func TestTenantBoundTexts(t *testing.T) {
	for _, c := range []struct{ limit, want string }{
		{RateBound(2), `Tenant "acme" is at its bound of 2 executions started per second, so this execution was turned away before it started. Try it again in 500 ms.`},
		{RateBound(1), `Tenant "acme" is at its bound of 1 execution started per second, so this execution was turned away before it started. Try it again in 500 ms.`},
		{RateBound(0.5), `Tenant "acme" is at its bound of 0.5 executions started per second, so this execution was turned away before it started. Try it again in 500 ms.`},
		{InFlightBound(1), `Tenant "acme" is at its bound of 1 execution in flight, so this execution was turned away before it started. Try it again in 500 ms.`},
		{InFlightBound(8), `Tenant "acme" is at its bound of 8 executions in flight, so this execution was turned away before it started. Try it again in 500 ms.`},
		{ExecutionBudget(1, time.Hour), `Tenant "acme" is at its bound of a budget of 1 execution per 1h0m0s, so this execution was turned away before it started. Try it again in 500 ms.`},
		{ExecutionBudget(100, 24*time.Hour), `Tenant "acme" is at its bound of a budget of 100 executions per 24h0m0s, so this execution was turned away before it started. Try it again in 500 ms.`},
		{RunClockBudget(90*time.Second, time.Hour), `Tenant "acme" is at its bound of a budget of 1m30s of run-clock time per 1h0m0s, so this execution was turned away before it started. Try it again in 500 ms.`},
	} {
		if got := NewTenantLimitError("acme", c.limit, 500*time.Millisecond).Error(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
}

// IsExecutorDraining knows the refusal in this process and after it crossed
// the wire, and nothing else: not another QUEUE_OVERFLOW text, not its
// text under another code.
func TestIsExecutorDraining(t *testing.T) {
	text := NewExecutorDrainingError().Error()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{NewExecutorDrainingError(), true},
		{Rehydrate(text, CodeQueueOverflow, nil), true},
		{Rehydrate(text, CodeInternal, nil), false},
		{Rehydrate(text+" ", CodeQueueOverflow, nil), false},
		{NewDrainingError(), false},
		{NewQueueOverflowError(1, time.Second), false},
		{nil, false},
	} {
		if got := IsExecutorDraining(c.err); got != c.want {
			t.Errorf("IsExecutorDraining(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
