package protocol

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestRetryable(t *testing.T) {
	for _, c := range []Code{CodeQueueOverflow, CodeWorkerCrashed, CodeProtocolMismatch, CodeConnectionRejected,
		CodeConnectionBroken, CodeResponseTooLarge, CodeHandlesClosed, CodeInternal} {
		want := c == CodeQueueOverflow || c == CodeWorkerCrashed
		if c.Retryable() != want {
			t.Errorf("%s.Retryable() = %v", c, c.Retryable())
		}
		if !c.Known() {
			t.Errorf("%s is not known", c)
		}
		if got := CodeOf(NewFault(c, "x")); got != c {
			t.Errorf("CodeOf(fault %s) = %s", c, got)
		}
	}
	if Code("NOPE").Known() || Code("NOPE").Retryable() || Code("").Known() {
		t.Error("unknown code treated as known")
	}
}

func TestFaultWrapsAndCarriesCode(t *testing.T) {
	cause := errors.New("pipe closed")
	f := Faultf(CodeConnectionBroken, cause)
	wrapped := fmt.Errorf("execute: %w", f)
	if CodeOf(wrapped) != CodeConnectionBroken {
		t.Errorf("CodeOf = %q", CodeOf(wrapped))
	}
	if !errors.Is(wrapped, cause) {
		t.Error("errors.Is does not reach the cause")
	}
	var got *Fault
	if !errors.As(wrapped, &got) || got.Message != "pipe closed" || got.Error() != "pipe closed" {
		t.Errorf("errors.As: %#v", got)
	}
	if CodeOf(errors.New("plain")) != "" || CodeOf(nil) != "" {
		t.Error("CodeOf of an uncoded error is not empty")
	}
}

func TestRehydrateTypedFailures(t *testing.T) {
	props := map[string]any{"executionId": "ex-1", "extra": 1.0}
	for _, orig := range []Coded{
		NewHandlesClosedError("ex-1"),
		NewHandlesClosedError(`id with "quotes" inside`),
		NewHandlesClosedError(""),
		NewQueueOverflowError(64, 120*time.Millisecond),
		NewQueueTimeoutError(5*time.Second, 80*time.Millisecond),
		NewTenantLimitError("acme", "20 executions started per second", 51*time.Millisecond),
		NewTenantLimitError("acme", "a budget of 600000 ms of run-clock time per 1h0m0s, so far 600012", time.Hour),
		NewResponseTooLargeError(2000000, 1048576),
		NewDrainingError(),
		NewExecutorDrainingError(),
		NewNoExecutorError(),
		NewHandlesUnreachableError(),
	} {
		err := Rehydrate(orig.Error(), orig.FaultCode(), props)
		if err.Error() != orig.Error() {
			t.Errorf("message changed: %q", err.Error())
		}
		if CodeOf(err) != orig.FaultCode() {
			t.Errorf("code %q, want %q", CodeOf(err), orig.FaultCode())
		}
		var f *Fault
		if !errors.As(err, &f) || !reflect.DeepEqual(f.Props, props) {
			t.Errorf("props lost: %#v", f)
		}
		// The typed failure is rebuilt with its fields.
		target := reflect.New(reflect.TypeOf(orig))
		if !errors.As(err, target.Interface()) {
			t.Errorf("errors.As(%T) failed", orig)
			continue
		}
		if got := target.Elem().Interface(); !reflect.DeepEqual(got, orig) {
			t.Errorf("rebuilt %#v, want %#v", got, orig)
		}
	}
}

func TestRehydrateMessageThatIsNotTheText(t *testing.T) {
	// A HANDLES_CLOSED fault whose message is not the composed text keeps
	// its code and message, and no typed failure is guessed.
	for _, c := range []struct {
		msg  string
		code Code
	}{
		{"handles gone", CodeHandlesClosed},
		{`Execution "x" holds no handles.`, CodeHandlesClosed},
		{"The executor's queue is full at its bound of 064 waiting executions, so this one was turned away before it ran. Try it again in 5 ms.", CodeQueueOverflow},
		{"The executor's queue is full at its bound of 64 waiting executions, so this one was turned away before it ran. Try it again in 0 ms.", CodeQueueOverflow},
		{"The executor's queue is full at its bound of 64 waiting executions, so this one was turned away before it ran. Try it again after a short wait.", CodeQueueOverflow},
		{"This execution waited its bound of 0 ms for room on the executor, so it was turned away before it ran. Try it again in 5 ms.", CodeQueueOverflow},
		{`Tenant "a" is over, so this execution was turned away before it started. Try it again in 5 ms.`, CodeQueueOverflow},
		{"The response is big", CodeResponseTooLarge},
	} {
		err := Rehydrate(c.msg, c.code, nil)
		if err.Error() != c.msg || CodeOf(err) != c.code {
			t.Errorf("%q: got %q / %q", c.msg, err.Error(), CodeOf(err))
		}
		var hc *HandlesClosedError
		var qo *QueueOverflowError
		var qt *QueueTimeoutError
		var tl *TenantLimitError
		var rt *ResponseTooLargeError
		if errors.As(err, &hc) || errors.As(err, &qo) || errors.As(err, &qt) || errors.As(err, &tl) || errors.As(err, &rt) {
			t.Errorf("%q: a typed failure was guessed", c.msg)
		}
	}
}

func TestRehydrateCodesWithoutClass(t *testing.T) {
	for _, c := range []Code{CodeWorkerCrashed, CodeProtocolMismatch, CodeConnectionRejected, CodeConnectionBroken, CodeInternal} {
		err := Rehydrate("broke", c, nil)
		var f *Fault
		if !errors.As(err, &f) || f.Code != c || f.Message != "broke" || f.Err != nil {
			t.Errorf("%s: %#v", c, err)
		}
	}
}

func TestRehydratePassesUnknownThrough(t *testing.T) {
	props := map[string]any{"status": 404.0, "retryAfter": "soon"}
	for _, code := range []Code{"", "ENOENT", "queue_overflow"} {
		err := Rehydrate("No such customer.", code, props)
		var re *RemoteError
		if !errors.As(err, &re) {
			t.Fatalf("%q: %T", code, err)
		}
		if re.Message != "No such customer." || re.Error() != "No such customer." || re.Code != string(code) ||
			!reflect.DeepEqual(re.Props, props) {
			t.Errorf("%q: %#v", code, re)
		}
		if CodeOf(err) != "" {
			t.Errorf("%q: an unknown code became a fault code %q", code, CodeOf(err))
		}
	}
}
