package executorapi

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
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
		o := jsvalue.Object{{Key: "name", Value: p.Name}, {Key: "tools", Value: tools}}
		if p.PositionalArgs {
			o = append(o, jsvalue.Member{Key: "positionalArgs", Value: true})
		}
		if p.Prelude != "" {
			o = append(o, jsvalue.Member{Key: "prelude", Value: p.Prelude})
		}
		if p.ProxySource != "" {
			o = append(o, jsvalue.Member{Key: "proxySource", Value: p.ProxySource})
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
// a map or to an ordered jsvalue.Object.
func asMap(v any) (map[string]any, bool) {
	switch o := v.(type) {
	case map[string]any:
		return o, true
	case jsvalue.Object:
		return o.Map(), true
	}
	return nil, false
}

func isAbsent(v any) bool {
	if v == nil {
		return true
	}
	_, undef := v.(jsvalue.UndefinedValue)
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

func optionsToWire(req *protocol.ExecuteRequest) (jsvalue.Object, error) {
	var o jsvalue.Object
	if !req.Timeout.IsZero() {
		if req.Timeout.IsLifted() {
			o = append(o, jsvalue.Member{Key: "timeout", Value: nil})
		} else {
			ms, _ := req.Timeout.Millis()
			o = append(o, jsvalue.Member{Key: "timeout", Value: ms})
		}
	}
	if req.CountHostWaits != nil {
		o = append(o, jsvalue.Member{Key: "countHostWaits", Value: *req.CountHostWaits})
	}
	if req.RetainHandles {
		o = append(o, jsvalue.Member{Key: "retainHandles", Value: true})
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
		o = append(o, jsvalue.Member{Key: "modules", Value: mods})
	}
	if o == nil {
		o = jsvalue.Object{}
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
		if _, undef := t.(jsvalue.UndefinedValue); !undef {
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
		return jsvalue.Object{{Key: string(m.Kind), Value: m.Source}}, nil
	case protocol.KindJSON:
		v, err := protocol.ParseForDispatchOrdered(m.Source)
		if err != nil {
			return nil, fmt.Errorf("its json source is not JSON: %w", err)
		}
		return jsvalue.Object{{Key: "json", Value: v}}, nil
	case protocol.KindData:
		return jsvalue.Object{{Key: "data", Value: capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: m.Data}}}, nil
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
			text, err := protocol.StringifyForDispatch(jsonValue(val))
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

// jsonValue maps the values a capnweb session decodes that JSON.stringify
// writes in a form of their own onto what the dispatch codec writes for
// them: a Date as its ISO text, a bigint as its digits, a typed array as its
// bytes. Everything else is already a JSON value. The decoded value is the
// server's own, so it is changed in place.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonValue(e)
		}
	case jsvalue.Object:
		for i := range v {
			v[i].Value = jsonValue(v[i].Value)
		}
	case []any:
		for i, e := range v {
			v[i] = jsonValue(e)
		}
	case time.Time:
		return v.UTC().Format("2006-01-02T15:04:05.000Z")
	case *big.Int:
		return v.String()
	case capnweb.Bytes:
		return v.Data
	}
	return v
}

// ---- results ---------------------------------------------------------------

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

func requestToWire(r protocol.OutboundRequest) jsvalue.Object {
	var body any
	if r.Body != nil {
		body = capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: r.Body}
	}
	return jsvalue.Object{
		{Key: "method", Value: r.Method},
		{Key: "url", Value: r.URL},
		{Key: "headers", Value: headersToWire(r.Headers)},
		{Key: "body", Value: body},
	}
}

func requestFromWire(v any) (r protocol.OutboundRequest, err error) {
	m, ok := asMap(v)
	if !ok {
		return r, shapeError("the request must be an object {method, url, headers, body}")
	}
	if r.Method, ok = m["method"].(string); !ok {
		return r, shapeError("request.method must be a string")
	}
	if r.URL, ok = m["url"].(string); !ok {
		return r, shapeError("request.url must be a string")
	}
	if r.Headers, err = headersFromWire("request", m["headers"]); err != nil {
		return r, err
	}
	r.Body, err = bodyFromWire("request", m["body"], "an ArrayBuffer or null")
	return r, err
}

func responseToWire(r protocol.OutboundResponse) jsvalue.Object {
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	return jsvalue.Object{
		{Key: "status", Value: r.Status},
		{Key: "statusText", Value: r.StatusText},
		{Key: "headers", Value: headersToWire(r.Headers)},
		{Key: "body", Value: capnweb.Bytes{Type: capnweb.TypeArrayBuffer, Data: body}},
	}
}

func responseFromWire(v any) (r protocol.OutboundResponse, err error) {
	m, ok := asMap(v)
	if !ok {
		return r, shapeError("the response must be an object {status, statusText, headers, body}")
	}
	status, ok := m["status"].(float64)
	if !ok || status != math.Trunc(status) || status < 0 || status > 999 {
		return r, shapeError("response.status must be a whole number from 0 to 999")
	}
	r.Status = int(status)
	if r.StatusText, err = optionalString(m, "statusText"); err != nil {
		return r, shapeError("response.%v", err)
	}
	if r.Headers, err = headersFromWire("response", m["headers"]); err != nil {
		return r, err
	}
	if r.Body, err = bodyFromWire("response", m["body"], "an ArrayBuffer"); err != nil {
		return r, err
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	return r, nil
}

// bodyFromWire reads the body of a request or response (where): nil when
// absent, else an ArrayBuffer's bytes (never nil); kind is what the
// contract allows there, named in the error.
func bodyFromWire(where string, v any, kind string) ([]byte, error) {
	if isAbsent(v) {
		return nil, nil
	}
	data, ok := capnweb.AsBytes(v)
	if !ok {
		return nil, shapeError("%s.body must be %s", where, kind)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
