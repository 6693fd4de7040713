package sandbox

import (
	"context"
	"sync/atomic"

	"github.com/supolka/codemode-gateway/backends/local/internal/webplatform"
	"github.com/supolka/codemode-gateway/protocol"
)

// Job is everything one run needs, in a form that crosses a pipe as JSON.
// The caller has already resolved defaults: every field is final.
type Job struct {
	Code      string                        `json:"code"`
	Providers []protocol.ProviderDescriptor `json:"providers,omitempty"`
	// HasDispatch is false when the request carries no tools: every tool
	// call then gets ToolNotFoundError's text without reaching the host.
	HasDispatch bool               `json:"hasDispatch"`
	Modules     protocol.ModuleMap `json:"modules,omitempty"`
	// TimeoutMs is the resolved run bound, measured on the run clock.
	TimeoutMs int64 `json:"timeoutMs"`
	// CountHostWaits restores the wall clock: host waits spend the bound.
	CountHostWaits bool `json:"countHostWaits"`
	// MemoryLimitMB is the limit named in the memory text.
	MemoryLimitMB int                   `json:"memoryLimitMB"`
	OutboundMode  protocol.OutboundMode `json:"outboundMode"`
	// Native configures fetch in the native mode: the operator's veto, the
	// address deny list, the response cap, redirects, the per-request
	// timeout. The zero value allows native fetch with the default deny
	// list.
	Native webplatform.NativeOptions `json:"native"`
	// RetainHandles asks for the session to be kept when the entry settles
	// to a fetch handler (RunRetained).
	RetainHandles bool `json:"retainHandles,omitempty"`
}

// Host is what a run reaches outside the sandbox. Both methods are called
// from their own goroutine and may block for as long as the host takes; the
// run's event loop keeps going meanwhile.
type Host interface {
	// Dispatch sends one tool call, already measured against PayloadLimit,
	// and returns the envelope JSON.
	Dispatch(ctx context.Context, provider, tool, argsJSON string) (string, error)
	// Outbound performs one request of the stub mode (the caller's function).
	Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error)
}

// AsyncHost is a Host that can start a tool call without the sandbox
// keeping a goroutine waiting for it: done is called exactly once, from
// another goroutine than the caller's, with the envelope JSON or the
// error. It must not block for long: it only queues the answer onto the
// run's loop.
type AsyncHost interface {
	Host
	DispatchAsync(ctx context.Context, provider, tool, argsJSON string, done func(string, error))
}

// InterruptHost is a Host that may stop the run from another goroutine at
// once: Run gives it a function that interrupts the runtime, and takes it
// back (nil) as the run ends. Cancelling the run's context interrupts it
// too, but from a goroutine of the context's, which a collection stopping
// the world keeps from running while the program starts its next huge
// allocation.
type InterruptHost interface {
	Host
	SetInterrupt(func())
}

// Run executes job and returns its result envelope. Declared failures and
// user errors are inside the envelope. Cancelling ctx interrupts the run; if
// context.Cause(ctx) is an error of the protocol package (a MemoryLimitError
// from a watchdog, say) its text becomes the envelope's error.
//
// Run never panics on any input: a Go panic inside the run (the sandbox
// broke, not the program) is recovered and returned as an INTERNAL fault,
// with no envelope. It returns when the entry settles, the bound passes or
// ctx ends, without waiting for host calls still open; their context is
// cancelled and their answers are dropped.
func Run(ctx context.Context, job Job, host Host) (*protocol.ExecuteResult, error) {
	return Prepare().Run(ctx, job, host)
}

// RunRetained is Run for a job that may retain its session. When
// job.RetainHandles is set and the entry settles to a fetch handler (a
// function, or an object with a callable fetch), the envelope has no value
// and Handles lists HandleFetch, and the returned *Retained keeps the
// runtime, its timers and ctx alive to serve invocations until it is closed
// or a bound ends it. Any other outcome returns a nil *Retained, exactly as
// Run would. ctx must stay alive for as long as the session does; its
// cancellation (a memory watchdog's, with the memory text as its cause)
// ends the session.
func RunRetained(ctx context.Context, job Job, host Host) (*protocol.ExecuteResult, *Retained, error) {
	return Prepare().RunRetained(ctx, job, host)
}

// Prepared is a fresh runtime with the sandbox's whole scope installed (the
// console, timers, the codec, the web platform), waiting for the one job it
// will run. Building it is most of a small run's cost and needs nothing of
// the job, so a worker prepares the next runtime while it is idle. A
// Prepared serves exactly one Run or RunRetained; it holds no goroutine or
// timer, so one that is never used is simply dropped.
type Prepared struct {
	s    *session
	used atomic.Bool
}

// Prepare builds a Prepared. It never panics: a failure is kept and
// reported, as an INTERNAL fault, by the run that uses it.
func Prepare() (p *Prepared) {
	defer func() {
		if r := recover(); r != nil {
			p = &Prepared{}
		}
	}()
	return &Prepared{s: prepare()}
}

// take hands out the session once; nil after that, or when it failed to
// build, and the run then fails with an INTERNAL fault.
func (p *Prepared) take() *session {
	if p.used.Swap(true) {
		return nil
	}
	return p.s
}

// Run is the package's Run in this runtime, which it uses up.
func (p *Prepared) Run(ctx context.Context, job Job, host Host) (res *protocol.ExecuteResult, err error) {
	res, kept, err := p.RunRetained(ctx, job, host)
	if kept != nil {
		// Run never retains: a caller that asked for handles uses
		// RunRetained.
		kept.Close()
		res = &protocol.ExecuteResult{Logs: res.Logs}
	}
	return res, err
}

// RunRetained is the package's RunRetained in this runtime, which it uses up.
func (p *Prepared) RunRetained(ctx context.Context, job Job, host Host) (res *protocol.ExecuteResult, kept *Retained, err error) {
	defer func() {
		if r := recover(); r != nil {
			if kept != nil {
				kept.Close()
			}
			res, kept, err = nil, nil, InternalFault()
		}
	}()
	s := p.take()
	if s == nil {
		return nil, nil, InternalFault()
	}
	res, kept = s.run(ctx, job, host)
	if kept == nil && s.broken {
		return nil, nil, InternalFault()
	}
	return res, kept, nil
}
