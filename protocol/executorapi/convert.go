package executorapi

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/capnweb"
)

// This file converts between the contract's Go types and the values that
// cross a capnweb session. Every decoder takes untrusted input: a value of
// the wrong shape gets a TypeError naming the member, never a panic.

// shapeError is a TypeError about the shape of an argument, as a
// JavaScript server would throw for a caller that broke the contract.
func shapeError(format string, args ...any) *capnweb.Error {
	return capnweb.NewError("TypeError", fmt.Sprintf(format, args...))
}

// protocolMismatch is the PROTOCOL_MISMATCH fault.
func protocolMismatch(format string, args ...any) *protocol.Fault {
	return protocol.NewFault(protocol.CodeProtocolMismatch, fmt.Sprintf(format, args...))
}

// ---- providers -------------------------------------------------------------

func providersToWire(ps []protocol.ProviderDescriptor) []any {
	out := make([]any, len(ps))
	for i, p := range ps {
		tools := make([]any, len(p.Tools))
		for j, t := range p.Tools {
			tools[j] = t
		}
		o := capnweb.Object{{Key: "name", Value: p.Name}, {Key: "tools", Value: tools}}
		if p.PositionalArgs {
			o = append(o, capnweb.Field{Key: "positionalArgs", Value: true})
		}
		if p.Prelude != "" {
			o = append(o, capnweb.Field{Key: "prelude", Value: p.Prelude})
		}
		if p.ProxySource != "" {
			o = append(o, capnweb.Field{Key: "proxySource", Value: p.ProxySource})
		}
		out[i] = o
	}
	return out
}

func providersFromWire(v any) ([]protocol.ProviderDescriptor, error) {
	if isAbsent(v) {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, shapeError("execute: providers must be an array of provider descriptors")
	}
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]protocol.ProviderDescriptor, len(list))
	for i, item := range list {
		m, ok := asMap(item)
		if !ok {
			return nil, shapeError("execute: providers[%d] must be an object", i)
		}
		name, ok := m["name"].(string)
		if !ok {
			return nil, shapeError("execute: providers[%d].name must be a string", i)
		}
		p := protocol.ProviderDescriptor{Name: name}
		tools, ok := m["tools"].([]any)
		if !ok && !isAbsent(m["tools"]) {
			return nil, shapeError("execute: providers[%d].tools must be an array of strings", i)
		}
		if tools != nil {
			p.Tools = make([]string, 0, len(tools))
		}
		for j, t := range tools {
			s, ok := t.(string)
			if !ok {
				return nil, shapeError("execute: providers[%d].tools[%d] must be a string", i, j)
			}
			p.Tools = append(p.Tools, s)
		}
		b, err := optionalBool(m, "positionalArgs")
		if err != nil {
			return nil, shapeError("execute: providers[%d].%v", i, err)
		}
		if b != nil {
			p.PositionalArgs = *b
		}
		if p.Prelude, err = optionalString(m, "prelude"); err != nil {
			return nil, shapeError("execute: providers[%d].%v", i, err)
		}
		if p.ProxySource, err = optionalString(m, "proxySource"); err != nil {
			return nil, shapeError("execute: providers[%d].%v", i, err)
		}
		out[i] = p
	}
	return out, nil
}

// asMap reads a received plain object, whether the session decoded it to
// a map or to an ordered capnweb.Object.
func asMap(v any) (map[string]any, bool) {
	switch o := v.(type) {
	case map[string]any:
		return o, true
	case capnweb.Object:
		return o.Map(), true
	}
	return nil, false
}

func isAbsent(v any) bool {
	if v == nil {
		return true
	}
	_, undef := v.(capnweb.UndefinedValue)
	return undef
}

func optionalBool(m map[string]any, key string) (*bool, error) {
	v, ok := m[key]
	if !ok || isAbsent(v) {
		return nil, nil
	}
	b, ok := v.(bool)
	if !ok {
		return nil, fmt.Errorf("%s must be a boolean", key)
	}
	return &b, nil
}

func optionalString(m map[string]any, key string) (string, error) {
	v, ok := m[key]
	if !ok || isAbsent(v) {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s must be a string", key)
	}
	return s, nil
}

// ---- call options ----------------------------------------------------------

