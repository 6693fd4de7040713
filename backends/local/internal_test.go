package local

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local/internal/sandbox"
	"github.com/supolka/codemode-gateway/backends/local/internal/wire"
	"github.com/supolka/codemode-gateway/protocol"
)

// A run the sandbox broke under reaches the calling application as an
// INTERNAL fault, not as text in the envelope, and the worker serves on.
func TestBrokenRunIsAnInternalFault(t *testing.T) {
	e := newScripted(t, Options{PoolSize: 1})
	before := pidOf(t, e)
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "broken"})
	if res != nil || protocol.CodeOf(err) != protocol.CodeInternal || err.Error() != sandbox.InternalErrorText {
		t.Fatalf("got %+v, %v; want no envelope and the INTERNAL fault", res, err)
	}
	if after := pidOf(t, e); after != before {
		t.Fatalf("the worker was replaced (%d, then %d)", before, after)
	}
}

// A job too large for the pipe to the worker is a coded fault, and nothing
// of it ran. Under -race it runs in the plain build (inPlainBuild).
func TestJobTooLargeForTheWorkerIsACodedFault(t *testing.T) {
	if inPlainBuild(t) {
		return
	}
	e := newScripted(t, Options{PoolSize: 1})
	big := strings.Repeat("x", wire.MaxParentFrame)
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "pid", Modules: protocol.ModuleMap{"big": {Kind: protocol.KindText, Source: big}}})
	if res != nil || protocol.CodeOf(err) != protocol.CodeInternal {
		t.Fatalf("got %+v, %v; want an INTERNAL fault", res, err)
	}
	var de *protocol.DeliveryTooLargeError
	if !errors.As(err, &de) || de.Part != protocol.DeliveryExecution || de.Limit != wire.MaxParentFrame || de.Size <= wire.MaxParentFrame ||
		err.Error() != protocol.NewDeliveryTooLargeError(protocol.DeliveryExecution, de.Size, wire.MaxParentFrame).Error() {
		t.Fatalf("got %v, want DeliveryTooLargeError for the execution", err)
	}
	expectScripted(t, e)
}

// expectScripted runs the trivial script: the pool still serves.
func expectScripted(t *testing.T, e *Executor) {
	t.Helper()
	if v := values(t, runScript(t, e, "pid")); len(v) != 1 {
		t.Fatalf("the next run: %v", v)
	}
}
