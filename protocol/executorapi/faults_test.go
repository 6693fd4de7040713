package executorapi

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// The contract's errors cross a session with their code, and a refusal
// that says when to retry with the wait as a number; any other error
// crosses with its message alone.
func TestErrorPropsCarryTheFaultCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want jsvalue.Object
	}{
		{protocol.NewFault(protocol.CodeInternal, "broke"), jsvalue.Object{{Key: "code", Value: "INTERNAL"}}},
		{fmt.Errorf("wrapped: %w", protocol.NewHandlesClosedError("e1")), jsvalue.Object{{Key: "code", Value: "HANDLES_CLOSED"}}},
		{protocol.NewQueueOverflowError(8, 250*time.Millisecond), jsvalue.Object{
			{Key: "code", Value: "QUEUE_OVERFLOW"}, {Key: protocol.RetryAfterProp, Value: 250.0}}},
		{errors.New("No such customer."), nil},
	} {
		if got := ErrorProps.ErrorProps(c.err); !reflect.DeepEqual(got, c.want) {
			t.Errorf("ErrorProps(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if got := SessionOptions(capnweb.Options{}).ErrorProps; got != ErrorProps {
		t.Errorf("SessionOptions sets ErrorProps %v, want executorapi.ErrorProps", got)
	}
}

// A call that fails because its session ended is CONNECTION_BROKEN, with
// the session's own error (and text) inside; errors that crossed the wire
// are rehydrated as before.
func TestBrokenSessionIsConnectionBroken(t *testing.T) {
	a, b := capnweb.Pipe()
	server := capnweb.NewSession(a, capnweb.Methods{}, capnweb.Options{})
	client := capnweb.NewSession(b, nil, capnweb.Options{})
	defer client.Close()
	server.Close()
	<-client.Done()
	_, err := client.Main().Call(context.Background(), "execute")
	var broken *capnweb.BrokenError
	if !errors.As(err, &broken) {
		t.Fatalf("the call failed with %T %v, want *capnweb.BrokenError", err, err)
	}
	got := Rehydrate(err)
	if protocol.CodeOf(got) != protocol.CodeConnectionBroken || !errors.As(got, &broken) || got.Error() != err.Error() {
		t.Errorf("Rehydrate(%v) = %T %v (code %q)", err, got, got, protocol.CodeOf(got))
	}
	if got := brokenFault(err); protocol.CodeOf(got) != protocol.CodeConnectionBroken {
		t.Errorf("brokenFault(%v) has code %q", err, protocol.CodeOf(got))
	}
	plain := errors.New("No such customer.")
	if got := brokenFault(plain); got != plain {
		t.Errorf("brokenFault(%v) = %v, want it untouched", plain, got)
	}
}
