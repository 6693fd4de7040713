package gateway

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/executorserver"
	"github.com/supolka/codemode-gateway/gateway/config"
	itestutil "github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// nativeGateway is a gateway with a remote group far on member and a local
// group near, both allowing native fetch to loopback, and the tenants
// given as "name backend policy" lines.
func nativeGateway(t *testing.T, member string, logs *itestutil.Buffer, tenants ...string) *Gateway {
	t.Helper()
	return newGateway(t, nativeConfig(t, []string{member}, tenants...), Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
}

// nativeConfig is nativeGateway's configuration, with the members given.
func nativeConfig(t *testing.T, members []string, tenants ...string) *config.Config {
	t.Helper()
	var urls []string
	for _, m := range members {
		urls = append(urls, fmt.Sprintf("{url: %q}", m))
	}
	y := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - {name: far, type: remote, remote: {members: [%s], healthInterval: 1h, nativeOutbound: true, native: {allow: [127.0.0.0/8]}}}
  - {name: near, type: local, local: {maxWorkers: 2, nativeOutbound: true, native: {allow: [127.0.0.0/8]}}}
tenants:
`, strings.Join(urls, ", "))
	for i, tn := range tenants {
		f := append(strings.SplitN(tn, " ", 3), "")
		y += fmt.Sprintf("  - {name: %s, backend: %s, keys: [{name: k, hash: sha256:%d6e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}], policy: {%s}}\n", f[0], f[1], i, f[2])
	}
	y += "routes:\n  - {path: /v1/executor, kind: executor}\n"
	cfg, err := config.Parse("t.yaml", []byte(y), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fetchCode fetches url natively and answers its text, or the error's.
func fetchCode(url string) string {
	return fmt.Sprintf("async () => { try { return await (await fetch(%q)).text() } catch (e) { return e.name + ': ' + e.message } }", url)
}

// A remote group's nativeOutbound and native mean what they mean on a
// local group: a tenant that allows native fetch reaches the allowed
// loopback server through the member; a tenant that does not reads the
// same veto a tenant of the local group reads; a tenant's nativeDeny
// binds inside the group's allow list on the member too.
func TestRemoteGroupNativeFetchAsOnALocalGroup(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") }))
	defer site.Close()
	m := startMember(t, 4, 0)
	var logs itestutil.Buffer
	g := nativeGateway(t, m.url, &logs,
		"open far nativeOutbound: true",
		"shut far",
		"localshut near",
		"denied far nativeOutbound: true, nativeDeny: [127.0.0.1/32]",
	)
	ctx := tenancyCtx(t)
	run := func(tenant string) string {
		res, err := g.state.Load().tenants[tenant].Execute(ctx, &protocol.ExecuteRequest{Code: fetchCode(site.URL)})
		if err != nil || res.HasError {
			t.Fatalf("%s: %+v, %v", tenant, res, err)
		}
		return res.ResultJSON
	}
	if got := run("open"); got != `"page"` {
		t.Fatalf("the remote tenant allowed native fetch read %s, want the page", got)
	}
	veto := `"TypeError: ` + protocol.NewOutboundDisabledError().Error() + `"`
	if got, local := run("shut"), run("localshut"); got != veto || local != veto {
		t.Fatalf("without nativeOutbound the remote tenant read %s and the local one %s, want both %s", got, local, veto)
	}
	// The text docs/runtime.md gives for a denied address.
	refused := `"TypeError: fetch failed: ` + strings.TrimPrefix(site.URL, "http://") + ` cannot be reached from this executor: either the name does not resolve, or it is at an address this executor does not reach (loopback, private, link-local and other internal ranges are denied). Only public internet hosts can be fetched."`
	if got := run("denied"); got != refused {
		t.Fatalf("the remote tenant's nativeDeny: read %s, want %s", got, refused)
	}
}

// The member applies native settings itself: a tenant's session fetches
// natively only as its settings allow, whatever mode the request asks
// for, and a session that names no tenant under the member's own settings
// (here the default deny list, which refuses loopback).
func TestMemberAppliesTheNativeSettingsOfEachSession(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") }))
	defer site.Close()
	m := startMember(t, 3, 0)
	ctx := tenancyCtx(t)
	veto := `"TypeError: ` + protocol.NewOutboundDisabledError().Error() + `"`
	unreachable := `"TypeError: fetch failed: ` + strings.TrimPrefix(site.URL, "http://") + ` cannot be reached from this executor: either the name does not resolve, or it is at an address this executor does not reach (loopback, private, link-local and other internal ranges are denied). Only public internet hosts can be fetched."`
	for _, c := range []struct{ tenant, policy, want string }{
		{"given", `{"nativeOutbound":true,"native":{"allow":["127.0.0.0/8"]}}`, `"page"`},
		{"not given", "", veto},
		{"", "", unreachable},
	} {
		h := http.Header{}
		if c.tenant != "" {
			h.Set(executorserver.TenantHeader, c.tenant)
			h.Set(executorserver.TenantPolicyHeader, c.policy)
		}
		ex, err := remote.Dial(ctx, m.url, remote.Options{Header: h})
		if err != nil {
			t.Fatal(err)
		}
		res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: fetchCode(site.URL)})
		ex.Close()
		if err != nil || res.ResultJSON != c.want {
			t.Errorf("tenant %q with %s: %+v, %v; want %s", c.tenant, c.policy, res, err, c.want)
		}
	}
}

