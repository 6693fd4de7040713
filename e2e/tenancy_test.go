package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executortest"
)

// remoteTenants is a gateway whose tenants alpha, beta and gamma all run
// on a remote group of two executor servers (--max-workers 2, a member
// key), with the gateway's stderr kept.
type remoteTenants struct {
	url       string // the gateway's http:// address
	keys      map[string]string
	members   [2]*process
	admins    [2]string // the members' admin http:// addresses
	memberKey string
	log       *testutil.Buffer
}

func startRemoteTenants(t *testing.T) *remoteTenants {
	t.Helper()
	rt := &remoteTenants{keys: map[string]string{}, log: &testutil.Buffer{}}
	var memberHash string
	rt.memberKey, memberHash = newKey(t)
	for i := range rt.members {
		rt.members[i], rt.admins[i] = startExecutorServerWithAdmin(t, "--key-hash", memberHash)
	}
	hashes := map[string]string{}
	for _, name := range []string{"alpha", "beta", "gamma"} {
		rt.keys[name], hashes[name] = newKey(t)
	}
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: far
    type: remote
    remote:
      members:
        - {url: %q, keyEnv: MEMBER_KEY}
        - {url: %q, keyEnv: MEMBER_KEY}
      healthInterval: 200ms
tenants:
  - name: alpha
    backend: far
    keys: [{name: k, hash: %s}]
    policy: {memoryMB: 32, weight: 2}
  - name: beta
    backend: far
    keys: [{name: k, hash: %s}]
  - name: gamma
    backend: far
    keys: [{name: k, hash: %s}]
    policy: {cpuSlots: 3}
routes:
  - {path: /v1/executor, kind: executor}
`, rt.members[0].url, rt.members[1].url, hashes["alpha"], hashes["beta"], hashes["gamma"])
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBinary(t), "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "MEMBER_KEY="+rt.memberKey)
	cmd.Stderr = io.MultiWriter(rt.log, &prefixWriter{t: t})
	rt.url = startProcess(t, "the gateway", cmd, nil).url
	return rt
}

func (rt *remoteTenants) dial(ctx context.Context, t *testing.T, tenant string) *remote.Executor {
	t.Helper()
	return dialWithKey(ctx, t, "ws"+strings.TrimPrefix(rt.url, "http")+"/v1/executor", rt.keys[tenant])
}

// Two tenants' runs parked at once on a remote group hold worker processes
// of their own on the members, which count them by tenant; nothing runs
// as a tenant the gateway did not name.
func TestRemoteGroupKeepsTenantsOnWorkersOfTheirOwn(t *testing.T) {
	rt := startRemoteTenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	release := make(chan struct{})
	var parked, done sync.WaitGroup
	errs := make(chan error, 4)
	for _, tenant := range []string{"alpha", "alpha", "beta", "beta"} {
		ex := rt.dial(ctx, t, tenant)
		parked.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			_, err := ex.Execute(ctx, &protocol.ExecuteRequest{
				Code:      "async () => await s.wait()",
				Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}},
				Dispatch: func(context.Context, string, string, string) (string, error) {
					once.Do(parked.Done)
					<-release
					return `{"result":1}`, nil
				},
			})
			errs <- err
		}()
	}
	parked.Wait()
	held := map[string]float64{}
	holders := regexp.MustCompile(`(?m)^codemode_tenant_workers\{backend="local",tenant="([^"]*)"\} (\S+)$`)
	for _, admin := range rt.admins {
		_, body := testutil.Get(t, admin+"/metrics")
		for _, m := range holders.FindAllStringSubmatch(body, -1) {
			if m[1] != "alpha" && m[1] != "beta" {
				t.Fatalf("a member runs tenant %q, which the gateway never named:\n%s", m[1], body)
			}
			var n float64
			fmt.Sscan(m[2], &n)
			held[m[1]] += n
		}
	}
	if held["alpha"] < 1 || held["beta"] < 1 {
		t.Fatalf("worker processes held across the members: %v, want some for each of alpha and beta", held)
	}
	close(release)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	counted := map[string]float64{}
	for _, admin := range rt.admins {
		_, body := testutil.Get(t, admin+"/metrics")
		for _, tenant := range []string{"alpha", "beta"} {
			series := fmt.Sprintf(`codemode_executions_total{backend="local",outcome="ok",tenant=%q}`, tenant)
			if strings.Contains(body, series+" ") {
				counted[tenant] += metric(t, body, series)
			}
		}
	}
	if counted["alpha"] != 2 || counted["beta"] != 2 {
		t.Fatalf("the members counted %v executions by tenant, want 2 each", counted)
	}
}

// A tenant's memoryMB reaches the members: its run over the limit reads
// the memory text with the tenant's limit.
func TestRemoteGroupAppliesTheTenantsMemoryLimit(t *testing.T) {
	rt := startRemoteTenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	res, err := rt.dial(ctx, t, "alpha").Execute(ctx, &protocol.ExecuteRequest{
		Code: executortest.Keeps64MB,
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := protocol.NewMemoryLimitError(32).Error(); res.Error != want {
		t.Fatalf("got %+v, want %q", res, want)
	}
}

// A setting the members cannot honour (cpuSlots above their
// --max-workers) fails gamma's call when its session connects, with the
// members' text in the gateway's log; beta on the same members runs.
func TestRemoteGroupRefusesSettingsTheMembersCannotHonour(t *testing.T) {
	rt := startRemoteTenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	_, err := rt.dial(ctx, t, "gamma").Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
	const told = "The executor servers behind this gateway refused this tenant's settings, so the call did not start. The gateway's operator has the details in its log."
	if protocol.CodeOf(err) != protocol.CodeConnectionRejected || err.Error() != told {
		t.Fatalf("gamma: %v, want CONNECTION_REJECTED %q", err, told)
	}
	const refusal = `refusal="executor server refused tenant \"gamma\"'s settings: cpuSlots 3 is more worker processes than this executor server may ever start (--max-workers 2)"`
	// The log reaches this process through a pipe, a moment after the call
	// failed. Each member's refusal is logged when the gateway opens
	// gamma's sessions at start, and again at the call.
	testutil.WaitFor(t, 5*time.Second, func() bool { return strings.Count(rt.log.String(), refusal) == 4 },
		"two refusal lines per member (at start and at the call) in the gateway's log")
	res, err := rt.dial(ctx, t, "beta").Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 2"})
	if err != nil || res.ResultJSON != "2" {
		t.Fatalf("beta: %+v, %v", res, err)
	}
}

// A caller that names a tenant without the member key is refused before
// any upgrade and told why.
func TestMemberRefusesATenantHeaderWithoutTheMemberKey(t *testing.T) {
	_, memberHash := newKey(t)
	member := startExecutorServer(t, "--key-hash", memberHash)
	req, _ := http.NewRequest("GET", "http"+strings.TrimPrefix(member.url, "ws"), nil)
	req.Header.Set("Codemode-Tenant", "alpha")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	const want = "the Codemode-Tenant and Codemode-Tenant-Policy headers are trusted only from a caller presenting a member key (--key-hash): only the gateway may name a tenant\n"
	if resp.StatusCode != 401 || string(body) != want {
		t.Fatalf("%d %q, want 401 %q", resp.StatusCode, body, want)
	}
}
