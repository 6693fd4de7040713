package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/supolka/codemode-gateway/capnweb"
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

// TestExecutorServerBoundsUnreleasedCalls: `--max-calls-per-connection`
// aborts a caller that pushes calls and never releases them.
func TestExecutorServerBoundsUnreleasedCalls(t *testing.T) {
	srv := startExecutorServer(t, "--max-calls-per-connection", "16")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, srv.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	go func() {
		for i := 0; i < 100; i++ {
			if conn.Write(ctx, websocket.MessageText, []byte(`["push",["pipeline",0,["protocolVersion"],[]]]`)) != nil {
				return
			}
		}
	}()
	var last string
	for {
		_, m, err := conn.Read(ctx)
		if err != nil {
			break
		}
		last = string(m)
	}
	if want := `["abort",["error","Error","` + capnweb.OutstandingCallsText(16) + `"]]`; last != want {
		t.Fatalf("last frame %s, want %s", last, want)
	}
}
