package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/kinds"
	"github.com/supolka/codemode-gateway/protocol"
)

func TestMain(m *testing.M) {
	local.RunWorkerIfRequested()
	os.Exit(m.Run())
}

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersionAndUsage(t *testing.T) {
	if code, _, errOut := runCmd("frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("unknown command: %d %q", code, errOut)
	}
	if code, _, errOut := runCmd(); code != 2 || !strings.Contains(errOut, "usage: gateway") {
		t.Fatalf("no command: %d %q", code, errOut)
	}
}

func TestHashKey(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := hashKey(nil, strings.NewReader("0123456789abcdefghijklmn\n"), &out, &errOut); code != 0 {
		t.Fatalf("hash-key: %d %s", code, errOut.String())
	}
	// SHA-256 of the key, as sha256sum computes it.
	if got := strings.TrimSpace(out.String()); got != "sha256:d5ea2aa9223ac1fa43ccec70b30962690fcfc6686857f99a0c4b2963cf8bee4b" {
		t.Fatalf("hash-key printed %q", got)
	}
	out.Reset()
	if code := hashKey(nil, strings.NewReader("short"), &out, &errOut); code != 2 {
		t.Fatalf("a short key was hashed: %q", out.String())
	}
	out.Reset()
	if code := hashKey([]string{"--new"}, strings.NewReader(""), &out, &errOut); code != 0 || !strings.Contains(out.String(), "key:  cmk_") || !strings.Contains(out.String(), "hash: sha256:") {
		t.Fatalf("hash-key --new printed %q", out.String())
	}
}

