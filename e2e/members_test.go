package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestRemoteMembersChangeOnReload: with real executor servers on loopback,
// a reload removes one member and adds another, without a restart. The
// removed member finishes the execution it runs and keeps serving the
// handle pinned to it; new executions go to the added member; a member
// added back takes executions again.
func TestRemoteMembersChangeOnReload(t *testing.T) {
	memberKey, memberHash := newKey(t)
	a, adminA := startExecutorServerWithAdmin(t, "--key-hash", memberHash)
	b, adminB := startExecutorServerWithAdmin(t, "--key-hash", memberHash)
	key, hash := newKey(t)
	config := func(members ...string) string {
		var list []string
		for _, m := range members {
			list = append(list, fmt.Sprintf("{url: %q, keyEnv: MEMBER_KEY}", m))
		}
		return fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: pool
    type: remote
    remote: {members: [%s], healthInterval: 200ms}
tenants:
  - {name: app, backend: pool, keys: [{name: app-key, hash: %s}]}
routes:
  - {path: /v1/executor, kind: executor}
`, strings.Join(list, ", "), hash)
	}
	gw := startGatewayProcess(t, config(a.url), "MEMBER_KEY="+memberKey)
	reload := func(cfg string) {
		t.Helper()
		writeFile(t, gw.configPath, cfg)
		if out, err := exec.Command(gatewayBinary(t), "reload", "--admin", strings.TrimPrefix(gw.admin, "http://")).CombinedOutput(); err != nil || string(out) != "reloaded\n" {
			t.Fatalf("gateway reload: %q, %v", out, err)
		}
	}
	ran := func(admin string) float64 {
		_, body := testutil.Get(t, admin+"/metrics")
		return metric(t, body, `codemode_executions_total{backend="local",outcome="ok",tenant="app"}`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex := dialWithKey(ctx, t, "ws"+strings.TrimPrefix(gw.url, "http")+"/v1/executor", key)

	// On A: a retained handle, and an execution held on a tool call.
	grant, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => { let n = 0; return (req) => new Response("A" + (++n)) }`, RetainHandles: true})
	if err != nil || grant.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", grant, err)
	}
	// holdUntil is a tool that says it was called, then answers value once
	// release is closed.
	called := make(chan struct{}, 1)
	holdUntil := func(release chan struct{}, value string) protocol.DispatchFunc {
		return func(ctx context.Context, _, _, _ string) (string, error) {
			called <- struct{}{}
			select {
			case <-release:
				return `{"result":"` + value + `"}`, nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
	}
	release := make(chan struct{})
	hold := holdUntil(release, "released")
	held := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => await s.wait()`,
			Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}}, Dispatch: hold})
		if err != nil {
			res = &protocol.ExecuteResult{Error: err.Error(), HasError: true}
		}
		held <- res
	}()
	<-called

	// The reload removes A and adds B.
	reload(config(b.url))
	for i := range 3 {
		if res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"}); err != nil || res.ResultJSON != "1" {
			t.Fatalf("execution %d after the reload: %+v, %v", i, res, err)
		}
	}
	if onA, onB := ran(adminA), ran(adminB); onA != 1 || onB != 3 {
		t.Fatalf("after the reload A ran %v and B %v executions; want A's grant alone (1) and the three new ones on B", onA, onB)
	}
	// A finishes the execution it was running, and serves its handle.
	close(release)
	if res := <-held; res.HasError || res.ResultJSON != `"released"` {
		t.Fatalf("the execution in flight on the removed member: %+v", res)
	}
	for i := 1; i <= 2; i++ {
		resp, err := ex.InvokeHandle(ctx, grant.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
		if err != nil || string(resp.Body) != fmt.Sprintf("A%d", i) {
			t.Fatalf("the handle pinned to the removed member, call %d: %+v, %v", i, resp, err)
		}
	}
	if err := ex.CloseHandles(ctx, grant.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if onA := ran(adminA); onA != 2 {
		t.Fatalf("A ran %v executions, want 2 (the grant and the one held across the reload)", onA)
	}

	// A added back beside B: with B busy, A takes the next execution.
	reload(config(b.url, a.url))
	testutil.WaitFor(t, 15*time.Second, func() bool {
		_, body := testutil.Get(t, gw.admin+"/metrics")
		return strings.Contains(body, `codemode_backend_healthy{backend="pool",member="pool/1"} 1`)
	}, "A to pass its health check again")
	release2 := make(chan struct{})
	hold2 := holdUntil(release2, "ok")
	done := make(chan error, 1)
	go func() {
		_, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => await s.wait()`,
			Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}}, Dispatch: hold2})
		done <- err
	}()
	<-called
	if res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 2"}); err != nil || res.ResultJSON != "2" {
		t.Fatalf("execution beside a busy member: %+v, %v", res, err)
	}
	close(release2)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if onA, onB := ran(adminA), ran(adminB); onA != 3 || onB != 4 {
		t.Fatalf("after A came back A ran %v and B %v; want one of the two new executions on each", onA, onB)
	}
}
