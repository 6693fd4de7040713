package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
)

// exportSoon makes the processes of a tracing test export their spans
// within 50 ms rather than the standard 5 s.
const exportSoon = "OTEL_BSP_SCHEDULE_DELAY=50"

// tracedGateway runs a gateway that traces to rcv, with tenant alpha on
// the local group and tenant far on a remote group whose one member is the
// executor server at memberURL. It returns the gateway and each tenant's
// key.
func tracedGateway(t *testing.T, rcv *otlptest.Receiver, memberURL, memberKey, far string) (*runningGateway, map[string]string) {
	t.Helper()
	keys, hashes := map[string]string{}, map[string]string{}
	for _, name := range []string{"alpha", far} {
		keys[name], hashes[name] = newKey(t)
	}
	gw := startGatewayProcess(t, fmt.Sprintf(`listen: 127.0.0.1:0
tracing: {enabled: true, endpoint: %s}
backends:
  - {name: local, type: local, local: {maxWorkers: 2}}
  - {name: far, type: remote, remote: {members: [{url: %q, keyEnv: MEMBER_KEY}]}}
tenants:
  - {name: alpha, backend: local, keys: [{name: alpha-key, hash: %s}]}
  - {name: %s, backend: far, keys: [{name: far-key, hash: %s}]}
routes:
  - {path: /v1/executor, kind: executor}
`, rcv.URL(), memberURL, hashes["alpha"], far, hashes[far]), "MEMBER_KEY="+memberKey, exportSoon)
	return gw, keys
}

// tracedGatewayAndServer runs an OTLP receiver, an executor server that
// traces to it, and a tracedGateway whose tenant far is served by that
// executor server; it returns the receiver, the gateway, each tenant's key
// and the key the gateway presents to the executor server. The receiver
// closes with the test.
func tracedGatewayAndServer(t *testing.T, far string) (*otlptest.Receiver, *runningGateway, map[string]string, string) {
	t.Helper()
	rcv := otlptest.Start()
	t.Cleanup(rcv.Close)
	memberKey, memberHash := newKey(t)
	member := startExecutorServerEnv(t, []string{exportSoon, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + rcv.URL()}, "--key-hash", memberHash, "--tracing")
	gw, keys := tracedGateway(t, rcv, member.url, memberKey, far)
	return rcv, gw, keys, memberKey
}

// dialExecutor connects to the executor route of the gateway at
// gatewayURL (http://) with key, sending header's entries with the upgrade;
// the connection closes with the test.
func dialExecutor(t *testing.T, ctx context.Context, gatewayURL, key string, header http.Header) *remote.Executor {
	t.Helper()
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Authorization", "Bearer "+key)
	ex, err := remote.Dial(ctx, "ws"+strings.TrimPrefix(gatewayURL, "http")+"/v1/executor", remote.Options{Header: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}
