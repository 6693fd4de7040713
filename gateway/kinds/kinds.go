// Package kinds are the backend kinds a gateway configuration names, as
// cmd/gateway registers them with the gateway (gateway.Options.Kinds):
// local, a pool of worker processes in this process, and remote, executor
// servers. The gateway itself imports neither backend.
package kinds

import "github.com/supolka/codemode-gateway/gateway/upstream"

// All are every kind, by the type a backend group names.
func All() upstream.Kinds {
	return upstream.Kinds{"local": Local, "remote": Remote}
}
