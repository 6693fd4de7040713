package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestReloadCommandSendsTheAdminToken: with admin.tokenEnv set, `gateway
// reload` is refused without the token and reloads with --token-env.
func TestReloadCommandSendsTheAdminToken(t *testing.T) {
	_, hash := newKey(t)
	const token = "e2e-admin-token-0123456789"
	cfg := strings.Replace(oneTenantConfig(hash), "listen: 127.0.0.1:0\n", "listen: 127.0.0.1:0\nadmin:\n  tokenEnv: E2E_ADMIN_TOKEN\n", 1)
	gw := startGatewayProcess(t, cfg, "E2E_ADMIN_TOKEN="+token)

	out, err := exec.Command(gatewayBinary(t), "reload", "--admin", gw.admin).CombinedOutput()
	want := "gateway reload: refused; the running configuration stays:\nthe admin listener requires its bearer token: Authorization: Bearer <token>\n"
	if err == nil || string(out) != want {
		t.Fatalf("gateway reload without the token said %q, %v; want %q", out, err, want)
	}
	cmd := exec.Command(gatewayBinary(t), "reload", "--admin", gw.admin, "--token-env", "E2E_ADMIN_TOKEN")
	cmd.Env = append(os.Environ(), "E2E_ADMIN_TOKEN="+token)
	out, err = cmd.CombinedOutput()
	if err != nil || string(out) != "reloaded\n" {
		t.Fatalf("gateway reload --token-env said %q, %v", out, err)
	}
}
