package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/protocol"
)

// These tests run real JavaScript through the pool: the test binary is its
// own worker, and the worker runs sandbox.Run.

// newPool builds an executor running the real sandbox.
func newPool(t testing.TB, o Options) *Executor {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger
	}
	if o.WorkerCommand == nil {
		o.WorkerCommand = jsWorkerCommand(t)
	}
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// plainWorkerEnv names a build of this test binary without the race
// detector, made beforehand (make test's local-test).
const plainWorkerEnv = "CODEMODE_TEST_LOCAL_WORKER"

// plainWorker is a build of this test binary without the race detector.
var plainWorker struct {
	once sync.Once
	dir  string
	cmd  []string
	err  error
}

// jsWorkerCommand is the worker command for tests that hold real
// JavaScript to its memory and time bounds. A race-instrumented worker
// carries shadow memory (which RLIMIT_AS and RSS both count) and runs goja
// several times slower, so it is not the worker the gateway ships. Under
// -race these tests therefore run their workers from a plain build of this
// same test binary; the parent side stays race-instrumented. make test
// builds that binary once for the two processes it splits this package's
// tests into and names it in plainWorkerEnv.
func jsWorkerCommand(t testing.TB) []string {
	t.Helper()
	if !raceBuild {
		return nil
	}
	plainWorker.once.Do(func() {
		if exe := os.Getenv(plainWorkerEnv); exe != "" {
			if _, plainWorker.err = os.Stat(exe); plainWorker.err == nil {
				plainWorker.cmd = []string{exe}
			}
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			plainWorker.err = fmt.Errorf("build a plain worker: the go command is not on PATH: %v", err)
			return
		}
		plainWorker.dir, plainWorker.err = os.MkdirTemp("", "local-worker-")
		if plainWorker.err != nil {
			return
		}
		// A root gateway starts workers as nobody, who must reach the
		// binary.
		if plainWorker.err = os.Chmod(plainWorker.dir, 0o755); plainWorker.err != nil {
			return
		}
		exe := filepath.Join(plainWorker.dir, "worker.test")
		out, err := exec.Command(goTool, "test", "-c", "-o", exe, ".").CombinedOutput()
		if err != nil {
			plainWorker.err = fmt.Errorf("build a plain worker: %v\n%s", err, out)
			return
		}
		plainWorker.cmd = []string{exe}
	})
	if plainWorker.err != nil {
		t.Fatal(plainWorker.err)
	}
	return plainWorker.cmd
}

// inPlainBuild runs the calling test again in the plain build of this test
// binary (jsWorkerCommand's) and requires it to pass there, reporting true;
// in the plain build itself it reports false, and the test goes on. It is
// for tests of sizes, not of what runs side by side, whose bytes the race
// detector would shadow many times over (a 64 MB job's copies took it 15
// CPU-seconds).
func inPlainBuild(t *testing.T) bool {
	t.Helper()
	if !raceBuild {
		return false
	}
	out, err := exec.Command(jsWorkerCommand(t)[0], "-test.run", "^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v").CombinedOutput()
	passed := slices.ContainsFunc(strings.Split(string(out), "\n"), func(l string) bool {
		return strings.HasPrefix(l, "--- PASS: "+t.Name()+" (")
	})
	if err != nil || !passed {
		t.Fatalf("in the plain build: %v\n%s", err, out)
	}
	return true
}

// expectOne runs the trivial program and requires its answer: the pool is
// still healthy.
func expectOne(t *testing.T, e *Executor) {
	t.Helper()
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: "async () => 1"})
	if err != nil {
		t.Fatalf("the next execution failed: %v", err)
	}
	if res.HasError || res.ResultJSON != "1" {
		t.Fatalf("the next execution: %+v", res)
	}
}

func TestPoolRunsJavaScript(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "async () => { console.log('hi', 2); return {a: [1, 'x']} }",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.HasError || res.ResultJSON != `{"a":[1,"x"]}` {
		t.Fatalf("got %+v", res)
	}
	if len(res.Logs) != 1 || res.Logs[0].Text != "hi 2" || res.Logs[0].Level != protocol.LogLevelLog {
		t.Fatalf("logs %+v", res.Logs)
	}
	expectOne(t, e)
}

func TestPoolToolCalls(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	var mu sync.Mutex
	var seen []string
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: `async () => {
  const a = await store.get(1)
  let err = ''
  try { await store.fail() } catch (e) { err = e.message }
  return { a, err }
}`,
		Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"get", "fail"}}},
		Dispatch: func(ctx context.Context, provider, tool, args string) (string, error) {
			mu.Lock()
			seen = append(seen, provider+"."+tool+" "+args)
			mu.Unlock()
			if tool == "fail" {
				return `{"error":"No such customer."}`, nil
			}
			return `{"result":{"id":1}}`, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.HasError || res.ResultJSON != `{"a":{"id":1},"err":"No such customer."}` {
		t.Fatalf("got %+v", res)
	}
	if strings.Join(seen, "|") != "store.get 1|store.fail " {
		t.Fatalf("dispatch saw %q", seen)
	}
}

