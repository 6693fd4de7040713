package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

var adminListening = regexp.MustCompile(`admin listening on (https?://[^\s"]+)`)

// runningGateway is a `gateway serve` process.
type runningGateway struct {
	url, admin string // http:// addresses
	proc       *process
	configPath string
}

// startGateway runs `gateway serve` with the configuration text on a free
// loopback port and returns its http:// address.
func startGateway(t *testing.T, config string, env ...string) string {
	return startGatewayProcess(t, config, env...).url
}

// startGatewayProcess is startGateway with an admin listener, keeping the
// process for signals.
func startGatewayProcess(t testing.TB, config string, env ...string) *runningGateway {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gatewayBinary(t), "serve", "--config", path, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	rg := &runningGateway{configPath: path}
	// The admin line comes before the gateway line, on the same reading
	// goroutine that then reports the address: the write below happens
	// before startProcess returns.
	rg.proc = startProcess(t, "the gateway", cmd, func(line string) {
		if m := adminListening.FindStringSubmatch(line); m != nil {
			rg.admin = m[1]
		}
	})
	rg.url = rg.proc.url
	return rg
}

type twoTenants struct {
	url               string // the gateway's http:// address
	alphaKey, betaKey string
	gammaKey          string // gamma shares beta's backend, with the default policy
	memberA, memberB  *process
}

// startTwoTenants runs two executor servers (a remote group), and a gateway
// with tenant alpha on its local backend and tenant beta on the remote group.
func startTwoTenants(t *testing.T) *twoTenants {
	memberKey, memberHash := newKey(t)
	tt := &twoTenants{}
	tt.memberA = startExecutorServer(t, "--key-hash", memberHash)
	tt.memberB = startExecutorServer(t, "--key-hash", memberHash)
	var alphaHash, betaHash string
	tt.alphaKey, alphaHash = newKey(t)
	tt.betaKey, betaHash = newKey(t)
	var gammaHash string
	tt.gammaKey, gammaHash = newKey(t)
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: local
    type: local
    local: {maxWorkers: 2}
  - name: far
    type: remote
    remote:
      members:
        - {url: %q, keyEnv: MEMBER_KEY}
        - {url: %q, keyEnv: MEMBER_KEY}
      healthInterval: 200ms
tenants:
  - name: alpha
    backend: local
    keys: [{name: alpha-key, hash: %s}]
  - name: beta
    backend: far
    keys: [{name: beta-key, hash: %s}]
    policy: {maxConcurrent: 2}
  - name: gamma
    backend: far
    keys: [{name: gamma-key, hash: %s}]
routes:
  - path: /v1/executor
    kind: executor
  - path: /v1/beta-only
    kind: executor
    tenants: [beta]
`, tt.memberA.url, tt.memberB.url, alphaHash, betaHash, gammaHash)
	tt.url = startGateway(t, cfg, "MEMBER_KEY="+memberKey)
	return tt
}

func (tt *twoTenants) dial(t *testing.T, key string) *remote.Executor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// No retries: each call reads the gateway's one answer.
	ex, err := remote.Dial(ctx, "ws"+strings.TrimPrefix(tt.url, "http")+"/v1/executor", remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, Retry: remote.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// TestGatewayTwoTenantsFromJavaScript drives both tenants through the
// gateway with the JavaScript client: programs and tool calls crossing one
// hop (alpha, local) and two hops (beta, remote executor server), handles
// refused across tenants, and the HTTP refusals.
func TestGatewayTwoTenantsFromJavaScript(t *testing.T) {
	nodeModules(t)
	startTwoTenants(t).runJS(t, "gateway.test.mjs")
}

// runJS runs the node test file against the gateway, with GATEWAY_URL,
// ALPHA_KEY and GAMMA_KEY set.
func (tt *twoTenants) runJS(t *testing.T, file string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", file)
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+tt.url, "ALPHA_KEY="+tt.alphaKey, "GAMMA_KEY="+tt.gammaKey)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test %s:\n%s", file, out)
	if err != nil {
		t.Fatalf("the scenarios of %s failed from JavaScript: %v", file, err)
	}
}

// TestGatewayRemoteMemberKilledMidRun: the run on the killed member fails
// with CONNECTION_BROKEN through the gateway, and new runs go to the member
// that is still up.
func TestGatewayRemoteMemberKilledMidRun(t *testing.T) {
	tt := startTwoTenants(t)
	beta := tt.dial(t, tt.betaKey)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Two runs, each parked in a tool call: one lands on each member
	// (fewest in flight first).
	parked := make(chan struct{}, 2)
	dispatch := func(ctx context.Context, _, _, _ string) (string, error) {
		parked <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := beta.Execute(ctx, &protocol.ExecuteRequest{
				Code:      `async () => await store.wait()`,
				Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"wait"}}},
				Dispatch:  dispatch,
				Timeout:   protocol.TimeoutOf(60000),
			})
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		select {
		case <-parked:
		case <-time.After(30 * time.Second):
			t.Fatal("the runs never made their tool calls")
		}
	}
	tt.memberA.kill()
	testutil.WaitBroken(t, errs, 30*time.Second, "the run on the killed member")
	// New runs go to the healthy member (retrying while the gateway notices).
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := beta.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => 'still served'`})
		if err == nil && res.ResultJSON == `"still served"` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new runs never reached the healthy member: %+v, %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Beta's policy bounds it to two executions in flight: one is still
	// parked, so two more at once make one too many.
	block := make(chan struct{})
	defer close(block)
	holding := make(chan struct{})
	hold := func(ctx context.Context, _, _, _ string) (string, error) {
		close(holding)
		select {
		case <-block:
		case <-ctx.Done():
		}
		return `{"result":1}`, nil
	}
	go beta.Execute(ctx, &protocol.ExecuteRequest{
		Code: `async () => await s.h()`, Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"h"}}}, Dispatch: hold,
	})
	select {
	case <-holding:
	case <-time.After(30 * time.Second):
		t.Fatal("the second run never made its tool call")
	}
	_, err := beta.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => 1`})
	var limit *protocol.TenantLimitError
	if protocol.CodeOf(err) != protocol.CodeQueueOverflow || !errors.As(err, &limit) ||
		err.Error() != protocol.NewTenantLimitError("beta", "2 executions in flight", limit.RetryAfter).Error() {
		t.Fatalf("a third run in flight gave %v, want the tenant's QUEUE_OVERFLOW", err)
	}
}

// TestGatewayRefusals: 401 and 403 from the real binary.
func TestGatewayRefusals(t *testing.T) {
	tt := startTwoTenants(t)
	for name, c := range map[string]struct {
		path, key string
		want      int
	}{
		"no credential":         {"/v1/executor", "", 401},
		"unknown key":           {"/v1/executor", auth.NewAPIKey(), 401},
		"alpha on beta's route": {"/v1/beta-only", tt.alphaKey, 403},
	} {
		req, _ := http.NewRequest("GET", tt.url+c.path, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.want)
		}
	}
}
