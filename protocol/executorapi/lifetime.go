package executorapi

import (
	"context"

	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/jsvalue"
)

// This file holds the handlesLifetime extension. A retained execution in
// the native or disabled mode has no outbound function whose release says
// that its handles closed, so the client lends the server one more
// function for that alone: the server keeps it exactly while the handles
// are open and releases it when they close. Servers say that they keep it
// through extensions(), a method on the main object; a client sends it
// only to a server that names it there, so a server that does not know it
// (the reference JavaScript one) never holds a function it would let go
// of at once.

const (
	// methodExtensions is the main object's method that lists the
	// extensions a server implements.
	methodExtensions = "extensions"
	// extensionHandlesLifetime names the extension, and execute's option
	// member that carries the function.
	extensionHandlesLifetime = "handlesLifetime"
)

// serverExtensions is what extensions() answers.
func serverExtensions() []any { return []any{extensionHandlesLifetime} }

// askExtensions calls extensions() once, after the handshake. A server
// without the method rejects the call, and any answer other than a list of
// strings reads as no extension: the client then speaks the plain contract.
func askExtensions(ctx context.Context, main *capnweb.Stub) map[string]bool {
	v, err := main.Call(ctx, methodExtensions)
	list, ok := v.([]any)
	if err != nil || !ok {
		return nil
	}
	names := make(map[string]bool, len(list))
	for _, item := range list {
		if name, ok := item.(string); ok {
			names[name] = true
		}
	}
	return names
}

// handlesLifetime is the function lent to the server: calling it does
// nothing; its release by the server is the handles closing.
type handlesLifetime struct {
	watch *handlesWatch
}

func (*handlesLifetime) CallMethod(_ context.Context, name string, _ []any) (any, error) {
	if name != "" {
		return nil, capnweb.NotAFunction(name)
	}
	return jsvalue.Undefined, nil
}

// Dispose runs when the server released its last reference.
func (l *handlesLifetime) Dispose() { l.watch.closed() }

// lifetimeOf reads the handlesLifetime member of execute's options: nil
// when absent, a TypeError when it is not a function.
func lifetimeOf(options any) (*capnweb.Stub, error) {
	v, present := optionMember(options, extensionHandlesLifetime)
	if !present || isAbsent(v) {
		return nil, nil
	}
	st, ok := v.(*capnweb.Stub)
	if !ok {
		return nil, shapeError("execute: options.%s must be a function", extensionHandlesLifetime)
	}
	return st, nil
}

// keptStubs are the caller's stubs a retained execution keeps until its
// handles close: its outbound function (stub mode) and its handlesLifetime.
// They all came with one call, so they share its session.
type keptStubs struct {
	stubs []*capnweb.Stub
}

func (k *keptStubs) add(st *capnweb.Stub) { k.stubs = append(k.stubs, st) }

// release releases every stub; Release is idempotent, and so is this.
func (k *keptStubs) release() {
	if k == nil {
		return
	}
	for _, st := range k.stubs {
		st.Release()
	}
}

func (k *keptStubs) session() *capnweb.Session { return k.stubs[0].Session() }
