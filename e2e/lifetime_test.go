package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestHandlesLifetimeFromJavaScript runs lifetime.test.mjs: the real
// capnweb client reads extensions() through the gateway and lends a
// handlesLifetime function that is released when the handles close, on the
// local backend and across a remote group.
func TestHandlesLifetimeFromJavaScript(t *testing.T) {
	nodeModules(t)
	tt := startTwoTenants(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "lifetime.test.mjs")
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+tt.url, "ALPHA_KEY="+tt.alphaKey, "GAMMA_KEY="+tt.gammaKey)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test lifetime.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the handlesLifetime scenarios failed from JavaScript: %v", err)
	}
}
