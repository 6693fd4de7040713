package executorserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/executorserver"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// An executor server logs one line per execution, the gateway's line, and
// its readiness fails once it is told to stop.
func TestExecutorServerLogsEachExecutionAndStops(t *testing.T) {
	var logs testutil.Buffer
	srv := executorServer(t, 1, &logs)
	if _, err := srv.Execute(testCtx(t), &protocol.ExecuteRequest{Code: "async () => { throw new Error('x') }"}); err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^time=\S+ level=INFO msg=execution request=[0-9a-f]{16} backend=local outcome=user_error wallMs=\S+ retained=false$`)
	if n := len(line.FindAllString(logs.String(), -1)); n != 1 {
		t.Fatalf("%d execution lines, want 1, in:\n%s", n, logs.String())
	}

	admin := httptest.NewServer(srv.AdminHandler(""))
	defer admin.Close()
	readyz := func() (int, string) { return testutil.Get(t, admin.URL+"/readyz") }
	if code, body := readyz(); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	srv.Drain(ctx) // nothing in flight; the bound has passed already
	if code, body := readyz(); code != 503 || body != "draining\n" {
		t.Fatalf("/readyz after Drain: %d %q, want 503 %q", code, body, "draining\n")
	}
}

// A draining executor server turns new executions away with the
// retryable draining refusal, lets the execution in flight finish with its
// result and keeps serving a retained execution, and its drain ends only
// when both are done.
func TestExecutorServerDrainWaitsForRunsAndHandles(t *testing.T) {
	srv := executorServer(t, 2, io.Discard)
	ctx := testCtx(t)

	id := holdHandle(t, ctx, srv)
	inTool, release := make(chan struct{}), make(chan struct{})
	held := make(chan *protocol.ExecuteResult, 1)
	go func() {
		res, err := srv.Execute(ctx, &protocol.ExecuteRequest{
			Code:      "async () => 'finished: ' + (await s.wait())",
			Providers: []protocol.ProviderDescriptor{{Name: "s", Tools: []string{"wait"}}},
			Dispatch: func(context.Context, string, string, string) (string, error) {
				close(inTool)
				<-release
				return `{"result":"yes"}`, nil
			},
		})
		if err != nil {
			t.Errorf("the execution in flight failed: %v", err)
		}
		held <- res
	}()
	<-inTool

	drained := make(chan error, 1)
	go func() { drained <- srv.Drain(ctx) }()
	// Drain turns new executions away from its first moment on; ask until
	// it has begun.
	testutil.WaitFor(t, 5*time.Second, func() bool {
		_, err := srv.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
		return err != nil
	}, "a new execution to be refused")
	_, err := srv.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 1"})
	if err == nil || err.Error() != protocol.NewExecutorDrainingError().Error() || !protocol.CodeOf(err).Retryable() || !protocol.IsExecutorDraining(err) {
		t.Fatalf("a new execution while draining: %v (code %q), want the retryable draining refusal", err, protocol.CodeOf(err))
	}

	close(release)
	if res := <-held; res == nil || res.ResultJSON != `"finished: yes"` {
		t.Fatalf("the execution in flight ended with %+v", res)
	}
	resp, err := srv.InvokeHandle(ctx, id, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
	if err != nil || string(resp.Body) != "held" {
		t.Fatalf("the retained execution while draining: %+v, %v", resp, err)
	}
	select {
	case err := <-drained:
		t.Fatalf("the drain ended (%v) while a retained execution was held", err)
	default:
	}
	if err := srv.CloseHandles(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("the drain ended with %v once nothing was left", err)
	}
}

// A drain whose bound passes while a retained execution is held returns
// the bound's error, so that the caller closes what is left.
func TestExecutorServerDrainStopsAtItsBound(t *testing.T) {
	srv := executorServer(t, 1, io.Discard)
	holdHandle(t, testCtx(t), srv)
	ctx, cancel := context.WithTimeout(testCtx(t), 200*time.Millisecond)
	defer cancel()
	if err := srv.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with a retained execution held past its bound: %v, want context.DeadlineExceeded", err)
	}
}

// executorServer is an executor server on a local backend of maxWorkers
// worker processes, logging to w, closed when the test ends.
func executorServer(t *testing.T, maxWorkers int, w io.Writer) *executorserver.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(w, nil))
	pool, err := local.New(local.Options{MaxWorkers: maxWorkers, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := executorserver.New(pool, executorserver.NewMemberTenants(), log, "v-test")
	t.Cleanup(func() { srv.Close() })
	return srv
}

// holdHandle grants a retained execution on srv whose handler answers
// "held", and returns its executionId.
func holdHandle(t *testing.T, ctx context.Context, srv *executorserver.Server) string {
	t.Helper()
	grant, err := srv.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => (req) => new Response("held")`, RetainHandles: true})
	if err != nil || grant.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", grant, err)
	}
	return grant.ExecutionID
}

func TestMain(m *testing.M) {
	local.RunWorkerIfRequested() // the local backend re-executes this binary
	os.Exit(m.Run())
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