// A member whose flags forbid native fetch refuses a tenant whose settings
// allow it, naming the setting; the gateway logs the member's text at error
// level, the tenant reads that its settings were refused, and the group's
// other tenant runs on.
func TestMemberWithoutNativeFetchRefusesATenantThatAllowsIt(t *testing.T) {
	m := startMemberNative(t, 2, 0, local.NativeOptions{Vetoed: true})
	var logs itestutil.Buffer
	g := nativeGateway(t, m.url, &logs, "open far nativeOutbound: true", "shut far")
	ctx := tenancyCtx(t)
	st := g.state.Load()
	_, err := st.tenants["open"].Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
	if protocol.CodeOf(err) != protocol.CodeConnectionRejected || err.Error() != refusedText {
		t.Fatalf("open: %v, want CONNECTION_REJECTED %q", err, refusedText)
	}
	line := regexp.MustCompile(`(?m)^time=\S+ level=ERROR msg="executor server refused a tenant's settings; fix the tenant's policy or the member's flags" backend=far member=0 url=\S+ tenant=open refusal="executor server refused tenant \\"open\\"'s settings: nativeOutbound is forbidden on this executor server \(--disable-native-fetch\): its worker processes have no sockets"$`)
	if !line.MatchString(logs.String()) {
		t.Fatalf("no refusal line in:\n%s", logs.String())
	}
	if res, err := st.tenants["shut"].Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 2"}); err != nil || res.ResultJSON != "2" {
		t.Fatalf("shut: %+v, %v", res, err)
	}
}

// refusalLine matches the gateway's log line for member's refusal of
// tenant's nativeOutbound, whole.
func refusalLine(member int, tenant string) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`(?m)^time=\S+ level=ERROR msg="executor server refused a tenant's settings; fix the tenant's policy or the member's flags" backend=far member=%d url=\S+ tenant=%s refusal="executor server refused tenant \\"%s\\"'s settings: nativeOutbound is forbidden on this executor server \(--disable-native-fetch\): its worker processes have no sockets"$`, member, tenant, tenant))
}

// A member that cannot honour a tenant's settings says so when the gateway
// starts, before the tenant calls: the gateway opens each tenant's session
// to each member and logs the refusal at error level, once. A call still
// fails with the refusal and logs it again.
func TestMemberRefusalIsLoggedAtStart(t *testing.T) {
	m := startMemberNative(t, 2, 0, local.NativeOptions{Vetoed: true})
	var logs itestutil.Buffer
	g := nativeGateway(t, m.url, &logs, "open far nativeOutbound: true", "shut far")
	line := refusalLine(0, "open")
	itestutil.WaitFor(t, 30*time.Second, func() bool { return line.MatchString(logs.String()) }, "the refusal of open's settings in the log:\n%s", &logs)
	_, err := g.state.Load().tenants["open"].Execute(tenancyCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"})
	if protocol.CodeOf(err) != protocol.CodeConnectionRejected || err.Error() != refusedText {
		t.Fatalf("open: %v, want CONNECTION_REJECTED %q", err, refusedText)
	}
	if n := len(line.FindAllString(logs.String(), -1)); n != 2 {
		t.Fatalf("%d refusal lines, want one at start and one at the call, in:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "tenant=shut") {
		t.Fatalf("shut, which asks for no native fetch, was refused:\n%s", logs.String())
	}
}

// A reload that gives a tenant settings a member cannot honour, and a
// member a reload adds, are probed at once: each refusal is logged without
// a call.
func TestMemberRefusalIsLoggedAtReloadAndWhenItJoins(t *testing.T) {
	first := startMemberNative(t, 2, 0, local.NativeOptions{Vetoed: true})
	second := startMemberNative(t, 2, 0, local.NativeOptions{Vetoed: true})
	var logs itestutil.Buffer
	g := newGateway(t, nativeConfig(t, []string{first.url}, "later far"), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if res, err := g.state.Load().tenants["later"].Execute(tenancyCtx(t), &protocol.ExecuteRequest{Code: "async () => 1"}); err != nil || res.ResultJSON != "1" {
		t.Fatalf("later, without native fetch: %+v, %v", res, err)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Fatalf("an error before the reload:\n%s", logs.String())
	}
	if err := g.Reload(nativeConfig(t, []string{first.url, second.url}, "later far nativeOutbound: true")); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		line := refusalLine(i, "later")
		itestutil.WaitFor(t, 30*time.Second, func() bool { return line.MatchString(logs.String()) }, "member %d's refusal in the log:\n%s", i, &logs)
	}
}
