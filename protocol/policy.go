package protocol

import (
	"context"
	"net/netip"
)

// Policy is what a Go caller tells an executor about one execution beside
// the contract's ExecuteRequest: the bounds a gateway applies on its
// tenant's behalf, and a hook for when retained handles close. None of it
// crosses the wire, so an executor applies what it can and ignores the
// rest (the remote backend can pass on only HandlesClosed). The zero
// Policy asks for nothing.
type Policy struct {
	// Tenant names the caller's tenant, for an executor that keeps tenants
	// apart (the local backend runs no two tenants' executions in one
	// worker process).
	Tenant string
	// MemoryLimitMB, when above zero and below the executor's own limit,
	// lowers this execution's memory limit.
	MemoryLimitMB int
	// NativeDeny adds address ranges the native mode must not reach for
	// this execution, on top of the executor's own deny list and even
	// where its allow list would let them through.
	NativeDeny []netip.Prefix
	// HandlesClosed, when set, is called once, on its own goroutine, when
	// a retained execution of this request moves to Closed, whatever closed
	// it: CloseHandles, the idle bound, a run bound, a crash, Close. The
	// remote backend calls it when the server releases its duplicate of the
	// outbound function, or when the session ends; without an outbound
	// function it cannot tell sooner. Whoever keeps something alive for the
	// handles (a duplicated outbound stub, a pin) lets go of it here.
	HandlesClosed func(executionID string)
	// Usage, when set, is called with what a retained execution of this
	// request used after its result (whose Usage covers the run up to the
	// grant): each invocation, and the work its timers did between
	// invocations, as the executor measures them, in the order they
	// happened, each on a goroutine of the executor's (never the caller's).
	// An executor that does not measure usage never calls it.
	Usage func(*Usage)
}

// PolicyExecutor is an Executor that takes a Policy beside each request.
// Its Execute is ExecuteWith with the zero Policy.
type PolicyExecutor interface {
	Executor
	ExecuteWith(ctx context.Context, req *ExecuteRequest, p Policy) (*ExecuteResult, error)
}