func optionsToWire(req *protocol.ExecuteRequest) (capnweb.Object, error) {
	var o capnweb.Object
	if !req.Timeout.IsZero() {
		if req.Timeout.IsLifted() {
			o = append(o, capnweb.Field{Key: "timeout", Value: nil})
		} else {
			ms, _ := req.Timeout.Millis()
			o = append(o, capnweb.Field{Key: "timeout", Value: ms})
		}
	}
	if req.CountHostWaits != nil {
		o = append(o, capnweb.Field{Key: "countHostWaits", Value: *req.CountHostWaits})
	}
	if req.RetainHandles {
		o = append(o, capnweb.Field{Key: "retainHandles", Value: true})
	}
	if req.Modules != nil {
		pairs := protocol.ModulePairsOf(req.Modules)
		mods := make([]any, len(pairs))
		for i, p := range pairs {
			src, err := moduleToWire(p.Module)
			if err != nil {
				var kind *protocol.UnsupportedModuleKindError
				if errors.As(err, &kind) {
					return nil, protocol.NewUnsupportedModuleKindError(p.Name, kind.Kind)
				}
				return nil, fmt.Errorf("module %q: %w", p.Name, err)
			}
			mods[i] = []any{p.Name, src}
		}
		o = append(o, capnweb.Field{Key: "modules", Value: mods})
	}
	if o == nil {
		o = capnweb.Object{}
	}
	return o, nil
}

// applyOptions sets the request fields the wire options carry. A member
// that is absent (or undefined) leaves the field absent.
func applyOptions(req *protocol.ExecuteRequest, v any) error {
	if isAbsent(v) {
		return nil
	}
	m, ok := asMap(v)
	if !ok {
		return shapeError("execute: options must be an object")
	}
	if t, present := m["timeout"]; present {
		if _, undef := t.(capnweb.UndefinedValue); !undef {
			switch t := t.(type) {
			case nil:
				req.Timeout = protocol.TimeoutLifted()
			case float64:
				req.Timeout = protocol.TimeoutOf(t)
			default:
				return shapeError("execute: options.timeout must be a number or null")
			}
		}
	}
	b, err := optionalBool(m, "countHostWaits")
	if err != nil {
		return shapeError("execute: options.%v", err)
	}
	req.CountHostWaits = b
	if b, err = optionalBool(m, "retainHandles"); err != nil {
		return shapeError("execute: options.%v", err)
	} else if b != nil {
		req.RetainHandles = *b
	}
	if mods, present := m["modules"]; present && !isAbsent(mods) {
		list, ok := mods.([]any)
		if !ok {
			return shapeError("execute: options.modules must be an array of [name, source] pairs")
		}
		pairs := make([]protocol.ModulePair, len(list))
		for i, item := range list {
			pair, ok := item.([]any)
			if !ok || len(pair) != 2 {
				return shapeError("execute: options.modules[%d] must be a [name, source] pair", i)
			}
			name, ok := pair[0].(string)
			if !ok {
				return shapeError("execute: options.modules[%d] must start with a string name", i)
			}
			mod, err := moduleFromWire(name, pair[1])
			if err != nil {
				return err
			}
			pairs[i] = protocol.ModulePair{Name: name, Module: mod}
		}
		mm, err := protocol.ModuleMapOf(pairs)
		if err != nil {
			return err
		}
		req.Modules = mm
	}
	return nil
}

// moduleToWire is the capnweb value of a module source: a string for an ES
// module, or an object with one member named after the kind.
func moduleToWire(m protocol.Module) (any, error) {
	switch m.Kind {
	case "", protocol.KindJS:
		return m.Source, nil
	case protocol.KindCJS, protocol.KindText:
		return capnweb.Object{{Key: string(m.Kind), Value: m.Source}}, nil
	case protocol.KindJSON:
		v, err := protocol.ParseForDispatchOrdered(m.Source)
		if err != nil {
			return nil, fmt.Errorf("its json source is not JSON: %w", err)
		}
		return capnweb.Object{{Key: "json", Value: fromCodecValue(v)}}, nil
	case protocol.KindData:
		return capnweb.Object{{Key: "data", Value: capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: m.Data}}}, nil
	default:
		return nil, protocol.NewUnsupportedModuleKindError("", string(m.Kind))
	}
}

// moduleFromWire reads a module source. Anything outside the five kinds is
// *protocol.UnsupportedModuleKindError, which the run reports in its
// envelope like the local executor does.
func moduleFromWire(name string, v any) (protocol.Module, error) {
	if s, ok := v.(string); ok {
		return protocol.Module{Kind: protocol.KindJS, Source: s}, nil
	}
	m, ok := asMap(v)
	if !ok || len(m) != 1 {
		return protocol.Module{}, protocol.NewUnsupportedModuleKindError(name, describeKind(v))
	}
	for k, val := range m {
		switch kind := protocol.ModuleKind(k); kind {
		case protocol.KindJS, protocol.KindCJS, protocol.KindText:
			s, ok := val.(string)
			if !ok {
				return protocol.Module{}, shapeError("execute: module %q: its %s source must be a string", name, k)
			}
			return protocol.Module{Kind: kind, Source: s}, nil
		case protocol.KindJSON:
			text, err := protocol.StringifyForDispatch(toCodecValue(val))
			if err != nil {
				return protocol.Module{}, shapeError("execute: module %q: its json value cannot be JSON: %v", name, err)
			}
			return protocol.Module{Kind: kind, Source: text}, nil
		case protocol.KindData:
			b, ok := capnweb.AsBytes(val)
			if !ok {
				return protocol.Module{}, shapeError("execute: module %q: its data must be an ArrayBuffer or a Uint8Array", name)
			}
			return protocol.Module{Kind: kind, Data: b}, nil
		default:
			return protocol.Module{}, protocol.NewUnsupportedModuleKindError(name, k)
		}
	}
	panic("unreachable")
}

