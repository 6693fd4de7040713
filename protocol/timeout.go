package protocol

import (
	"errors"
	"fmt"
	"math"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// Timeout is the request's tri-state timeout: absent (the zero value), a
// number of milliseconds, or null, which lifts the bound to the largest the
// serving side supports and never above MaxSupportedTimeout.
type Timeout struct {
	set    bool
	lifted bool
	ms     float64
}

// TimeoutOf is a timeout of ms milliseconds. JavaScript numbers are floats,
// so the wire can carry fractions; Resolve decides what they mean.
func TimeoutOf(ms float64) Timeout { return Timeout{set: true, ms: ms} }

// TimeoutLifted is the null timeout.
func TimeoutLifted() Timeout { return Timeout{set: true, lifted: true} }

// IsZero reports whether the timeout is absent (used by encoding/json's
// omitzero).
func (t Timeout) IsZero() bool { return !t.set }

// IsLifted reports whether the timeout is null.
func (t Timeout) IsLifted() bool { return t.set && t.lifted }

// Millis is the number of milliseconds of a timeout set to a number; ok is
// false when the timeout is absent or null.
func (t Timeout) Millis() (ms float64, ok bool) { return t.ms, t.set && !t.lifted }

// MarshalJSON writes null for the lifted timeout and the number otherwise.
// An absent timeout has no JSON form of its own: the field that holds it is
// left out (tag it `json:",omitzero"`); written anyway, it reads as null.
// +Inf is written as null, which resolves the same way (to the cap). NaN
// and -Inf have no JSON form, and writing them fails rather than turning an
// invalid timeout into a lifted one.
func (t Timeout) MarshalJSON() ([]byte, error) {
	switch {
	case !t.set || t.lifted || math.IsInf(t.ms, 1):
		return []byte("null"), nil
	case math.IsNaN(t.ms) || math.IsInf(t.ms, -1):
		return nil, NewInvalidTimeoutError(t.ms)
	}
	return jsvalue.AppendNumber(nil, t.ms), nil
}

// UnmarshalJSON reads null as the lifted timeout and a number as a timeout
// of that many milliseconds; ResolveTimeout judges the number. A number too
// large for a double reads as +Inf or -Inf, as in JavaScript. Anything else
// is an error.
func (t *Timeout) UnmarshalJSON(b []byte) error {
	v, err := ParseForDispatch(string(b))
	if err != nil {
		return fmt.Errorf("protocol: timeout: %w", err)
	}
	switch x := v.(type) {
	case nil:
		*t = TimeoutLifted()
	case float64:
		*t = TimeoutOf(x)
	default:
		return errors.New("protocol: timeout must be a number of milliseconds or null")
	}
	return nil
}

func (t Timeout) String() string {
	switch {
	case !t.set:
		return "absent"
	case t.lifted:
		return "null"
	}
	return jsvalue.FormatNumber(t.ms) + " ms"
}

// InvalidTimeoutError is a timeout set to a number that is no bound: NaN,
// zero or negative. It reads as a declared failure, so an executor may
// report it in the result envelope.
//
//	Timeout <ms> is not a positive number of milliseconds, so the run has no bound to keep. Leave the timeout out for the default, set null for the largest bound, or give a positive number.
type InvalidTimeoutError struct {
	Millis float64
}

// NewInvalidTimeoutError composes the text for a timeout of ms.
func NewInvalidTimeoutError(ms float64) *InvalidTimeoutError { return &InvalidTimeoutError{Millis: ms} }

func (e *InvalidTimeoutError) Error() string {
	return "Timeout " + jsvalue.FormatNumber(e.Millis) + " is not a positive number of milliseconds, so the run has no bound to keep. Leave the timeout out for the default, set null for the largest bound, or give a positive number."
}

// ResolveTimeout turns a request's timeout into the bound the run is held
// to, in whole milliseconds, given the executor's configured default and
// the serving side's maximum (0 for either means "not configured").
//
//   - The cap is serverMax when it is positive, and never above
//     MaxSupportedTimeout.
//   - Absent: the configured default, or DefaultTimeout when that is 0,
//     held to the cap.
//   - null: the cap, the largest bound the serving side supports.
//   - A number: rounded up to a whole millisecond (a fraction cannot be
//     measured, and rounding up never turns a positive bound into 0), then
//     held to the cap; +Inf reads as "as long as allowed" and gives the cap.
//     NaN, zero and negative numbers fail with *InvalidTimeoutError: none of
//     them is a bound a run could keep, and guessing would hide the caller's
//     mistake.
//
// A negative configuredDefault is treated as 0.
func ResolveTimeout(t Timeout, configuredDefault, serverMax int64) (int64, error) {
	limit := int64(MaxSupportedTimeout)
	if serverMax > 0 && serverMax < limit {
		limit = serverMax
	}
	if !t.set {
		d := configuredDefault
		if d <= 0 {
			d = DefaultTimeout
		}
		return min(d, limit), nil
	}
	if t.lifted {
		return limit, nil
	}
	ms := t.ms
	if math.IsNaN(ms) || ms <= 0 {
		return 0, NewInvalidTimeoutError(ms)
	}
	if ms >= float64(limit) {
		return limit, nil
	}
	return int64(math.Ceil(ms)), nil
}

// ResolveCountHostWaits applies "a set field wins over the default" to
// countHostWaits: the request's value when set, the executor's
// construction-time default otherwise.
func ResolveCountHostWaits(set *bool, configuredDefault bool) bool {
	if set != nil {
		return *set
	}
	return configuredDefault
}
