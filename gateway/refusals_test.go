package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

func TestRefusalLogLetsOneLinePerReasonThroughEachInterval(t *testing.T) {
	clk := newTestClock()
	l := newRefusalLog(10 * time.Second)
	type note struct {
		log        bool
		suppressed int
	}
	step := func(r reason) note {
		log, n := l.note(r, clk.now())
		return note{log, n}
	}
	got := []note{step(reasonRate), step(reasonRate), step(reasonRate), step(reasonConcurrency)}
	clk.advance(9 * time.Second)
	got = append(got, step(reasonRate))
	clk.advance(time.Second)
	got = append(got, step(reasonRate), step(reasonRate))
	clk.advance(10 * time.Second)
	got = append(got, step(reasonRate), step(reasonConcurrency))
	want := []note{
		{true, 0},  // the first of a reason at once
		{false, 0}, // then only counted
		{false, 0},
		{true, 0}, // another reason has a window of its own
		{false, 0},
		{true, 3}, // ten seconds on: a line, saying three went unlogged
		{false, 0},
		{true, 1},
		{true, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

func TestConcurrencyRetry(t *testing.T) {
	for _, c := range []struct {
		avg      time.Duration
		inFlight int64
		want     time.Duration
	}{
		{0, 8, 100 * time.Millisecond}, // nothing finished yet
		{900 * time.Millisecond, 2, 300 * time.Millisecond},
		{time.Microsecond, 8, time.Millisecond}, // at least a millisecond
		{time.Hour, 2, time.Minute},             // at most a minute
	} {
		if got := concurrencyRetry(c.avg, c.inFlight); got != c.want {
			t.Errorf("concurrencyRetry(%v, %d) = %v, want %v", c.avg, c.inFlight, got, c.want)
		}
	}
	var w wallAverage
	w.add(time.Second)
	w.add(2 * time.Second)
	if got := w.get(); got != 1200*time.Millisecond {
		t.Errorf("average of 1s then 2s = %v, want 1.2s", got)
	}
}

// fakeBackend answers every execution with its result or err, after
// hold is closed when it is set.
type fakeBackend struct {
	res  protocol.ExecuteResult
	err  error
	hold chan struct{}
	// policy is the last policy it was given.
	policy atomic.Pointer[protocol.Policy]
}

func (f *fakeBackend) Execute(ctx context.Context, _ *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
	if f.hold != nil {
		<-f.hold
	}
	if f.err != nil {
		return nil, f.err
	}
	res := f.res
	return &res, nil
}

func (f *fakeBackend) ExecuteWith(ctx context.Context, req *protocol.ExecuteRequest, p protocol.Policy) (*protocol.ExecuteResult, error) {
	f.policy.Store(&p)
	return f.Execute(ctx, req)
}

func (f *fakeBackend) InvokeHandle(context.Context, string, string, protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{}, errors.New("no handles")
}
func (f *fakeBackend) CloseHandles(context.Context, string) error { return nil }
func (f *fakeBackend) Close() error                               { return nil }

type tenantRig struct {
	t    *tenant
	clk  *testClock
	be   *fakeBackend
	gw   *Gateway
	logs *bytes.Buffer
}

// newRig is tenant "acme" with policy p on a one-member group of a fake
// backend, with a clock the test moves and a JSON log.
func newRig(t *testing.T, p config.Policy) *tenantRig {
	t.Helper()
	rig := &tenantRig{clk: newTestClock(), be: &fakeBackend{res: protocol.ExecuteResult{ResultJSON: "1"}}, logs: &bytes.Buffer{}}
	gw := &Gateway{log: slog.New(slog.NewJSONHandler(rig.logs, nil)), groups: map[string]*group{}, now: rig.clk.now}
	gw.handles = &handleRoutes{pins: newPins(16), ids: newIDCodec(nil), members: map[string]*member{}}
	gw.metrics = newMetrics(gw)
	m := &member{name: "fake", exec: rig.be, log: gw.log}
	m.healthy.Store(true)
	grp := &group{name: "fake", members: []*member{m}, defaultTimeoutMs: protocol.DefaultTimeout}
	if p.MaxConcurrent == 0 {
		p.MaxConcurrent = 64
	}
	if p.TimeoutMs == 0 {
		p.TimeoutMs = 60000
	}
	rig.gw, rig.t = gw, newTenant(config.Tenant{Name: "acme", Policy: p}, grp, gw)
	return rig
}

func (rig *tenantRig) execute() error {
	_, err := rig.t.Execute(context.Background(), &protocol.ExecuteRequest{Code: "async () => 1"})
	return err
}

// refusals reads codemode_refusals_total for acme and reason.
func (rig *tenantRig) refusals(t *testing.T, r reason) float64 {
	t.Helper()
	mfs, err := rig.gw.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "codemode_refusals_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tenant"] == "acme" && labels["reason"] == string(r) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no codemode_refusals_total series for reason %s", r)
	return 0
}

// refusedLines are the log's refusal lines, each as its attributes.
func (rig *tenantRig) refusedLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(rig.logs.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "refused" {
			delete(rec, "time")
			out = append(out, rec)
		}
	}
	return out
}

// wantRefusal checks err is the whole TenantLimitError text for limit and
// retry.
func wantRefusal(t *testing.T, err error, limit string, retry time.Duration) {
	t.Helper()
	want := protocol.NewTenantLimitError("acme", limit, retry).Error()
	if err == nil || err.Error() != want || protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	if d, ok := protocol.RetryAfterOf(err); !ok || d != retry {
		t.Fatalf("retry hint %v, %v; want %v", d, ok, retry)
	}
}

func TestRateRefusalSaysWhenATokenIsThere(t *testing.T) {
	rig := newRig(t, config.Policy{Rate: 2, Burst: 1})
	if err := rig.execute(); err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, rig.execute(), "2 executions started per second", 500*time.Millisecond)
	rig.clk.advance(100 * time.Millisecond)
	wantRefusal(t, rig.execute(), "2 executions started per second", 400*time.Millisecond)
	// The refusals took no token: after the wait named, it runs.
	rig.clk.advance(400 * time.Millisecond)
	if err := rig.execute(); err != nil {
		t.Fatal(err)
	}
	if got := rig.refusals(t, reasonRate); got != 2 {
		t.Fatalf("rate refusals counted %v, want 2", got)
	}
	// One line at once, the second refusal only counted.
	want := []map[string]any{{"level": "INFO", "msg": "refused", "tenant": "acme", "reason": "rate",
		"limit": "2 executions started per second", "retryAfterMs": 500.0, "suppressed": 0.0}}
	if got := rig.refusedLines(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("log lines %v\nwant %v", got, want)
	}
	// Ten seconds on the next refusal logs, with the one it suppressed.
	rig.clk.advance(10 * time.Second)
	rig.execute()
	rig.execute()
	lines := rig.refusedLines(t)
	if len(lines) != 2 || lines[1]["suppressed"] != 1.0 || lines[1]["retryAfterMs"] != 500.0 {
		t.Fatalf("log lines %v", lines)
	}

	one := newRig(t, config.Policy{Rate: 1, Burst: 1})
	one.execute()
	wantRefusal(t, one.execute(), "1 execution started per second", time.Second)
}

