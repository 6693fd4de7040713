package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

// logSink keeps the lines a JSON slog handler writes, for tests to read.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// lines are the records whose msg is msg, decoded.
func (s *logSink) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(s.buf.Bytes()), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

const deathMsg = "local executor: worker died"

// Each way the parent sees a worker die that the pool did not ask for
// writes one warn line naming the tenant, the pid, the cause and the runs
// it took down, and counts one death of that cause; a retirement or the
// executor's closing writes none.
func TestWorkerDeathIsOneWarnLine(t *testing.T) {
	tenant := protocol.Policy{Tenant: "acme"}
	exec := func(e *Executor, req *protocol.ExecuteRequest) (*protocol.ExecuteResult, error) {
		return e.ExecuteWith(context.Background(), req, tenant)
	}
	pidFor := func(t *testing.T, e *Executor) int {
		res, err := exec(e, &protocol.ExecuteRequest{Code: "pid"})
		if err != nil {
			t.Fatal(err)
		}
		return int(values(t, res)[0].(float64))
	}
	for _, c := range []struct {
		name       string
		opts       Options
		cause      string // the log's
		kind       string // the metric's
		runs, lost int
		// provoke makes the worker at pid die; it reports the outcome's
		// trouble, if any.
		provoke func(t *testing.T, e *Executor, pid int) error
	}{
		{name: "exit", cause: "crashed: exit status 7", kind: "crashed", runs: 1, lost: 1,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				_, err := exec(e, &protocol.ExecuteRequest{Code: "exit 7"})
				return wantCode(err, protocol.CodeWorkerCrashed)
			}},
		{name: "killed during a tool call", cause: "exited: signal SIGKILL", kind: "crashed", runs: 1, lost: 1,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				_, err := exec(e, &protocol.ExecuteRequest{Code: "dispatch 1",
					Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
						syscall.Kill(pid, syscall.SIGKILL)
						<-ctx.Done()
						return "", ctx.Err()
					}})
				return wantCode(err, protocol.CodeWorkerCrashed)
			}},
		{name: "killed while idle", cause: "exited: signal SIGKILL", kind: "crashed", runs: 0, lost: 0,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				return syscall.Kill(pid, syscall.SIGKILL)
			}},
		{name: "stuck past its deadline", opts: Options{KillGrace: 300 * time.Millisecond},
			cause: "killed: stuck past its deadline", kind: "timeout", runs: 1, lost: 0,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				res, err := exec(e, &protocol.ExecuteRequest{Code: "spin 0", Timeout: protocol.TimeoutOf(300)})
				return wantText(res, err, protocol.NewExecutionTimeoutError(300).Error())
			}},
		// Within workerMemoryMB: the watchdog cancels the run for its
		// memory, and the parent stops the process it is stuck in.
		{name: "memory cancel ignored", opts: Options{MemoryLimitMB: 64, RSSHeadroomMB: 32, AddressSpaceHeadroomMB: 8192},
			cause: "killed: stuck past its memory cancel", kind: "rss", runs: 1, lost: 0,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				res, err := exec(e, &protocol.ExecuteRequest{Code: "touch 72", Timeout: protocol.TimeoutOf(60000)})
				return wantText(res, err, memoryText(64))
			}},
		// Past workerMemoryMB, with a grace no stuck run outlasts within the
		// test: only the RSS poll can act.
		{name: "RSS", opts: Options{MemoryLimitMB: 64, WorkerMemoryMB: 64, RSSHeadroomMB: 32, AddressSpaceHeadroomMB: 8192, KillGrace: time.Hour},
			cause: "killed: RSS past workerMemoryMB", kind: "rss", runs: 1, lost: 0,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				res, err := exec(e, &protocol.ExecuteRequest{Code: "touch 200", Timeout: protocol.TimeoutOf(60000)})
				return wantText(res, err, memoryText(64))
			}},
		{name: "address space", opts: Options{MemoryLimitMB: 64},
			cause: "crashed: out of memory (RLIMIT_AS)", kind: "rlimit", runs: 1, lost: 0,
			provoke: func(t *testing.T, e *Executor, pid int) error {
				res, err := exec(e, &protocol.ExecuteRequest{Code: "huge 4096", Timeout: protocol.TimeoutOf(60000)})
				return wantText(res, err, memoryText(64))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := &logSink{}
			c.opts.PoolSize = 1
			c.opts.Logger = slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelWarn}))
			e := newScripted(t, c.opts)
			pid := pidFor(t, e)
			if err := c.provoke(t, e, pid); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, 20*time.Second, func() bool { return len(sink.lines(t, deathMsg)) > 0 }, "the death of worker %d to be logged", pid)
			if got := pidFor(t, e); got == pid {
				t.Fatalf("the dead worker %d served again", pid)
			}
			e.Close() // the retirements of the rest log nothing
			lines := sink.lines(t, deathMsg)
			if len(lines) != 1 {
				t.Fatalf("%d death lines, want 1: %v", len(lines), lines)
			}
			l := lines[0]
			want := map[string]any{"level": "WARN", "tenant": "acme", "pid": float64(pid), "cause": c.cause, "runs": float64(c.runs), "lost": float64(c.lost)}
			for k, v := range want {
				if l[k] != v {
					t.Errorf("%s = %#v, want %#v (line %v)", k, l[k], v, l)
				}
			}
			s := e.Stats()
			if want := []WorkerDeaths{{Tenant: "acme", Cause: c.kind, Count: 1}}; !slices.Equal(s.WorkerDeaths, want) {
				t.Errorf("WorkerDeaths = %+v, want %+v", s.WorkerDeaths, want)
			}
			var lost []TenantCount
			if c.lost > 0 {
				lost = []TenantCount{{Tenant: "acme", Count: int64(c.lost)}}
			}
			if !slices.Equal(s.ExecutionsLost, lost) {
				t.Errorf("ExecutionsLost = %+v, want %+v", s.ExecutionsLost, lost)
			}
		})
	}
}

