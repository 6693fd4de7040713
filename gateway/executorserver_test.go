package gateway_test

import (
	"log/slog"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// An executor server logs one line per execution, the gateway's line, and
// its readiness fails once it is told to stop.
func TestExecutorServerLogsEachExecutionAndStops(t *testing.T) {
	var logs testutil.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	pool, err := local.New(local.Options{MaxWorkers: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := gateway.NewExecutorServer(pool, gateway.NewMemberTenants(), log, "v-test")
	defer srv.Close()
	if _, err := srv.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => { throw new Error('x') }"}); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=execution request=[0-9a-f]{16} backend=local outcome=user_error wallMs=\S+ retained=false$`)
	if n := len(line.FindAllString(logs.String(), -1)); n != 1 {
		t.Fatalf("%d execution lines, want 1, in:\n%s", n, logs.String())
	}

	admin := httptest.NewServer(srv.AdminHandler())
	defer admin.Close()
	readyz := func() (int, string) { return testutil.Get(t, admin.URL+"/readyz") }
	if code, body := readyz(); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	srv.Stop()
	if code, body := readyz(); code != 503 || body != "stopping\n" {
		t.Fatalf("/readyz after Stop: %d %q, want 503 \"stopping\\n\"", code, body)
	}
}
