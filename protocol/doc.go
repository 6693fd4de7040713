// Package protocol is the machine-readable half of the executor contract
// (executor-protocol.md): the request, result and wire message types, the
// bounds every run is held to, every declared failure with its pinned text,
// the fault-code taxonomy, provider-name validation and the dispatch codec.
//
// Both sides of the wire build on this package: the local goja executor, the
// remote backend, the executor server and the gateway. It depends on nothing
// beyond the standard library, so any Go program can implement or call an
// executor from it alone.
package protocol
