package executorserver_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/executorserver"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// startMember is an executor server as `gateway serve --executor-server`
// makes one without keys (so it trusts every caller as its gateway), on a
// local backend of maxWorkers worker processes, and its ws:// URL.
func startMember(t *testing.T, maxWorkers, memoryMB int) string {
	t.Helper()
	tenants := executorserver.NewMemberTenants()
	log := slog.New(slog.DiscardHandler)
	pool, err := local.New(local.Options{MaxWorkers: maxWorkers, MemoryLimitMB: memoryMB, Shares: tenants.Share, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := executorserver.New(pool, tenants, log, "v-test")
	api := srv.API(executorapi.ServerOptions{})
	hs := httptest.NewServer(api)
	t.Cleanup(func() { hs.Close(); api.Close(); srv.Close() })
	return "ws" + strings.TrimPrefix(hs.URL, "http") + "/"
}

// Each refusal of MemberAPI, its whole text.
func TestMemberAPIRefusals(t *testing.T) {
	url := startMember(t, 2, 64)
	httpURL := "http" + strings.TrimPrefix(url, "ws")
	for _, c := range []struct{ tenant, policy, want string }{
		{"a", `{"memoryMB":128}`, `executor server refused tenant "a"'s settings: memoryMB 128 is above this executor server's memory limit of 64 MB (--memory-mb); a tenant can only lower it`},
		{"a", `{"memoryMB":8}`, `executor server refused tenant "a"'s settings: memoryMB 8 is too small for a JavaScript runtime; use at least 16`},
		{"a", `{"weight":1001}`, `executor server refused tenant "a"'s settings: weight 1001 is not a weight: use a number above 0 and at most 1000`},
		{"a", `{"cpuSlots":-1}`, `executor server refused tenant "a"'s settings: cpuSlots -1 must not be negative`},
		{"a", `{"nativeAllow":["10.0.0.0/8"]}`, `executor server refused tenant "a"'s settings: this executor server does not know the setting "nativeAllow"; upgrade it, or leave the setting out`},
		{"a", `{"native":{"allow":["127.0.0.0/8"]}}`, `executor server refused tenant "a"'s settings: native and nativeDeny bound native fetch, which only nativeOutbound allows; send them with it`},
		{"a", `{"nativeOutbound":true,"native":{"allow":["127.0.0.1"]}}`, `executor server refused tenant "a"'s settings: native.allow "127.0.0.1" is not a CIDR range such as 10.0.0.0/8`},
		{"a", `{"nativeOutbound":true,"nativeDeny":["x"]}`, `executor server refused tenant "a"'s settings: nativeDeny "x" is not a CIDR range such as 10.0.0.0/8`},
		{"a", `{"nativeOutbound":true,"native":{"maxResponseBytes":-1}}`, `executor server refused tenant "a"'s settings: native.maxResponseBytes -1 must not be negative`},
		{"a", `{"nativeOutbound":true,"native":{"requestTimeout":"-1s"}}`, `executor server refused tenant "a"'s settings: native.requestTimeout -1s must not be negative`},
		{"a", `{"nativeOutbound":true,"native":{"requestTimeout":"soon"}}`, `executor server refused tenant "a"'s settings: native.requestTimeout "soon" is not a duration such as 30s`},
		{"a", `{"nativeOutbound":true,"native":{"allowAll":true}}`, `executor server refused tenant "a"'s settings: this executor server does not know the setting "native.allowAll"; upgrade it, or leave the setting out`},
		{"a", `[1]`, `executor server refused tenant "a"'s settings: Codemode-Tenant-Policy is not a JSON object of tenant settings`},
		{"", `{"weight":2}`, `Codemode-Tenant-Policy needs Codemode-Tenant: the settings are a tenant's`},
	} {
		req, _ := http.NewRequest("GET", httpURL, nil)
		req.Header.Set(executorserver.TenantHeader, c.tenant)
		req.Header.Set(executorserver.TenantPolicyHeader, c.policy)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || string(body) != c.want+"\n" {
			t.Errorf("%s %s: %d %q, want 400 %q", c.tenant, c.policy, resp.StatusCode, body, c.want)
		}
	}
}

// A member's session reaches only its own tenant's retained executions.
func TestMemberKeepsRetainedExecutionsToTheirTenant(t *testing.T) {
	url := startMember(t, 2, 0)
	ctx := testCtx(t)
	dial := func(tenant string) *remote.Executor {
		ex, err := remote.Dial(ctx, url, remote.Options{Header: http.Header{executorserver.TenantHeader: {tenant}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ex.Close() })
		return ex
	}
	a, b := dial("a"), dial("b")
	res, err := a.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => (req) => new Response('ok')", RetainHandles: true})
	if err != nil || res.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", res, err)
	}
	if err := b.CloseHandles(ctx, res.ExecutionID); protocol.CodeOf(err) != protocol.CodeHandlesClosed {
		t.Fatalf("b closed a's handles: %v", err)
	}
	if err := dial("a").CloseHandles(ctx, res.ExecutionID); err != nil {
		t.Fatalf("another session of a could not close them: %v", err)
	}
}