// The contract's run clock: a tool call does not spend the bound, unless
// countHostWaits restores the wall clock.
func TestPoolRunClock(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	slow := func(ctx context.Context, provider, tool, args string) (string, error) {
		select {
		case <-time.After(1500 * time.Millisecond):
			return `{"result":"late"}`, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	req := func(count bool) *protocol.ExecuteRequest {
		return &protocol.ExecuteRequest{
			Code:           "async () => await tools.slow()",
			Providers:      []protocol.ProviderDescriptor{{Name: "tools", Tools: []string{"slow"}}},
			Dispatch:       slow,
			Timeout:        protocol.TimeoutOf(500),
			CountHostWaits: &count,
		}
	}
	res, err := e.Execute(context.Background(), req(false))
	if err != nil {
		t.Fatal(err)
	}
	if res.HasError || res.ResultJSON != `"late"` {
		t.Fatalf("a 1.5 s tool call under a 500 ms bound: %+v", res)
	}
	res, err = e.Execute(context.Background(), req(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != protocol.NewExecutionTimeoutError(500).Error() {
		t.Fatalf("with countHostWaits: %+v", res)
	}
	expectOne(t, e)
}

// Hostile programs end inside their bound with the right text, and the
// next execution on the pool works.
func TestHostilePrograms(t *testing.T) {
	// A case that ends at its timeout spins a processor for all of it, and
	// the worker's setup of each (a plain build's) takes milliseconds: 300
	// ms proves the bound as 2 s did (the sandbox's bombs take 100 ms), for
	// a seventh of the CPU; each case's input is at hand at once or built
	// in a few milliseconds (the deep object of JSON.stringify).
	const timeoutMs = 300
	// A case that must end at the memory limit runs under a wider bound:
	// the limit is confirmed by a collection, and a doubling string
	// reached it after 0.4 to 1.7 s of run clock on this 2-core machine
	// (more with the rest of the suite beside it), so at 1 or 2 s the
	// timeout could answer for the memory limit. The same holds for a case whose
	// answers are the memory limit or an engine error, but not the timeout
	// (the nested sources: parsing them took over 2 s with the suite and
	// three builds beside it). Under the race detector every byte a
	// doubling copies is shadowed too: with the whole suite and other
	// builds beside it, the doubling string once took 11 s.
	memoryCaseTimeoutMs := 10000
	if raceBuild {
		memoryCaseTimeoutMs = 30000
	}
	timeoutText := protocol.NewExecutionTimeoutError(timeoutMs).Error()
	memText := protocol.NewMemoryLimitError(protocol.DefaultMemoryLimitMB).Error()
	cases := []struct {
		name, code string
		want       []string // accepted error texts; "" means any thrown error
	}{
		{"busy loop", "async () => { while (true) {} }", []string{timeoutText}},
		{"busy loop with finally", "async () => { try { while (true) {} } finally { while (true) {} } }", []string{timeoutText}},
		{"never-yielding promise chain", "async () => { while (true) await null }", []string{timeoutText}},
		// Each promise adopts the next, so the chain is live and grows:
		// whichever bound it meets first ends it.
		{"promise ping-pong", "async () => { const f = () => Promise.resolve().then(f); f(); await new Promise(() => {}) }", []string{timeoutText, memText}},
		{"backtracking regex (lookahead forces regexp2)", "async () => /^(a+)+(?=c)/.test('a'.repeat(40) + 'b')", []string{timeoutText}},
		{"backtracking regex (backreference)", `async () => /^(a+)+\1$/.test('a'.repeat(40) + 'b')`, []string{timeoutText}},
		{"deep JSON.stringify", "async () => { let o = {}; for (let i = 0; i < 200000; i++) o = {a: o}; return JSON.stringify(o).length }", []string{timeoutText}},
		{"huge join of holes", "async () => { const a = []; a.length = 2**32 - 1; return a.join('').length }", []string{timeoutText}},
		{"huge join that allocates", "async () => { const a = new Array(3e6); return a.join('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx').length }", []string{memText}},
		{"ArrayBuffer 2**31", "async () => new ArrayBuffer(2**31).byteLength", []string{memText}},
		{"ArrayBuffer 2**32", "async () => { const b = new ArrayBuffer(2**32); while (true) {} }", []string{memText}},
		{"repeat 2**29", "async () => 'x'.repeat(2**29).length", []string{memText}},
		{"padStart", "async () => ''.padStart(2**29, 'ab').length", []string{memText}},
		{"string doubling", "async () => { let s = 'x'; while (true) s += s }", []string{memText}},
		{"array push loop", "async () => { const a = []; while (true) a.push('x'.repeat(1000) + a.length) }", []string{memText}},
		{"object push loop", "async () => { const a = []; for (let i = 0; ; i++) a.push({i, s: 'k' + i}) }", []string{memText}},
		{"typed array", "async () => new Float64Array(1e8).fill(1).length", []string{memText}},
		{"typed arrays in a loop", "async () => { const a = []; while (true) a.push(new Uint8Array(1 << 24).fill(7)) }", []string{memText}},
		{"deep recursion", "async () => { const f = () => f() + 1; return f() }", []string{""}},
		{"recursion through a builtin", "async () => { const f = () => [1].map(f); return f() }", []string{""}},
		// Deeply nested source recurses in goja's parser, in Go; its stack
		// is memory the worker's bounds count.
		{"nested source through eval", "async () => eval('('.repeat(300000) + '1' + ')'.repeat(300000))", []string{memText, ""}},
		{"nested source through Function", "async () => new Function('return ' + '['.repeat(300000) + ']'.repeat(300000))()", []string{memText, ""}},
		{"String of a deeply nested array", "async () => { let a = []; for (let i = 0; i < 300000; i++) a = [a]; return String(a).length }", []string{memText, timeoutText, ""}},
	}
	e := newPool(t, Options{PoolSize: 2})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bound := float64(timeoutMs)
			if slices.Contains(c.want, memText) && !slices.Contains(c.want, timeoutText) {
				bound = float64(memoryCaseTimeoutMs)
			}
			start := time.Now()
			res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: c.code, Timeout: protocol.TimeoutOf(bound)})
			took := time.Since(start)
			if err != nil {
				t.Fatalf("fault after %v: %v", took, err)
			}
			// The bound plus the kill grace plus a wide margin for a busy
			// 2-core machine.
			if limit := time.Duration(bound)*time.Millisecond + DefaultKillGrace + 15*time.Second; took > limit {
				t.Fatalf("took %v, over %v", took, limit)
			}
			if !res.HasError {
				t.Fatalf("ended without an error: %+v", res)
			}
			ok := false
			for _, w := range c.want {
				if w == res.Error || (w == "" && res.Error != "" && res.Error != timeoutText && res.Error != memText) {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("error %q, want one of %q", res.Error, c.want)
			}
			t.Logf("%v: %.80s", took, res.Error)
			expectOne(t, e)
		})
	}
	t.Logf("pool stats: %+v", e.Stats())
	// The allocation bombs landed in workers, never in this process.
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Fatalf("the parent's heap grew by %d MiB", grew>>20)
	}
}

