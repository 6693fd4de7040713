package executorapi

import (
	"errors"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
	"github.com/supolka/codemode-gateway/protocol"
)

// This file joins the contract's fault codes to capnweb, which knows none:
// what an error carries when it crosses to the peer, and which fault a call
// meets when its session ends.

// ErrorProps is the capnweb.ErrorProps of every session that speaks
// ExecutorApi: an error with a code from the taxonomy crosses with its code
// property, and a refusal that says when to retry says it as a number too
// (protocol.RetryAfterProp), so that a client need not parse the text.
var ErrorProps capnweb.ErrorProps = faultProps{}

type faultProps struct{}

func (faultProps) ErrorProps(err error) jsvalue.Object {
	c := protocol.CodeOf(err)
	if c == "" {
		return nil
	}
	props := jsvalue.Object{{Key: "code", Value: string(c)}}
	if d, ok := protocol.RetryAfterOf(err); ok {
		props = append(props, jsvalue.Member{Key: protocol.RetryAfterProp, Value: float64(d.Milliseconds())})
	}
	return props
}

// brokenFault is the error of a call on a stub: the CONNECTION_BROKEN fault
// around it when the call failed because its session ended, else err.
func brokenFault(err error) error {
	var broken *capnweb.BrokenError
	if errors.As(err, &broken) {
		return protocol.Faultf(protocol.CodeConnectionBroken, err)
	}
	return err
}
