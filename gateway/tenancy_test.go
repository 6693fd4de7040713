package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/executorserver"
	"github.com/supolka/codemode-gateway/gateway/config"
	itestutil "github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

func tenancyCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// memberRig is an executor server as `gateway serve --executor-server`
// makes one (without keys, so it trusts every caller as its gateway), on
// the real local backend.
type memberRig struct {
	url     string
	pool    *local.Executor
	srv     *executorserver.Server
	tenants *executorserver.MemberTenants
}

func startMember(t *testing.T, maxWorkers, memoryMB int) *memberRig {
	return startMemberNative(t, maxWorkers, memoryMB, local.NativeOptions{})
}

// startMemberNative is startMember with the member's own native settings
// (NativeOptions{Vetoed: true} is --disable-native-fetch).
func startMemberNative(t *testing.T, maxWorkers, memoryMB int, own local.NativeOptions) *memberRig {
	t.Helper()
	tenants := executorserver.NewMemberTenants()
	log := slog.New(slog.DiscardHandler)
	pool, err := local.New(local.Options{MaxWorkers: maxWorkers, MemoryLimitMB: memoryMB, Shares: tenants.Share, Native: own, NativeOf: tenants.Native, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := executorserver.New(pool, tenants, log, "v-test")
	api := srv.API(executorapi.ServerOptions{})
	hs := httptest.NewServer(api)
	t.Cleanup(func() { hs.Close(); api.Close(); srv.Close() })
	return &memberRig{url: "ws" + strings.TrimPrefix(hs.URL, "http") + "/", pool: pool, srv: srv, tenants: tenants}
}

// tenancyGateway is a gateway whose tenants a and b run on one remote
// member, each under the policy given.
func tenancyGateway(t *testing.T, member, policyA, policyB string, logs *itestutil.Buffer) *Gateway {
	t.Helper()
	cfg, err := config.Parse("t.yaml", []byte(fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - {name: far, type: remote, remote: {members: [{url: %q}], healthInterval: 1h}}
tenants:
  - {name: a, backend: far, keys: [{name: k, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}], policy: {%s}}
  - {name: b, backend: far, keys: [{name: k, hash: sha256:56e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}], policy: {%s}}
routes:
  - {path: /v1/executor, kind: executor}
`, member, policyA, policyB)), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return newGateway(t, cfg, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
}

// parkedRun starts one of tenant's executions that waits in a tool call
// until release closes; it returns once the run is parked.
func parkedRun(ctx context.Context, t *testing.T, tn *tenant, release <-chan struct{}, done chan<- error) {
	parked := make(chan struct{})
	go func() {
		_, err := tn.Execute(ctx, &protocol.ExecuteRequest{
			Code:      "async () => await s.wait()",
			Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}},
			Dispatch: func(context.Context, string, string, string) (string, error) {
				close(parked)
				<-release
				return `{"result":1}`, nil
			},
		})
		done <- err
	}()
	select {
	case <-parked:
	case <-ctx.Done():
		t.Fatal("the run never reached its tool call")
	}
}

// Two tenants of a remote group hold worker processes of their own on the
// member, with the weight and cpuSlots their policies give, and the
// member counts their executions by tenant.
func TestRemoteTenantsHoldWorkersOfTheirOwnOnTheMember(t *testing.T) {
	m := startMember(t, 3, 0)
	var logs itestutil.Buffer
	g := tenancyGateway(t, m.url, "weight: 3, cpuSlots: 1", "", &logs)
	ctx := tenancyCtx(t)
	st := g.state.Load()
	release := make(chan struct{})
	done := make(chan error, 2)
	parkedRun(ctx, t, st.tenants["a"], release, done)
	parkedRun(ctx, t, st.tenants["b"], release, done)
	tw := m.pool.Stats().TenantWorkers
	if len(tw) != 2 || len(tw["a"]) != 1 || len(tw["b"]) != 1 || tw["a"][0] == tw["b"][0] {
		t.Fatalf("the member's worker processes by tenant: %v, want one of its own for each of a and b", tw)
	}
	if got := m.tenants.Share("a"); got != (local.Share{Weight: 3, CPUSlots: 1}) {
		t.Fatalf("the member's share of a: %+v", got)
	}
	if got := m.tenants.Share("b"); got != (local.Share{Weight: 1}) {
		t.Fatalf("the member's share of b: %+v", got)
	}
	close(release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	scrape := httptest.NewRecorder()
	m.srv.AdminHandler("").ServeHTTP(scrape, httptest.NewRequest("GET", "/metrics", nil))
	for _, tn := range []string{"a", "b"} {
		want := fmt.Sprintf(`codemode_executions_total{backend=%q,outcome="ok",tenant=%q} 1`, executorserver.Backend, tn)
		if !slices.Contains(strings.Split(scrape.Body.String(), "\n"), want) {
			t.Fatalf("the member did not count one execution of %s: no line %s in:\n%s", tn, want, scrape.Body.String())
		}
	}
}

// A tenant's memoryMB reaches the member: a run over it fails with the
// memory text naming the tenant's limit, not the member's.
func TestRemoteTenantMemoryLimitReachesTheMember(t *testing.T) {
	m := startMember(t, 2, 0)
	var logs itestutil.Buffer
	g := tenancyGateway(t, m.url, "memoryMB: 32", "", &logs)
	res, err := g.state.Load().tenants["a"].Execute(tenancyCtx(t), &protocol.ExecuteRequest{
		Code: executortest.Keeps64MB,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.NewMemoryLimitError(32).Error(); res.Error != want {
		t.Fatalf("got %+v, want %q", res, want)
	}
}

// The run clock a member reports in a result's usage charges the tenant's
// run-clock budget, as a local group's does. The first run computes past
// the 1 ms budget: 2e5 steps take about 10 ms, and many times that in the
// race detector's worker.
func TestRemoteRunClockChargesTheBudget(t *testing.T) {
	m := startMember(t, 2, 0)
	var logs itestutil.Buffer
	g := tenancyGateway(t, m.url, "budget: {window: 1h, runClock: 1ms}", "", &logs)
	a := g.state.Load().tenants["a"]
	ctx := tenancyCtx(t)
	res, err := a.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => { let x = 0; for (let i = 0; i < 2e5; i++) x += i; return x > 0 }"})
	if err != nil || res.Usage == nil || res.Usage.RunClock <= time.Millisecond {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	_, err = a.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("the run after the budget was spent: %v, want a refusal", err)
	}
}

// A setting the member cannot honour is refused at connect time: the
// gateway logs the member's text, the tenant reads that its settings were
// refused, and the member stays healthy for the other tenant.
func TestRemoteMemberRefusesSettingsItCannotHonour(t *testing.T) {
	m := startMember(t, 2, 0)
	var logs itestutil.Buffer
	g := tenancyGateway(t, m.url, "cpuSlots: 3", "", &logs)
	st := g.state.Load()
	ctx := tenancyCtx(t)
	_, err := st.tenants["a"].Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
	if protocol.CodeOf(err) != protocol.CodeConnectionRejected || err.Error() != refusedText {
		t.Fatalf("a: %v, want CONNECTION_REJECTED %q", err, refusedText)
	}
	line := regexp.MustCompile(`(?m)^time=\S+ level=ERROR msg="executor server refused a tenant's settings; fix the tenant's policy or the member's flags" backend=far member=0 url=\S+ tenant=a refusal="executor server refused tenant \\"a\\"'s settings: cpuSlots 3 is more worker processes than this executor server may ever start \(--max-workers 2\)"$`)
	if !line.MatchString(logs.String()) {
		t.Fatalf("no refusal line in:\n%s", logs.String())
	}
	if !g.groups["far"].current()[0].healthy.Load() {
		t.Fatal("the member was ejected for one tenant's settings")
	}
	if res, err := st.tenants["b"].Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 2"}); err != nil || res.ResultJSON != "2" {
		t.Fatalf("b: %+v, %v", res, err)
	}
}
