// Package upstream says what the gateway needs of a backend group's
// members, its upstreams, and how a kind of backend makes them: the group
// picks a member for each run (the least loaded that takes runs) and the
// member carries the run to an executor. The gateway imports no backend:
// the kinds it runs (local, remote) are given to it by cmd/gateway
// (gateway/kinds).
package upstream

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/supolka/codemode-gateway/capnweb"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

// Health is a member in another process, an executor server: the gateway
// checks its health between executions, and a tenant never reads its
// address.
type Health interface {
	Ping(ctx context.Context) error
	// Draining: the server refused an execution as draining on the
	// session it serves now; it takes no new executions, and keeps
	// serving the handles pinned to it until it closes that session.
	Draining() bool
}

// Tenanted is a member that opens a session per tenant: a tenant's
// retained executions are reached through its own.
type Tenanted interface {
	For(tenant string) protocol.Executor
}

// Prober is a member that opens a tenant's session ahead of its calls, so
// that a member unable to honour the tenant's settings says so at once.
type Prober interface {
	// Probe opens tenant's session unless a probe already had the
	// member's answer on it; refused reports that the member refused the
	// tenant's settings, with its refusal's text.
	Probe(ctx context.Context, tenant string) (refusal string, refused bool)
	// Reprobe forgets the probes' answers: the member may have restarted
	// with other flags.
	Reprobe()
}

// SettingsRefused reports whether err is a member's refusal of a tenant's
// settings at connect time (executorserver's MemberAPI), which says
// nothing of its health.
func SettingsRefused(err error) (*capnweb.RefusedError, bool) {
	var re *capnweb.RefusedError
	if errors.As(err, &re) && re.StatusCode == http.StatusBadRequest {
		return re, true
	}
	return nil, false
}

// Env is what a kind is told of the gateway that runs the group.
type Env struct {
	// Logger is the gateway's.
	Logger *slog.Logger
	// Policy is a tenant's policy as the configuration in force says. A
	// member asks for it on every run it places or session it opens, so
	// a reload takes effect without a restart.
	Policy func(tenant string) config.Policy
}

// A Kind makes the members of the backend groups of one type. For a group
// of listed or discovered members (remote) it makes the member of entry m,
// at start, on a reload and on each resolution; for a group that is one
// member (local) it makes that member, m zero. A member that runs worker
// processes here reports them with Stats (serving.PoolReporter); one in
// another process implements Health, and Tenanted when it keeps tenants
// apart.
type Kind func(b config.Backend, m config.RemoteMember, env Env) (protocol.PolicyExecutor, error)

// Kinds are the kinds a gateway runs, by the type a group names.
type Kinds map[string]Kind
