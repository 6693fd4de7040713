package protocol

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// ToolFunc implements tools on the Go side: it receives one call with its
// arguments decoded by the argument grammar (ArgsFromJSON) and returns the
// tool's value, or an error whose text the program's proxy rethrows. It
// must not panic.
type ToolFunc func(ctx context.Context, provider, tool string, args []any) (any, error)

// EnvelopeState tells an envelope dispatch whether its execution is still
// running. It starts active; Complete marks the execution finished, after
// which every call gets the completed envelope. Safe for concurrent use.
type EnvelopeState struct {
	done atomic.Bool
}

// NewEnvelopeState returns an active state.
func NewEnvelopeState() *EnvelopeState { return &EnvelopeState{} }

// Complete marks the execution finished. Calling it again does nothing.
func (s *EnvelopeState) Complete() { s.done.Store(true) }

// Active reports whether the execution is still running.
func (s *EnvelopeState) Active() bool { return !s.done.Load() }

// NewEnvelopeDispatch composes the three envelopes of the dispatch grammar
// around fn:
//
//   - while state is active, {"result":value} with fn's value written by
//     StringifyForDispatch ({} when the value is jsvalue.Undefined, as
//     JSON.stringify drops an undefined member), or {"error":text} with the
//     text of fn's error;
//   - once state is complete, {"error":"Execution has already completed."}
//     without calling fn.
//
// Arguments that do not parse, and a value StringifyForDispatch cannot
// write, also answer {"error":…} with the reason, so the program's proxy
// rethrows it where the call was made. The returned DispatchFunc never
// returns a non-nil error.
func NewEnvelopeDispatch(state *EnvelopeState, fn ToolFunc) DispatchFunc {
	return func(ctx context.Context, provider, tool, argsJSON string) (string, error) {
		if !state.Active() {
			return ErrorEnvelope(CompletedText), nil
		}
		args, err := ArgsFromJSON(argsJSON)
		if err != nil {
			return ErrorEnvelope("The arguments of tool " + tool + " are not valid dispatch JSON: " + err.Error()), nil
		}
		v, err := fn(ctx, provider, tool, args)
		if err != nil {
			return ErrorEnvelope(err.Error()), nil
		}
		env, err := ResultEnvelope(v)
		if err != nil {
			return ErrorEnvelope("The answer of tool " + tool + " cannot be written as JSON: " + err.Error()), nil
		}
		return env, nil
	}
}

// ResultEnvelope writes {"result":v}; {} when v is jsvalue.Undefined.
func ResultEnvelope(v any) (string, error) {
	return StringifyForDispatch(jsvalue.Object{{Key: "result", Value: v}})
}

// ErrorEnvelope writes {"error":text}.
func ErrorEnvelope(text string) string {
	return string(jsvalue.AppendString([]byte(`{"error":`), text)) + "}"
}

// ErrOutsideEnvelope is the protocol fault of an answer that is not an
// envelope object; its text is OutsideEnvelopeText.
var ErrOutsideEnvelope = errors.New(OutsideEnvelopeText)
