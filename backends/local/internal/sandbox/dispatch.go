package sandbox

import (
	"errors"
	"sync"

	"github.com/dop251/goja"
	"github.com/supolka/codemode-gateway/protocol"
)

// dispatch is __dispatch(provider, tool, argsJson): a promise for the
// envelope JSON. The host call runs on its own goroutine (or, with an
// AsyncHost, on none of the sandbox's); its answer is queued back onto the
// loop.
func (s *session) dispatch(call goja.FunctionCall) goja.Value {
	provider := call.Argument(0).String()
	tool := call.Argument(1).String()
	args := ""
	if a := call.Argument(2); !goja.IsUndefined(a) && !goja.IsNull(a) {
		args = a.String()
	}
	p, resolve, reject := s.vm.NewPromise()
	size := protocol.ToolCallWireSize(provider, tool, args)
	switch {
	case s.completed:
		s.mustSettle(resolve(protocol.ErrorEnvelope(protocol.CompletedText)))
	case size > protocol.PayloadLimit:
		s.mustSettle(reject(s.newError(protocol.NewPayloadTooLargeError(protocol.PartToolCall, size, protocol.PayloadLimit).Error())))
	case !s.job.HasDispatch || s.host == nil:
		s.mustSettle(resolve(protocol.ErrorEnvelope(protocol.NewToolNotFoundError(tool).Error())))
	default:
		answered := func(text string, err error) func() {
			return func() {
				s.open--
				if next, ok := s.hostCalls.Done(); ok {
					next()
				}
				if errors.Is(err, errHostPanicked) {
					// The embedding's host broke, not the program: the run
					// ends with an INTERNAL fault.
					s.broken, s.stopped = true, true
					return
				}
				if s.completed {
					return
				}
				var rerr error
				if err != nil {
					rerr = reject(s.newError(err.Error()))
				} else {
					rerr = resolve(text)
				}
				if rerr != nil {
					s.stop(rerr)
				}
			}
		}
		send := func() {
			if ah, ok := s.host.(AsyncHost); ok {
				s.callHostAsync(ah, provider, tool, args, func(text string, err error) {
					s.postNow(answered(text, err))
				})
				return
			}
			go func() {
				text, err := s.callHost(provider, tool, args)
				s.post(answered(text, err))
			}()
		}
		start, ok := s.hostCalls.Add(send)
		if !ok {
			s.mustSettle(reject(s.newError(protocol.NewHostCallBacklogError(MaxHostCallsInFlight).Error())))
			break
		}
		s.open++
		if start {
			send()
		}
	}
	return s.vm.ToValue(p)
}

// mustSettle passes on an uncatchable error from settling a promise inside a
// host function, where goja expects it as a panic.
func (s *session) mustSettle(err error) {
	if err != nil {
		panic(err)
	}
}

// errHostPanicked answers a tool call whose Host panicked: the run breaks.
var errHostPanicked = errors.New("sandbox: the host panicked")

// callHostAsync starts AsyncHost.DispatchAsync and turns a panic in it
// into errHostPanicked.
func (s *session) callHostAsync(ah AsyncHost, provider, tool, args string, done func(string, error)) {
	var once sync.Once
	answer := func(text string, err error) { once.Do(func() { done(text, err) }) }
	defer func() {
		if r := recover(); r != nil {
			go answer("", errHostPanicked)
		}
	}()
	ah.DispatchAsync(s.ctx, provider, tool, args, answer)
}

// callHost runs Host.Dispatch and turns a panic in it into errHostPanicked.
func (s *session) callHost(provider, tool, args string) (text string, err error) {
	defer func() {
		if r := recover(); r != nil {
			text, err = "", errHostPanicked
		}
	}()
	return s.host.Dispatch(s.ctx, provider, tool, args)
}