func TestCheckConfig(t *testing.T) {
	if code, out, errOut := runCmd("check-config", "--config", "../../config.example.yaml"); code != 0 || !strings.Contains(out, ": ok") {
		t.Fatalf("the example config: %d %q %q", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	src, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(bad, bytes.Replace(src, []byte("backend: local"), []byte("backend: nowhere"), 1), 0o600)
	code, _, errOut := runCmd("check-config", "--config", bad)
	if code != 1 || !strings.Contains(errOut, `bad.yaml:`) || !strings.Contains(errOut, `no backend is named "nowhere"`) {
		t.Fatalf("a bad config: %d %q", code, errOut)
	}
}

func TestServeRefusesAnOpenExecutorServerWithoutAKey(t *testing.T) {
	code, _, errOut := runCmd("serve", "--executor-server", "--listen", "0.0.0.0:0")
	if code != 2 || !strings.Contains(errOut, "not a loopback address") {
		t.Fatalf("an unauthenticated public executor server: %d %q", code, errOut)
	}
}

func runProgramCmd(stdin string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := runProgram(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// gateway run: one program through a real worker process, the result on
// stdout, console and error on stderr, the exit status from the envelope.
func TestRunProgram(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prog := write("p.js", `async () => { console.log("hi", 1); console.warn("careful"); return {a: [1, 2]} }`)
	if code, out, errOut := runProgramCmd("", prog); code != 0 || out != "{\"a\":[1,2]}\n" || errOut != "[log] hi 1\n[warn] careful\n" {
		t.Fatalf("file: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runProgramCmd(`async () => { throw new Error("nope") }`, "-"); code != 1 || out != "" || errOut != "error: nope\n" {
		t.Fatalf("a thrown error: %d %q %q", code, out, errOut)
	}

	tools := write("tools.json", `{"weather": {"get": {"temp": 21}}}`)
	mod := write("m.js", `export const twice = (x) => x * 2`)
	text := write("greeting.txt", `hello`)
	code, out, errOut := runProgramCmd("import { twice } from \"m\"\nimport greeting from \"greeting\"\nasync () => [twice((await weather.get({city: \"Oslo\"})).temp), greeting, await weather.put(1).catch(e => e.message)]",
		"--tools", tools, "--module", "m="+mod, "--module", "greeting="+text, "-")
	if code != 0 || out != `[42,"hello","Tool \"put\" not found"]`+"\n" || !strings.Contains(errOut, `[tool] weather.get({"city":"Oslo"})`) {
		t.Fatalf("tools and modules: %d %q %q", code, out, errOut)
	}

	code, out, _ = runProgramCmd(`async () => (await fetch("https://example.com")).status`, "--outbound", "disabled", "--json", "-")
	var env struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &env); code != 1 || err != nil || env.Error != protocol.NewOutboundDisabledError().Error() {
		t.Fatalf("--outbound disabled --json: %d %q %v", code, out, err)
	}
	code, _, _ = runProgramCmd(`async () => { while (true) {} }`, "--timeout-ms", "200", "-")
	if code != 1 {
		t.Fatalf("--timeout-ms: exit %d", code)
	}

	for _, bad := range [][]string{
		{},
		{"-", "extra"},
		{"--outbound", "stub", "-"},
		{"--module", "nopath", "-"},
		{"--module", "m=" + filepath.Join(dir, "missing.js"), "-"},
		{"--tools", prog, "-"},
		{filepath.Join(dir, "missing.js")},
	} {
		if code, _, errOut := runProgramCmd("async () => 1", bad...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, %q", bad, code, errOut)
		}
	}
	if code, _, errOut := runProgramCmd("  \n", "-"); code != 2 || !strings.Contains(errOut, "the program is empty") {
		t.Errorf("empty program: %d %q", code, errOut)
	}
}

// `serve --executor-server -h` says what the executor server is, then
// lists its flags, --admin-listen among them.
func TestExecutorServerHelp(t *testing.T) {
	code, out, errOut := runCmd("serve", "--executor-server", "-h")
	head, flags, ok := strings.Cut(out, "\nflags:\n")
	if code != 0 || errOut != "" || !ok || head != "usage: gateway serve --executor-server [flags]\n\n"+executorServerAbout+"\n" {
		t.Fatalf("-h: %d\n%s%s", code, out, errOut)
	}
	want := "  -admin-listen string\n    \taddress of the admin listener (/healthz, /readyz, /metrics); keep it off the callers' network (default: none)"
	if first := strings.SplitN(flags, "\n", 3); len(first) < 2 || first[0]+"\n"+first[1] != want {
		t.Fatalf("the first flag listed is not --admin-listen:\n%s", flags)
	}
	for _, line := range []string{
		"  -key-hash hash\n    \tthe hash of an API key (printed by gateway hash-key) a caller must present as Authorization: Bearer <key>; repeatable\n",
		"  -executor-server\n    \tserve ExecutorApi on the local backend instead of a gateway configuration (this command)\n",
	} {
		if strings.Count(flags, line) != 1 {
			t.Errorf("the flags do not list, once:\n%s\nin:\n%s", line, flags)
		}
	}
}

// Every subcommand's -h and --help print its usage on standard output,
// beginning "usage: gateway <sub>", with a paragraph of what it does, and
// exit 0; a flag it does not know prints the same on standard error after
// the complaint, and exits 2.
func TestEverySubcommandHelps(t *testing.T) {
	for _, c := range []struct {
		args     []string
		synopsis string
	}{
		{[]string{"serve"}, "serve [--config FILE] [flags]"},
		{[]string{"serve", "--executor-server"}, "serve --executor-server [flags]"},
		{[]string{"check-config"}, "check-config [--config FILE]"},
		{[]string{"reload"}, "reload [--config FILE | --admin ADDRESS] [flags]"},
		{[]string{"hash-key"}, "hash-key [--new] < KEY"},
		{[]string{"run"}, `run [flags] FILE     (FILE "-" reads standard input)`},
		{[]string{"version"}, "version"},
	} {
		for _, h := range []string{"-h", "--help"} {
			code, out, errOut := runCmd(append(slices.Clone(c.args), h)...)
			head, about, ok := strings.Cut(out, "\n\n")
			if code != 0 || errOut != "" || !ok || head != "usage: gateway "+c.synopsis || len(about) < 40 {
				t.Errorf("%q %s: exit %d\nstdout:\n%s\nstderr:\n%s", c.args, h, code, out, errOut)
			}
		}
		code, out, errOut := runCmd(append(slices.Clone(c.args), "--no-such-flag")...)
		complaint, usage, _ := strings.Cut(errOut, "\n")
		if code != 2 || out != "" || complaint != "flag provided but not defined: -no-such-flag" || !strings.HasPrefix(usage, "usage: gateway "+c.synopsis+"\n") {
			t.Errorf("%q with a bad flag: exit %d\nstdout:\n%s\nstderr:\n%s", c.args, code, out, errOut)
		}
	}
	// serve -h names the executor server.
	if _, out, _ := runCmd("serve", "-h"); !strings.Contains(out, "gateway serve --executor-server serves one ExecutorApi") {
		t.Errorf("serve -h does not name --executor-server:\n%s", out)
	}
}

// serveExampleAdmin serves the admin listener of a gateway on
// config.example.yaml with its admin section's listen line replaced by
// adminLines(the listener's port), and returns the file's path, the
// example's text and the file's text.
func serveExampleAdmin(t *testing.T, adminLines func(port string) string) (path string, example, written []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	example, err = os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "gw.yaml")
	written = bytes.Replace(example, []byte("listen: 127.0.0.1:9090"), []byte(adminLines(port)), 1)
	if err := os.WriteFile(path, written, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{ConfigPath: path, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Kinds: kinds.All()})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gw.AdminHandler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); gw.Close() })
	return path, example, written
}