// A worker that breaks the protocol is killed and logged as such.
func TestProtocolKillIsOneWarnLine(t *testing.T) {
	sink := &logSink{}
	script := fmt.Sprintf("printf '%s'; n=$(head -c 4 | od -An -tu1 | awk '{print $1*16777216+$2*65536+$3*256+$4}'); head -c $n >/dev/null; head -c 1 >/dev/null; printf 'garbage that is no frame at all'; sleep 30",
		shellOctal(readyFrame(t)))
	e := newScripted(t, Options{PoolSize: 1, WorkerCommand: []string{"/bin/sh", "-c", script},
		Logger: slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	_, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "pid"}, protocol.Policy{Tenant: "acme"})
	if err := wantCode(err, protocol.CodeWorkerCrashed); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, func() bool { return len(sink.lines(t, deathMsg)) > 0 }, "the death to be logged")
	lines := sink.lines(t, deathMsg)
	if len(lines) != 1 {
		t.Fatalf("%d death lines, want 1: %v", len(lines), lines)
	}
	l := lines[0]
	for k, v := range map[string]any{"tenant": "acme", "cause": "killed: protocol violation", "runs": float64(1), "lost": float64(1)} {
		if l[k] != v {
			t.Errorf("%s = %#v, want %#v (line %v)", k, l[k], v, l)
		}
	}
	if s := e.Stats(); !slices.Equal(s.WorkerDeaths, []WorkerDeaths{{Tenant: "acme", Cause: "protocol", Count: 1}}) {
		t.Errorf("WorkerDeaths = %+v", s.WorkerDeaths)
	}
}

func wantCode(err error, code protocol.Code) error {
	if protocol.CodeOf(err) != code {
		return fmt.Errorf("got %v, want %s", err, code)
	}
	return nil
}

func wantText(res *protocol.ExecuteResult, err error, text string) error {
	switch {
	case err != nil:
		return err
	case res.Error != text:
		return errors.New("got " + res.Error + ", want " + text)
	}
	return nil
}
