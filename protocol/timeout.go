package protocol

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