// `gateway reload --config FILE` posts to the admin listener FILE names,
// a wildcard host reached on loopback; --admin takes host:port too.
func TestReloadFindsTheAdminListenerInTheConfiguration(t *testing.T) {
	var port string
	path, src, withAdmin := serveExampleAdmin(t, func(p string) string { port = p; return "listen: \"0.0.0.0:" + p + "\"" })

	if code, out, errOut := runCmd("reload", "--config", path); code != 0 || out != "reloaded\n" {
		t.Fatalf("reload --config: %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runCmd("reload", "--admin", "127.0.0.1:"+port); code != 0 || out != "reloaded\n" {
		t.Fatalf("reload --admin host:port: %d %q %q", code, out, errOut)
	}
	// A file the gateway would refuse is refused through reload too.
	os.WriteFile(path, append(withAdmin, []byte("bogus: 1\n")...), 0o600)
	want := fmt.Sprintf("gateway reload: refused; the running configuration stays:\n%s:%d: bogus: unknown key; the keys here are: listen, tls, admin, log, connections, drainTimeout, limits, backends, jwt, tenants, routes, pins, executionIds, tracing\n",
		path, bytes.Count(withAdmin, []byte("\n"))+1)
	if code, _, errOut := runCmd("reload", "--config", path); code != 1 || errOut != want {
		t.Fatalf("reload of a bad file: %d\n%q\nwant\n%q", code, errOut, want)
	}
	// No admin listener named: no guess at an address.
	bare := filepath.Join(t.TempDir(), "bare.yaml")
	os.WriteFile(bare, bytes.Replace(src, []byte("  listen: 127.0.0.1:9090\n"), nil, 1), 0o600)
	want = "gateway reload: " + bare + " sets no admin.listen, so its gateway has no admin listener to ask (unless started with --admin-listen: give that address as --admin); send it SIGHUP instead\n"
	if code, _, errOut := runCmd("reload", "--config", bare); code != 2 || errOut != want {
		t.Fatalf("reload without an admin listener: %d\n%q\nwant\n%q", code, errOut, want)
	}
}

// `gateway reload --config FILE` sends the token of the variable FILE's
// admin.tokenEnv names, as the gateway serving FILE expects it.
func TestReloadTakesTheTokenVariableFromTheConfiguration(t *testing.T) {
	t.Setenv("GW_TEST_RELOAD_TOKEN", "reload-token-0123456789")
	var port string
	path, _, _ := serveExampleAdmin(t, func(p string) string {
		port = p
		return "listen: \"127.0.0.1:" + p + "\"\n  tokenEnv: GW_TEST_RELOAD_TOKEN"
	})

	if code, out, errOut := runCmd("reload", "--config", path); code != 0 || out != "reloaded\n" {
		t.Fatalf("reload --config with the file's token variable set: %d %q %q", code, out, errOut)
	}
	t.Setenv("GW_TEST_RELOAD_TOKEN", "")
	want := "gateway reload: environment variable GW_TEST_RELOAD_TOKEN (admin.tokenEnv of " + path + ") is not set\n"
	if code, _, errOut := runCmd("reload", "--config", path); code != 2 || errOut != want {
		t.Fatalf("reload --config with the variable unset: %d\n%q\nwant\n%q", code, errOut, want)
	}
	want = "gateway reload: environment variable GW_TEST_RELOAD_TOKEN (--token-env) is not set\n"
	if code, _, errOut := runCmd("reload", "--admin", "127.0.0.1:"+port, "--token-env", "GW_TEST_RELOAD_TOKEN"); code != 2 || errOut != want {
		t.Fatalf("reload --token-env with the variable unset: %d\n%q\nwant\n%q", code, errOut, want)
	}
}

// Where `gateway reload` posts, from --admin or the file's admin section,
// and the token variable the file names (none when --admin is given).
func TestReloadTarget(t *testing.T) {
	dir := t.TempDir()
	n := 0
	file := func(admin string) string {
		n++
		p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", n))
		os.WriteFile(p, []byte("admin: "+admin+"\n"), 0o600)
		return p
	}
	withToken := file(`{listen: "127.0.0.1:9595", tokenEnv: GW_ADMIN_TOKEN}`)
	for _, c := range []struct{ admin, cfg, want, tokenEnv string }{
		{"127.0.0.1:9191", "", "http://127.0.0.1:9191/reload", ""},
		{"http://10.1.2.3:9090/", "", "http://10.1.2.3:9090/reload", ""},
		{"", file(`{listen: "0.0.0.0:9292"}`), "http://127.0.0.1:9292/reload", ""},
		{"", file(`{listen: "[::]:9292"}`), "http://[::1]:9292/reload", ""},
		{"", file(`{listen: ":9393"}`), "http://127.0.0.1:9393/reload", ""},
		{"", file(`{listen: "admin.internal:9494", tls: {certFile: c.pem, keyFile: k.pem}}`), "https://admin.internal:9494/reload", ""},
		{"", withToken, "http://127.0.0.1:9595/reload", "GW_ADMIN_TOKEN"},
		{"127.0.0.1:9595", withToken, "http://127.0.0.1:9595/reload", ""},
	} {
		got, tokenEnv, err := reloadTarget(c.admin, c.cfg)
		if err != nil || got != c.want || tokenEnv != c.tokenEnv {
			t.Errorf("--admin %q --config %q: %q, token from %q, %v; want %q, %q", c.admin, c.cfg, got, tokenEnv, err, c.want, c.tokenEnv)
		}
	}
	if _, _, err := reloadTarget("nowhere", ""); err == nil || err.Error() != `admin address "nowhere" is neither host:port nor a URL` {
		t.Errorf("a bad --admin: %v", err)
	}
}
