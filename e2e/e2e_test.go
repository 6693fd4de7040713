// Package e2e starts the real gateway binary and drives it from outside:
// with the real capnweb JavaScript client from the npm registry (through
// lib/executor-client.mjs, written from the contract alone) and with the Go
// remote backend.
package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/protocol"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// testGatewayEnv names a gateway binary built from this tree for the
// test run: make test builds one for these tests and the TypeScript
// client's, where each built its own before (a link, about 4 CPU-s).
const testGatewayEnv = "CODEMODE_TEST_GATEWAY"

// gatewayBinary builds cmd/gateway once per test run, or takes the one
// testGatewayEnv names.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if bin := os.Getenv(testGatewayEnv); bin != "" {
			binary = bin
			if _, err := os.Stat(bin); err != nil {
				buildErr = fmt.Errorf("%s: %w", testGatewayEnv, err)
			}
			return
		}
		dir, err := os.MkdirTemp("", "gateway-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "gateway")
		out, err := exec.Command("go", "build", "-o", binary, "../cmd/gateway").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("building the gateway: %v", buildErr)
	}
	return binary
}

// process is a running program of a test: the gateway binary or node.
type process struct {
	cmd *exec.Cmd
	url string // the first address it printed
}

// listening finds the address in a plain line and in the JSON line of a
// gateway that logs JSON.
var listening = regexp.MustCompile(`listening on ((?:ws|http)s?://[^\s"]+)`)

// startProcess runs cmd in its own process group (so its workers die with
// it), logs its stderr, and waits for it to print where it listens. extra
// lines of its stdout are handed to onLine, if given, before the address
// line is reported.
func startProcess(t testing.TB, what string, cmd *exec.Cmd, onLine func(string)) *process {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &prefixWriter{t: t}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd}
	t.Cleanup(p.kill)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if onLine != nil {
				onLine(line)
			}
			// An admin line, plain or JSON, is never the address asked for.
			if m := listening.FindStringSubmatch(line); m != nil && !strings.Contains(line, "admin listening on") {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case p.url = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never said where it listens", what)
	}
	return p
}

// startExecutorServer runs `gateway serve --executor-server` on a free
// loopback port with extra flags, and waits for its address.
func startExecutorServer(t *testing.T, args ...string) *process {
	t.Helper()
	return startExecutorServerEnv(t, nil, args...)
}

// startExecutorServerEnv is startExecutorServer with extra environment
// variables.
func startExecutorServerEnv(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), append([]string{"serve", "--executor-server", "--listen", "127.0.0.1:0", "--max-workers", "2"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return startProcess(t, "the executor server", cmd, nil)
}

// startExecutorServerWithAdmin is startExecutorServer with an admin
// listener; it returns the admin listener's http:// address too.
func startExecutorServerWithAdmin(t *testing.T, args ...string) (*process, string) {
	t.Helper()
	var admin string
	cmd := exec.Command(gatewayBinary(t), append([]string{"serve", "--executor-server", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--max-workers", "2"}, args...)...)
	// The admin line comes before the address line, on the goroutine that
	// then reports the address: the write happens before startProcess
	// returns.
	p := startProcess(t, "the executor server", cmd, func(line string) {
		if m := adminListening.FindStringSubmatch(line); m != nil {
			admin = m[1]
		}
	})
	if admin == "" {
		t.Fatal("the executor server did not say where its admin listener is")
	}
	return p, admin
}

// dialWithKey connects to an ExecutorApi at url (ws://) with a bearer key;
// the connection closes when the test ends.
func dialWithKey(ctx context.Context, t *testing.T, url, key string) *remote.Executor {
	t.Helper()
	// No client retries: the tests prove what the gateway does on its own
	// (the rolling update loses no run without a caller trying again).
	ex, err := remote.Dial(ctx, url, remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}, Retry: remote.Retry{Attempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// kill ends the server and its worker processes at once.
func (p *process) kill() {
	if p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd.Wait()
	}
}

type prefixWriter struct{ t testing.TB }

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.t.Logf("server: %s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// nodeModules fails the test unless the npm packages are installed.
func nodeModules(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: the end-to-end tests run the real capnweb JavaScript client (Node 20 or later)")
	}
	if _, err := os.Stat("node_modules/capnweb/package.json"); err != nil {
		t.Fatal("e2e/node_modules is missing: run `make e2e-deps` (npm ci in e2e/)")
	}
}

func newKey(t testing.TB) (key, hash string) {
	key = auth.NewAPIKey()
	hash, err := auth.HashAPIKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return key, hash
}

// TestContractExamplesFromJavaScript runs contract.test.mjs, the contract's
// examples through the JavaScript client, against the executor server.
func TestContractExamplesFromJavaScript(t *testing.T) {
	nodeModules(t)
	key, hash := newKey(t)
	srv := startExecutorServer(t, "--key-hash", hash)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "contract.test.mjs")
	cmd.Env = append(os.Environ(), "CODEMODE_URL="+srv.url, "CODEMODE_KEY="+key)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test contract.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the contract examples failed from JavaScript: %v", err)
	}
}

func TestExecutorServerRequiresItsKey(t *testing.T) {
	_, hash := newKey(t)
	srv := startExecutorServer(t, "--key-hash", hash)
	httpURL := "http" + strings.TrimPrefix(srv.url, "ws")
	for name, header := range map[string]string{"no credential": "", "wrong key": "Bearer " + auth.NewAPIKey()} {
		req, _ := http.NewRequest("GET", httpURL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401 before any upgrade", name, resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := remote.Dial(ctx, srv.url, remote.Options{}); protocol.CodeOf(err) != protocol.CodeConnectionRejected {
		t.Fatalf("dialing without the key gave %v, want CONNECTION_REJECTED", err)
	}
}

// TestServerKilledMidExecution: the Go remote backend sees CONNECTION_BROKEN
// when the server process dies under a run, and nothing is replayed.
func TestServerKilledMidExecution(t *testing.T) {
	key, hash := newKey(t)
	srv := startExecutorServer(t, "--key-hash", hash)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ex, err := remote.Dial(ctx, srv.url, remote.Options{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	called := make(chan struct{})
	var calls int
	dispatch := func(ctx context.Context, provider, tool, args string) (string, error) {
		calls++
		close(called)
		<-ctx.Done() // the tool never answers; the server dies meanwhile
		return "", ctx.Err()
	}
	errc := make(chan error, 1)
	go func() {
		_, err := ex.Execute(ctx, &protocol.ExecuteRequest{
			Code:      `async () => await store.wait()`,
			Providers: []protocol.ProviderDescriptor{{Name: "store", Tools: []string{"wait"}}},
			Dispatch:  dispatch,
		})
		errc <- err
	}()
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		t.Fatal("the run never made its tool call")
	}
	srv.kill()
	testutil.WaitBroken(t, errc, 30*time.Second, "the run on the killed server")
	if calls != 1 {
		t.Fatalf("the tool was called %d times; a run must never be replayed", calls)
	}
}
