package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// sample reads one series of a metrics page; false when it has none yet.
func sample(text, series string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}

// TestRollingUpdateOfExecutorServersLosesNoRun: a gateway in front of two
// executor servers, under a steady load of short runs, while each member
// in turn is sent SIGTERM with runs of a second and a half in flight (and,
// on the first, a retained execution held) and a replacement starts on
// its address, as a StatefulSet's rolling update does. Every run gets its
// right result, and each drained member exits 0 only once its runs and
// its retained execution are done.
func TestRollingUpdateOfExecutorServersLosesNoRun(t *testing.T) {
	memberKey, memberHash := newKey(t)
	a, adminA := startExecutorServerWithAdmin(t, "--key-hash", memberHash)
	b, adminB := startExecutorServerWithAdmin(t, "--key-hash", memberHash)
	key, hash := newKey(t)
	gw := startGatewayProcess(t, fmt.Sprintf(`listen: 127.0.0.1:0
backends:
  - name: pool
    type: remote
    remote:
      members: [{url: %q, keyEnv: MEMBER_KEY}, {url: %q, keyEnv: MEMBER_KEY}]
      healthInterval: 100ms
tenants:
  - {name: app, backend: pool, keys: [{name: app-key, hash: %s}]}
routes:
  - {path: /v1/executor, kind: executor}
`, a.url, b.url, hash), "MEMBER_KEY="+memberKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex := dialWithKey(ctx, t, "ws"+strings.TrimPrefix(gw.url, "http")+"/v1/executor", key)
	metrics := func(admin string) string {
		_, body := testutil.Get(t, admin+"/metrics")
		return body
	}

	// With nothing in flight the first member listed takes the grant.
	grant, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: `async () => { let n = 0; return (req) => new Response("A" + (++n)) }`, RetainHandles: true})
	if err != nil || grant.ExecutionID == "" {
		t.Fatalf("no grant: %+v, %v", grant, err)
	}
	if n, _ := sample(metrics(adminA), `codemode_worker_runs_retained{backend="local"}`); n != 1 {
		t.Fatalf("member A holds %v retained executions, want the grant", n)
	}
	invoke := func(want string) {
		t.Helper()
		resp, err := ex.InvokeHandle(ctx, grant.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
		if err != nil || string(resp.Body) != want {
			t.Fatalf("the retained execution on A answered %+v, %v; want %q", resp, err, want)
		}
	}
	invoke("A1")

	// The steady load: three callers running short runs back to back,
	// each checking its own answer.
	var (
		failures []string
		failMu   sync.Mutex
		ran      atomic.Int64
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		failMu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		failMu.Unlock()
	}
	stop := make(chan struct{})
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := w*1000000 + i
				res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: fmt.Sprintf("async () => %d * 2", n)})
				if err != nil || res.ResultJSON != strconv.Itoa(2*n) {
					fail("short run %d: %+v, %v (code %q)", n, res, err, protocol.CodeOf(err))
					return
				}
				ran.Add(1)
			}
		}()
	}
	// long starts runs of 1.5 s; its channel closes when all have ended.
	long := func(tag string) <-chan struct{} {
		var lw sync.WaitGroup
		for i := range 4 {
			lw.Add(1)
			go func() {
				defer lw.Done()
				want := fmt.Sprintf("%s-%d", tag, i)
				res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: fmt.Sprintf(`async () => { await new Promise(r => setTimeout(r, 1500)); return %q }`, want)})
				if err != nil || res.ResultJSON != strconv.Quote(want) {
					fail("long run %s: %+v, %v (code %q)", want, res, err, protocol.CodeOf(err))
				}
			}()
		}
		done := make(chan struct{})
		go func() { lw.Wait(); close(done) }()
		return done
	}
	exited := func(p *process) <-chan error {
		c := make(chan error, 1)
		go func() { c <- p.cmd.Wait() }()
		return c
	}
	// roll sends old SIGTERM while long runs are in flight on it, starts
	// its replacement on its address once it has let the address go, and
	// returns the replacement, its admin address, and old's exit.
	roll := func(name string, old *process, admin string) (*process, string, <-chan error, <-chan struct{}) {
		t.Helper()
		longDone := long(name)
		testutil.WaitFor(t, 10*time.Second, func() bool {
			n, _ := sample(metrics(admin), `codemode_executions_in_flight{tenant="app"}`)
			return n >= 1
		}, "runs in flight on member %s", name)
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		exit := exited(old)
		testutil.WaitFor(t, 5*time.Second, func() bool {
			code, body := testutil.Get(t, admin+"/readyz")
			return code == 503 && body == "draining\n"
		}, "member %s to fail readiness", name)
		// Readiness fails after the listener closed: the address is free.
		addr := strings.TrimSuffix(strings.TrimPrefix(old.url, "ws://"), "/")
		next, nextAdmin := startExecutorServerWithAdmin(t, "--key-hash", memberHash, "--listen", addr)
		return next, nextAdmin, exit, longDone
	}
	waitRan := func(name, admin string) {
		t.Helper()
		testutil.WaitFor(t, 10*time.Second, func() bool {
			n, _ := sample(metrics(admin), `codemode_executions_total{backend="local",outcome="ok",tenant="app"}`)
			return n >= 1
		}, "the replacement of member %s to take runs", name)
	}
	waitExit := func(name string, exit <-chan error) {
		t.Helper()
		select {
		case err := <-exit:
			if err != nil {
				t.Fatalf("member %s exited with %v, want 0", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("member %s did not exit after its drain", name)
		}
	}

	// A: its long runs finish, then its retained execution still answers
	// (A is alive, waiting for it); closing it lets A exit.
	_, adminA2, exitA, longA := roll("A", a, adminA)
	<-longA
	invoke("A2")
	select {
	case err := <-exitA:
		t.Fatalf("member A exited (%v) while it held a retained execution", err)
	default:
	}
	if err := ex.CloseHandles(ctx, grant.ExecutionID); err != nil {
		t.Fatal(err)
	}
	waitExit("A", exitA)
	waitRan("A", adminA2)

	// Then B, once A's replacement takes runs.
	_, adminB2, exitB, longB := roll("B", b, adminB)
	<-longB
	waitExit("B", exitB)
	waitRan("B", adminB2)

	close(stop)
	wg.Wait()
	failMu.Lock()
	defer failMu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d runs failed across the rolling update (%d short runs succeeded):\n%s", len(failures), ran.Load(), strings.Join(failures, "\n"))
	}
	if ran.Load() < 10 {
		t.Fatalf("only %d short runs ran: no load to speak of", ran.Load())
	}
	t.Logf("%d short runs and 8 long runs, all right, across the rolling update", ran.Load())
}
