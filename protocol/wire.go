package protocol

import "encoding/json"

// ExecuteCallOptions is the options argument of the wire's execute call:
// the request fields that are plain data, with the module map as
// [name, source] pairs. A member left out reads as absent, and a member
// that is present wins over the executor's construction-time default.
//
// Its JSON form:
//
//	{"timeout": 5000, "countHostWaits": true, "retainHandles": true,
//	 "modules": [["greeter", "export const greet = …"], ["data", {"data": "AQID"}]]}
//
// timeout is absent, a number, or null (lift to the largest supported
// bound); see Timeout and ResolveTimeout. Members this build does not know
// are ignored, so a newer caller's options still read.
type ExecuteCallOptions struct {
	Timeout        Timeout      `json:"timeout,omitzero"`
	CountHostWaits *bool        `json:"countHostWaits,omitempty"`
	RetainHandles  bool         `json:"retainHandles,omitempty"`
	Modules        []ModulePair `json:"modules,omitempty"`
}

// CallOptions returns the wire options of req. Modules are listed sorted by
// name.
func (req *ExecuteRequest) CallOptions() ExecuteCallOptions {
	return ExecuteCallOptions{
		Timeout:        req.Timeout,
		CountHostWaits: req.CountHostWaits,
		RetainHandles:  req.RetainHandles,
		Modules:        ModulePairsOf(req.Modules),
	}
}

// ApplyCallOptions sets the fields of req that opts carries, replacing
// what req had for them: the timeout, countHostWaits, retainHandles and the
// module map. A module name given twice fails with
// *ModuleKeyCollisionError and leaves req unchanged.
func ApplyCallOptions(req *ExecuteRequest, opts ExecuteCallOptions) error {
	mods, err := ModuleMapOf(opts.Modules)
	if err != nil {
		return err
	}
	req.Timeout = opts.Timeout
	req.CountHostWaits = opts.CountHostWaits
	req.RetainHandles = opts.RetainHandles
	req.Modules = mods
	return nil
}

// ExecuteResultMessage is the wire form of ExecuteResult, what execute
// returns across the wire. The run's own value crosses as resultJson, the
// JSON text the isolate produced, and the receiving side rebuilds it with
// ParseForDispatch.
//
//	{"resultJson": "{\"id\":\"o1\"}", "logs": [{"level": "log", "text": "hi"}]}
//	{"error": "Execution timed out at its 30000 ms bound. …", "logs": [], "failure": "timeout"}
//	{"logs": [], "executionId": "…", "handles": ["fetch"]}
//
// resultJson is left out when the run produced no value; error when the run
// did not fail; executionId and handles when no handles were retained;
// failure when the run did not fail or its executor does not say what
// ended it. logs is always present.
type ExecuteResultMessage struct {
	ResultJSON  string    `json:"resultJson,omitempty"`
	Error       *string   `json:"error,omitempty"`
	Logs        []LogLine `json:"logs"`
	ExecutionID string    `json:"executionId,omitempty"`
	Handles     []string  `json:"handles,omitempty"`
	// Usage is what the execution used: an extension of the contract,
	// absent when the executor does not measure it.
	Usage *UsageMessage `json:"usage,omitempty"`
	// Failure is what ended a failed run (ExecuteResult.Failure): an
	// extension of the contract, absent when the executor does not say. A
	// reader ignores a kind it does not know.
	Failure FailureKind `json:"failure,omitempty"`
}

// ResultMessageOf is the wire message of r.
func ResultMessageOf(r *ExecuteResult) ExecuteResultMessage {
	m := ExecuteResultMessage{
		ResultJSON:  r.ResultJSON,
		Logs:        r.Logs,
		ExecutionID: r.ExecutionID,
		Handles:     r.Handles,
	}
	if m.Logs == nil {
		m.Logs = []LogLine{}
	}
	if r.Usage != nil {
		m.Usage = r.Usage.Message()
	}
	if r.HasError {
		e := r.Error
		m.Error = &e
		if r.Failure.Known() {
			m.Failure = r.Failure
		}
	}
	return m
}

// Result is the ExecuteResult the message carries.
func (m *ExecuteResultMessage) Result() *ExecuteResult {
	r := &ExecuteResult{
		ResultJSON:  m.ResultJSON,
		Logs:        m.Logs,
		ExecutionID: m.ExecutionID,
		Handles:     m.Handles,
	}
	if m.Error != nil {
		r.Error, r.HasError = *m.Error, true
		if m.Failure.Known() {
			r.Failure = m.Failure
		}
	}
	r.Usage = m.Usage.Usage()
	return r
}

// MarshalJSON writes the message exactly as JavaScript's JSON.stringify
// writes the same object (no HTML escaping, U+2028 and U+2029 raw), members
// in the order of the struct. Note that encoding/json's Marshal and an
// Encoder left at its default HTML-escape whatever a MarshalJSON returns
// (< becomes \u003c, six bytes for one); a transport that must stay
// byte-identical calls MarshalJSON directly or uses an Encoder with
// SetEscapeHTML(false).
func (m ExecuteResultMessage) MarshalJSON() ([]byte, error) {
	o := Object{}
	if m.ResultJSON != "" {
		o = append(o, Member{"resultJson", m.ResultJSON})
	}
	if m.Error != nil {
		o = append(o, Member{"error", *m.Error})
	}
	logs := make([]any, len(m.Logs))
	for i, l := range m.Logs {
		logs[i] = Object{{"level", string(l.Level)}, {"text", l.Text}}
	}
	o = append(o, Member{"logs", logs})
	if m.ExecutionID != "" {
		o = append(o, Member{"executionId", m.ExecutionID})
	}
	if len(m.Handles) > 0 {
		h := make([]any, len(m.Handles))
		for i, s := range m.Handles {
			h[i] = s
		}
		o = append(o, Member{"handles", h})
	}
	if u := m.Usage; u != nil {
		o = append(o, Member{"usage", Object{{"runClockMs", u.RunClockMs}, {"cpuMs", u.CPUMs}, {"peakHeapBytes", u.PeakHeapBytes},
			{"toolCalls", u.ToolCalls}, {"outboundRequests", u.OutboundRequests}, {"logBytes", u.LogBytes}}})
	}
	if m.Failure != FailureNone {
		o = append(o, Member{"failure", string(m.Failure)})
	}
	s, err := StringifyForDispatch(o)
	return []byte(s), err
}

// Value decodes the run's value with ParseForDispatch: Undefined when the
// run produced none.
func (r *ExecuteResult) Value() (any, error) {
	if r.ResultJSON == "" {
		return Undefined, nil
	}
	return ParseForDispatch(r.ResultJSON)
}

var _ json.Marshaler = ExecuteResultMessage{}