func TestConcurrencyRefusalEstimatesFromRecentWallTimes(t *testing.T) {
	rig := newRig(t, config.Policy{MaxConcurrent: 2})
	rig.t.running.Add(2) // two executions of acme are running
	wantRefusal(t, rig.execute(), "2 executions in flight", 100*time.Millisecond)
	rig.t.wall.add(900 * time.Millisecond)
	wantRefusal(t, rig.execute(), "2 executions in flight", 300*time.Millisecond)
	if got := rig.refusals(t, reasonConcurrency); got != 2 {
		t.Fatalf("concurrency refusals counted %v, want 2", got)
	}
	rig.t.running.Add(-1)
	if err := rig.execute(); err != nil {
		t.Fatal(err)
	}
	if n := rig.t.running.Load(); n != 1 {
		t.Fatalf("in flight after a run: %d", n)
	}
}

func TestBudgetRefusalsThroughTheTenant(t *testing.T) {
	rig := newRig(t, config.Policy{Budget: config.Budget{Window: config.Duration(time.Hour), Executions: 2, RunClock: config.Duration(time.Second)}})
	rig.be.res.RunClock = 400 * time.Millisecond
	for range 2 {
		if err := rig.execute(); err != nil {
			t.Fatal(err)
		}
	}
	wantRefusal(t, rig.execute(), "a budget of 2 executions per 1h0m0s", 30*time.Minute)
	rig.clk.advance(30 * time.Minute) // one execution refilled
	if err := rig.execute(); err != nil {
		t.Fatal(err)
	}
	// 0.2s of run clock was left; half an hour added 0.5s, and the run
	// spent 0.4s: 0.3s left, which admits the next run.
	rig.be.res.RunClock = 3 * time.Second
	rig.clk.advance(30 * time.Minute)
	if err := rig.execute(); err != nil {
		t.Fatal(err)
	}
	// 0.8s before that run, 2.2s below zero after it, refilling at a
	// second an hour.
	wantRefusal(t, rig.execute(), "a budget of 1s of run-clock time per 1h0m0s", 2*time.Hour+12*time.Minute)
	if rig.refusals(t, reasonBudgetExecutions) != 1 || rig.refusals(t, reasonBudgetRunClock) != 1 {
		t.Fatal("budget refusals not counted")
	}
	// A reload with the same budget keeps the debt.
	rig.t.configure(config.Tenant{Name: "acme", Policy: rig.t.settings.Load().policy}, rig.t.settings.Load().group)
	wantRefusal(t, rig.execute(), "a budget of 1s of run-clock time per 1h0m0s", 2*time.Hour+12*time.Minute)
}

