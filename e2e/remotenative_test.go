package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// A remote group's native settings travel to real executor servers: a
// tenant its group and policy allow fetches a loopback server the group's
// native.allow carves out, through the member; a member started with
// --disable-native-fetch refuses a tenant that asks for native fetch, and
// the gateway logs it when it starts, before any call.
func TestRemoteGroupNativeFetchOnExecutorServers(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") }))
	defer site.Close()
	open := startExecutorServer(t)
	shut := startExecutorServer(t, "--disable-native-fetch")
	keys, hashes := map[string]string{}, map[string]string{}
	for _, name := range []string{"fetcher", "refused"} {
		keys[name], hashes[name] = newKey(t)
	}
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: far
    type: remote
    remote:
      members: [{url: %q}]
      nativeOutbound: true
      native: {allow: [127.0.0.0/8]}
  - name: shut
    type: remote
    remote:
      members: [{url: %q}]
      nativeOutbound: true
tenants:
  - {name: fetcher, backend: far, keys: [{name: k, hash: %s}], policy: {nativeOutbound: true}}
  - {name: refused, backend: shut, keys: [{name: k, hash: %s}], policy: {nativeOutbound: true}}
routes:
  - {path: /v1/executor, kind: executor}
`, open.url, shut.url, hashes["fetcher"], hashes["refused"])
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var log testutil.Buffer
	cmd := exec.Command(gatewayBinary(t), "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Stderr = io.MultiWriter(&log, &prefixWriter{t: t})
	gw := startProcess(t, "the gateway", cmd, nil).url

	const refusal = `level=ERROR msg="executor server refused a tenant's settings; fix the tenant's policy or the member's flags" backend=shut member=0 url=` +
		`%s tenant=refused refusal="executor server refused tenant \"refused\"'s settings: nativeOutbound is forbidden on this executor server (--disable-native-fetch): its worker processes have no sockets"`
	line := regexp.MustCompile(`(?m)^time=\S+ ` + regexp.QuoteMeta(fmt.Sprintf(refusal, shut.url)) + `$`)
	testutil.WaitFor(t, 20*time.Second, func() bool { return line.MatchString(log.String()) },
		"the member's refusal in the gateway's log, before any call:\n%s", &log)

	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	ex := dialWithKey(ctx, t, "ws"+strings.TrimPrefix(gw, "http")+"/v1/executor", keys["fetcher"])
	res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: fmt.Sprintf("async () => (await fetch(%q)).text()", site.URL)})
	if err != nil || res.ResultJSON != `"page"` {
		t.Fatalf("the native fetch through the member: %+v, %v", res, err)
	}
}