// Under a memory limit larger than the Go stack the worker allows, deeply
// nested source built at run time still ends in the memory text: the
// parser's recursion hits the stack cap the worker set (package worker's
// workerMaxStackMB, see its TestWorkerGCPercent), and the parent reads the
// runtime's words for it as a memory death, not as WORKER_CRASHED.
func TestDeepSourceUnderALargeMemoryLimit(t *testing.T) {
	const limitMB = 2048
	e := newPool(t, Options{PoolSize: 1, MemoryLimitMB: limitMB})
	memText := protocol.NewMemoryLimitError(limitMB).Error()
	for _, code := range []string{
		"async () => eval('('.repeat(400000) + '1' + ')'.repeat(400000))",
		"async () => new Function('return ' + '['.repeat(400000) + ']'.repeat(400000))()",
	} {
		res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{Code: code})
		if err != nil || res.Error != memText {
			t.Fatalf("%s: %+v, %v", code, res, err)
		}
		expectOne(t, e)
	}
}

// The RE2-compatible pattern of the classic example runs in linear time in
// goja (Go's regexp), so it simply answers, well inside its bound.
func TestLinearRegexAnswers(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "async () => /(a+)+$/.test('a'.repeat(40) + '!')", Timeout: protocol.TimeoutOf(2000),
	})
	if err != nil || res.HasError || res.ResultJSON != "false" {
		t.Fatalf("got %+v, %v", res, err)
	}
}

// A hostile run does not disturb another tenant's execution running beside
// it: that one runs in another process.
func TestHostileRunSparesItsNeighbour(t *testing.T) {
	e := newPool(t, Options{PoolSize: 2})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => 'x'.repeat(2**29).length"}, protocol.Policy{Tenant: "hostile"})
	}()
	res, err := e.ExecuteWith(context.Background(), &protocol.ExecuteRequest{
		Code: "async () => { let s = 0; for (let i = 0; i < 1e6; i++) s += i; return s }",
	}, protocol.Policy{Tenant: "neighbour"})
	wg.Wait()
	if err != nil || res.HasError || res.ResultJSON != "499999500000" {
		t.Fatalf("neighbour: %+v, %v", res, err)
	}
}

// Every execution on a reused worker starts from a fresh runtime: nothing
// one run leaves on the globals or the prototypes reaches the next.
func TestNothingPersistsOnAReusedWorker(t *testing.T) {
	e := newPool(t, Options{PoolSize: 1})
	res, err := e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "async () => { globalThis.leak = 'x'; Object.prototype.polluted = 1; Array.prototype.map = () => 'hijacked'; return 1 }",
	})
	if err != nil || res.HasError {
		t.Fatalf("first run: %+v, %v", res, err)
	}
	res, err = e.Execute(context.Background(), &protocol.ExecuteRequest{
		Code: "async () => [typeof leak, ({}).polluted === undefined, [1].map(x => x + 1)]",
	})
	if err != nil || res.ResultJSON != `["undefined",true,[2]]` {
		t.Fatalf("second run: %+v, %v", res, err)
	}
	if s := e.Stats(); s.WorkersStarted != 1 {
		t.Fatalf("the runs did not share a worker: %+v", s)
	}
}