func TestBackendRefusalsAreCountedByKind(t *testing.T) {
	rig := newRig(t, config.Policy{Budget: config.Budget{Window: config.Duration(time.Hour), Executions: 1}})
	for _, c := range []struct {
		err error
		r   reason
	}{
		{protocol.NewQueueOverflowError(64, 250*time.Millisecond), reasonQueueFull},
		{protocol.NewQueueTimeoutError(10*time.Second, 40*time.Millisecond), reasonQueueWait},
		{fmt.Errorf("far: %w", protocol.NewTenantLimitError("x", "1 execution in flight", time.Second)), reasonBackend},
		{protocol.NewFault(protocol.CodeQueueOverflow, "busy"), reasonBackend},
		{protocol.NewNoExecutorError(), reasonNoExecutor},
	} {
		rig.be.err = c.err
		if err := rig.execute(); err != c.err {
			t.Fatalf("the backend's refusal changed on the way: %v", err)
		}
		if got := rig.refusals(t, c.r); got < 1 {
			t.Fatalf("%v: not counted as %s", c.err, c.r)
		}
	}
	if rig.refusals(t, reasonBackend) != 2 {
		t.Fatal("backend refusals miscounted")
	}
	// None of them started, so the budget of one execution is still there.
	rig.be.err = nil
	if err := rig.execute(); err != nil {
		t.Fatalf("the budget paid for refused runs: %v", err)
	}
	lines := rig.refusedLines(t)
	want := map[string]any{"level": "INFO", "msg": "refused", "tenant": "acme", "reason": "queue_full",
		"limit": "64 waiting executions", "retryAfterMs": 250.0, "suppressed": 0.0}
	if len(lines) != 4 || !reflect.DeepEqual(lines[0], want) || lines[1]["limit"] != "10000 ms of waiting" || lines[3]["limit"] != "no executor server could take it" {
		t.Fatalf("log lines %v", lines)
	}
}

func TestDrainingRefusalIsCounted(t *testing.T) {
	rig := newRig(t, config.Policy{})
	rig.gw.draining.Store(true)
	err := rig.execute()
	if err == nil || err.Error() != protocol.NewDrainingError().Error() || protocol.CodeOf(err) != protocol.CodeQueueOverflow {
		t.Fatalf("got %v", err)
	}
	if rig.refusals(t, reasonDraining) != 1 {
		t.Fatal("not counted")
	}
}

func TestRefusedConnectionSaysWhenAndWhich(t *testing.T) {
	rig := newRig(t, config.Policy{})
	w := httptest.NewRecorder()
	refuseConnection(w, rig.t, 3)
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if want := "tenant \"acme\" is at its bound of 3 open connections (policy.maxConnections); connect again after one of them closes\n"; w.Body.String() != want {
		t.Fatalf("body %q\nwant %q", w.Body.String(), want)
	}
	if rig.refusals(t, reasonConnections) != 1 {
		t.Fatal("not counted")
	}
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, time.Minute: 60} {
		if got := retryAfterSeconds(d); got != want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