func describeKind(v any) string {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 {
			return "an empty object"
		}
		return "an object with several members"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// toCodecValue maps a decoded capnweb value onto what the dispatch codec
// stringifies, the way JSON.stringify would see it.
func toCodecValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = toCodecValue(e)
		}
		return out
	case capnweb.Object:
		out := make(protocol.Object, len(v))
		for i, f := range v {
			out[i] = protocol.Member{Key: f.Key, Value: toCodecValue(f.Value)}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toCodecValue(e)
		}
		return out
	case capnweb.UndefinedValue:
		return protocol.Undefined
	case time.Time:
		return v.UTC().Format("2006-01-02T15:04:05.000Z")
	case *big.Int:
		return v.String()
	case capnweb.Bytes:
		return v.Data
	default:
		return v
	}
}

// fromCodecValue maps a value ParseForDispatchOrdered produced onto a
// capnweb value that keeps member order.
func fromCodecValue(v any) any {
	switch v := v.(type) {
	case protocol.Object:
		o := make(capnweb.Object, len(v))
		for i, m := range v {
			o[i] = capnweb.Field{Key: m.Key, Value: fromCodecValue(m.Value)}
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fromCodecValue(e)
		}
		return out
	default:
		return v
	}
}

// ---- results ---------------------------------------------------------------

func resultToWire(m protocol.ExecuteResultMessage) capnweb.Object {
	o := capnweb.Object{}
	if m.ResultJSON != "" {
		o = append(o, capnweb.Field{Key: "resultJson", Value: m.ResultJSON})
	}
	if m.Error != nil {
		o = append(o, capnweb.Field{Key: "error", Value: *m.Error})
	}
	logs := make([]any, len(m.Logs))
	for i, l := range m.Logs {
		logs[i] = capnweb.Object{{Key: "level", Value: string(l.Level)}, {Key: "text", Value: l.Text}}
	}
	o = append(o, capnweb.Field{Key: "logs", Value: logs})
	if m.ExecutionID != "" {
		o = append(o, capnweb.Field{Key: "executionId", Value: m.ExecutionID})
		handles := make([]any, len(m.Handles))
		for i, h := range m.Handles {
			handles[i] = h
		}
		o = append(o, capnweb.Field{Key: "handles", Value: handles})
	}
	if u := m.Usage; u != nil {
		o = append(o, capnweb.Field{Key: "usage", Value: usageToWire(u)})
	}
	if m.Failure != protocol.FailureNone {
		o = append(o, capnweb.Field{Key: "failure", Value: string(m.Failure)})
	}
	return o
}

func resultFromWire(v any) (*protocol.ExecuteResult, error) {
	m, ok := asMap(v)
	if !ok {
		return nil, protocolMismatch("execute answered %s, not an ExecuteResultMessage", describeKind(v))
	}
	r := &protocol.ExecuteResult{}
	var err error
	if r.ResultJSON, err = optionalString(m, "resultJson"); err != nil {
		return nil, protocolMismatch("ExecuteResultMessage.%v", err)
	}
	if e, present := m["error"]; present && !isAbsent(e) {
		s, ok := e.(string)
		if !ok {
			return nil, protocolMismatch("ExecuteResultMessage.error must be a string")
		}
		r.Error, r.HasError = s, true
		// An extension: a kind this client cannot read is ignored.
		if f, _ := m["failure"].(string); protocol.FailureKind(f).Known() {
			r.Failure = protocol.FailureKind(f)
		}
	}
	if logs, present := m["logs"]; present && !isAbsent(logs) {
		list, ok := logs.([]any)
		if !ok {
			return nil, protocolMismatch("ExecuteResultMessage.logs must be an array")
		}
		for i, l := range list {
			lm, ok := asMap(l)
			level, ok1 := lm["level"].(string)
			text, ok2 := lm["text"].(string)
			if !ok || !ok1 || !ok2 {
				return nil, protocolMismatch("ExecuteResultMessage.logs[%d] must be {level, text}", i)
			}
			r.Logs = append(r.Logs, protocol.LogLine{Level: protocol.LogLevel(level), Text: text})
		}
	}
	if r.ExecutionID, err = optionalString(m, "executionId"); err != nil {
		return nil, protocolMismatch("ExecuteResultMessage.%v", err)
	}
	if h, present := m["handles"]; present && !isAbsent(h) {
		list, ok := h.([]any)
		if !ok {
			return nil, protocolMismatch("ExecuteResultMessage.handles must be an array of strings")
		}
		for _, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, protocolMismatch("ExecuteResultMessage.handles must be an array of strings")
			}
			r.Handles = append(r.Handles, s)
		}
	}
	r.Usage = usageFromWire(m["usage"])
	return r, nil
}

