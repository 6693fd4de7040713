package kinds

import (
	"log/slog"
	"os"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/upstream"
	"github.com/supolka/codemode-gateway/internal/serving"
)

func TestMain(m *testing.M) {
	local.RunWorkerIfRequested() // the local backend re-executes this binary
	os.Exit(m.Run())
}

// What the gateway learns of a member from its methods alone: a local
// group's member reports its pool and needs no health check; a remote
// one is health-checked, keeps a session per tenant, and has no pool.
func TestMembersSayWhatTheyAre(t *testing.T) {
	cfg, err := config.Parse("k.yaml", []byte(`listen: 127.0.0.1:0
backends:
  - {name: here, type: local, local: {maxWorkers: 1}}
  - {name: far, type: remote, remote: {members: [{url: "ws://127.0.0.1:1/"}]}}
tenants: [{name: a, backend: here, keys: [{name: k, hash: "sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb"}]}]
routes: [{path: /v1/executor, kind: executor}]
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	env := upstream.Env{Logger: slog.New(slog.DiscardHandler), Policy: func(string) config.Policy { return config.Policy{} }}
	kinds := All()
	here, err := kinds[cfg.Backends[0].Type](cfg.Backends[0], config.RemoteMember{}, env)
	if err != nil {
		t.Fatal(err)
	}
	defer here.Close()
	far, err := kinds[cfg.Backends[1].Type](cfg.Backends[1], cfg.Backends[1].Remote.Members[0], env)
	if err != nil {
		t.Fatal(err)
	}
	defer far.Close()
	_, pool := here.(serving.PoolReporter)
	_, health := here.(upstream.Health)
	_, tenanted := here.(upstream.Tenanted)
	if !pool || health || tenanted {
		t.Errorf("local member: pool %v, health %v, tenanted %v; want a pool alone", pool, health, tenanted)
	}
	_, pool = far.(serving.PoolReporter)
	_, health = far.(upstream.Health)
	_, tenanted = far.(upstream.Tenanted)
	if pool || !health || !tenanted {
		t.Errorf("remote member: pool %v, health %v, tenanted %v; want health and tenanted", pool, health, tenanted)
	}
}