// ---- the serialized exchange -------------------------------------------------

func headersToWire(hs []protocol.Header) []any {
	out := make([]any, len(hs))
	for i, h := range hs {
		out[i] = []any{h[0], h[1]}
	}
	return out
}

func headersFromWire(where string, v any) ([]protocol.Header, error) {
	if isAbsent(v) {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		if hs, ok := v.(capnweb.Headers); ok {
			out := make([]protocol.Header, len(hs))
			for i, h := range hs {
				out[i] = protocol.Header(h)
			}
			return out, nil
		}
		return nil, shapeError("%s.headers must be an array of [name, value] pairs", where)
	}
	out := make([]protocol.Header, len(list))
	for i, item := range list {
		pair, ok := item.([]any)
		if !ok || len(pair) != 2 {
			return nil, shapeError("%s.headers[%d] must be a [name, value] pair", where, i)
		}
		k, ok1 := pair[0].(string)
		val, ok2 := pair[1].(string)
		if !ok1 || !ok2 {
			return nil, shapeError("%s.headers[%d] must hold two strings", where, i)
		}
		out[i] = protocol.Header{k, val}
	}
	return out, nil
}

func requestToWire(r protocol.OutboundRequest) capnweb.Object {
	var body any
	if r.Body != nil {
		body = capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: r.Body}
	}
	return capnweb.Object{
		{Key: "method", Value: r.Method},
		{Key: "url", Value: r.URL},
		{Key: "headers", Value: headersToWire(r.Headers)},
		{Key: "body", Value: body},
	}
}

func requestFromWire(v any) (protocol.OutboundRequest, error) {
	const where = "request"
	m, ok := asMap(v)
	if !ok {
		return protocol.OutboundRequest{}, shapeError("the request must be an object {method, url, headers, body}")
	}
	var r protocol.OutboundRequest
	if r.Method, ok = m["method"].(string); !ok {
		return r, shapeError("request.method must be a string")
	}
	if r.URL, ok = m["url"].(string); !ok {
		return r, shapeError("request.url must be a string")
	}
	var err error
	if r.Headers, err = headersFromWire(where, m["headers"]); err != nil {
		return r, err
	}
	if b := m["body"]; !isAbsent(b) {
		data, ok := capnweb.AsBytes(b)
		if !ok {
			return r, shapeError("request.body must be an ArrayBuffer or null")
		}
		if data == nil {
			data = []byte{}
		}
		r.Body = data
	}
	return r, nil
}

func responseToWire(r protocol.OutboundResponse) capnweb.Object {
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	return capnweb.Object{
		{Key: "status", Value: r.Status},
		{Key: "statusText", Value: r.StatusText},
		{Key: "headers", Value: headersToWire(r.Headers)},
		{Key: "body", Value: capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: body}},
	}
}

func responseFromWire(v any) (protocol.OutboundResponse, error) {
	const where = "response"
	m, ok := asMap(v)
	if !ok {
		return protocol.OutboundResponse{}, shapeError("the response must be an object {status, statusText, headers, body}")
	}
	var r protocol.OutboundResponse
	status, ok := m["status"].(float64)
	if !ok || status != math.Trunc(status) || status < 0 || status > 999 {
		return r, shapeError("response.status must be a whole number from 0 to 999")
	}
	r.Status = int(status)
	st, err := optionalString(m, "statusText")
	if err != nil {
		return r, shapeError("response.%v", err)
	}
	r.StatusText = st
	if r.Headers, err = headersFromWire(where, m["headers"]); err != nil {
		return r, err
	}
	if b := m["body"]; !isAbsent(b) {
		data, ok := capnweb.AsBytes(b)
		if !ok {
			return r, shapeError("response.body must be an ArrayBuffer")
		}
		r.Body = data
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	return r, nil
}
