package config

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/auth"
)

func noEnv(string) string { return "" }

func TestExampleConfigIsValid(t *testing.T) {
	cfg, err := LoadWith("../../config.example.yaml", noEnv)
	if err != nil {
		t.Fatalf("config.example.yaml does not load:\n%v", err)
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.Routes[0].Path != "/v1/executor" || cfg.Routes[0].Kind != "executor" {
		t.Fatalf("the example serves %s %s, want 127.0.0.1:8080 /v1/executor", cfg.Listen, cfg.Routes[0].Path)
	}
	if len(cfg.Tenants) != 1 || cfg.Tenants[0].Backend != "local" || cfg.Backends[0].Type != "local" {
		t.Fatalf("the example is not one demo tenant on a local backend: %+v", cfg.Tenants)
	}
}

// good is a valid file of 13 lines (testdata/good.yaml), which the
// gateway's credential tests extend too.
var good = readGood()

func readGood() string {
	b, err := os.ReadFile(filepath.Join("testdata", "good.yaml"))
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(good), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Tenants[0].Policy
	if p.TimeoutMs != DefaultLimitTimeoutMs || p.MaxConcurrent != DefaultLimitConcurrent || cfg.Pins.Size != DefaultPinsSize ||
		cfg.Routes[0].MaxMessageBytes != DefaultLimitMessageBytes || cfg.Backends[0].Local == nil {
		t.Fatalf("defaults not applied: %+v %+v", cfg.Tenants[0].Policy, cfg.Routes[0])
	}
}

// Each case changes the good file one way; the problem, whole, names the
// file, the line and the key path, and says what to fix.
func TestProblemsNameTheLineAndTheFix(t *testing.T) {
	cases := []struct {
		name, from, to string
		want           string
	}{
		{"unknown key", "    backend: local\n", "    backend: local\n    bakend: x\n",
			`c.yaml:8: tenants[0].bakend: unknown key; did you mean "backend"?`},
		{"key one level too far out", "    backend: local\n", "    backend: local\n    maxConcurrent: 4\n",
			`c.yaml:8: tenants[0].maxConcurrent: unknown key here; it belongs under policy, as tenants[0].policy.maxConcurrent`},
		{"key of a pointer's map too far out", "    type: local\n", "    type: local\n    maxWorkers: 2\n",
			`c.yaml:5: backends[0].maxWorkers: unknown key here; it belongs under local, as backends[0].local.maxWorkers`},
		{"IPv6 range split at its colon", "    type: local\n", "    type: local\n    local: {native: {allow: [fd00::/8]}}\n",
			`c.yaml:5: backends[0].local.native.allow[0]: must be a string, not a map; YAML read fd00::/8 as a map at its ':', so quote it: "fd00::/8"`},
		{"one address for a range", "    backend: local\n", "    backend: local\n    policy:\n      nativeDeny: [10.1.2.3, \"fd00::1\", 10.1.2.0/24]\n",
			"c.yaml:9: tenants[0].policy.nativeDeny[0]: \"10.1.2.3\" is one address, not a CIDR range; write 10.1.2.3/32\n" +
				"c.yaml:9: tenants[0].policy.nativeDeny[1]: \"fd00::1\" is one address, not a CIDR range; write fd00::1/128"},
		{"wrong type", "listen: 127.0.0.1:8080", "listen: [1]",
			`c.yaml:1: listen: must be a string, not a list`},
		{"dangling backend", "    backend: local\n", "    backend: nope\n",
			`c.yaml:7: tenants[0].backend: no backend is named "nope"; declare it under backends or use one of: local`},
		{"bad hash", "hash: sha256:46e6", "hash: md5:46e6",
			"c.yaml:10: tenants[0].keys[0].hash: must be \"sha256:\" followed by 64 hex digits; make one with `gateway hash-key`"},
		{"bad listen", "listen: 127.0.0.1:8080", "listen: nowhere",
			`c.yaml:1: listen: "nowhere" is not host:port (address nowhere: missing port in address)`},
		{"bad kind", "kind: executor", "kind: lambda",
			`c.yaml:13: routes[0].kind: "lambda" is not a route kind; use executor or proxy`},
		{"bad backend type", "type: local", "type: cloud",
			`c.yaml:4: backends[0].type: "cloud" is not a backend type; use local or remote`},
		{"policy above limit", "    backend: local\n", "    backend: local\n    policy:\n      maxConcurrent: 1000\n",
			`c.yaml:9: tenants[0].policy.maxConcurrent: 1000 is outside the operator limit: use 1 to 64 (limits.maxConcurrent)`},
		{"route tenant", "kind: executor\n", "kind: executor\n    tenants: [ghost]\n",
			`c.yaml:14: routes[0].tenants[0]: no tenant is named "ghost"`},
		{"proxy without upstream", "kind: executor", "kind: proxy",
			`c.yaml:12: routes[0].upstream: a proxy route needs an http:// or https:// upstream URL (WebSocket upgrades are proxied over it too)`},
		{"credential subprotocol", "kind: executor\n", "kind: executor\n    subprotocols: [codemode.bearer.x]\n",
			`c.yaml:14: routes[0].subprotocols[0]: "codemode.bearer.x" starts with "codemode.bearer.", which marks a credential and is never selected`},
		{"remote key env", "  - name: local\n    type: local\n", "  - name: local\n    type: local\n  - name: far\n    type: remote\n    remote:\n      members:\n        - url: ws://127.0.0.1:9/\n          keyEnv: NOT_SET_ANYWHERE\n",
			`c.yaml:10: backends[1].remote.members[0].keyEnv: environment variable NOT_SET_ANYWHERE is not set; it must hold the bearer key for this executor server`},
		{"duplicate default route", "kind: executor\n", "kind: executor\n  - path: /v1/executor\n    kind: executor\n",
			`c.yaml:14: routes[1].subprotocols: routes[0] is already the default of path "/v1/executor"; give one of them subprotocols`},
		{"tenant memory above its backend", "    backend: local\n", "    backend: local\n    policy:\n      memoryMB: 512\n",
			`c.yaml:9: tenants[0].policy.memoryMB: 512 MB is above backend "local"'s limit of 128 MB; a tenant can only lower it`},
		{"admin token env", "listen: 127.0.0.1:8080\n", "listen: 127.0.0.1:8080\nadmin:\n  tokenEnv: NOT_SET_ANYWHERE\n",
			"c.yaml:3: admin.tokenEnv: environment variable NOT_SET_ANYWHERE is not set; it must hold a token of at least 16 bytes; make one with `gateway hash-key --new`"},
		{"negative idle timeout", "listen: 127.0.0.1:8080\n", "listen: 127.0.0.1:8080\nconnections:\n  idleTimeout: -1s\n",
			`c.yaml:3: connections.idleTimeout: must not be negative`},
		{"negative reserve", "listen: 127.0.0.1:8080\n", "listen: 127.0.0.1:8080\nconnections:\n  descriptorReserve: -1\n",
			`c.yaml:3: connections.descriptorReserve: must not be negative`},
		{"worker user", "    type: local\n", "    type: local\n    local:\n      workerUser: \"1000:\"\n",
			`c.yaml:6: backends[0].local.workerUser: "1000:" is neither a user name nor uid:gid in numbers (e.g. 65534:65534)`},
		{"tenant nobody can use", "    keys:\n      - name: k\n        hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb\n", "",
			`c.yaml:6: tenants[0].keys: tenant "demo" has no API keys and no jwt section is configured, so nobody can authenticate as it`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(good, c.from, c.to, 1)
			if src == good {
				t.Fatal("the case changed nothing")
			}
			_, err := Parse("c.yaml", []byte(src), noEnv)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("got %v, want Problems", err)
			}
			if err.Error() != c.want {
				t.Fatalf("got:\n%v\nwant:\n%s", err, c.want)
			}
		})
	}
}

// A secret's variable that is not set says so, as every …Env key does; one
// that is set but too short says how long it must be.
func TestShortSecretsAreToldApartFromUnsetOnes(t *testing.T) {
	src := good + "admin:\n  tokenEnv: GW_ADMIN_TOKEN\nexecutionIds:\n  keyEnv: GW_ID_KEY\n"
	cases := []struct {
		name  string
		value string
		want  string
	}{
		{"not set", "",
			"c.yaml:15: admin.tokenEnv: environment variable GW_ADMIN_TOKEN is not set; it must hold a token of at least 16 bytes; make one with `gateway hash-key --new`\n" +
				"c.yaml:17: executionIds.keyEnv: environment variable GW_ID_KEY is not set; it must hold a key of at least 32 bytes, the same on every replica"},
		{"too short", "short",
			"c.yaml:15: admin.tokenEnv: environment variable GW_ADMIN_TOKEN must hold a token of at least 16 bytes; make one with `gateway hash-key --new`\n" +
				"c.yaml:17: executionIds.keyEnv: environment variable GW_ID_KEY must hold a key of at least 32 bytes, the same on every replica"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(src), func(string) string { return c.value })
			if err == nil || err.Error() != c.want {
				t.Fatalf("got:\n%v\nwant:\n%s", err, c.want)
			}
		})
	}
	long := func(string) string { return strings.Repeat("k", 32) }
	if _, err := Parse("c.yaml", []byte(src), long); err != nil {
		t.Fatalf("secrets long enough were refused: %v", err)
	}
}

func TestSecretsComeFromTheEnvironment(t *testing.T) {
	src := good + `jwt:
  issuer: https://issuer.example
  audience: gw
  hmacSecretEnv: GW_SECRET
`
	if _, err := Parse("c.yaml", []byte(src), noEnv); err == nil || !strings.Contains(err.Error(), "GW_SECRET is not set") {
		t.Fatalf("a missing secret gave %v", err)
	}
	env := func(k string) string {
		if k == "GW_SECRET" {
			return "0123456789abcdef0123456789abcdef"
		}
		return ""
	}
	if _, err := Parse("c.yaml", []byte(src), env); err != nil {
		t.Fatal(err)
	}
}

// The JWKS file is read relative to the config, once, and handed on as
// its path and its bytes; what its keys are worth is the gateway's to
// check (TestJWKSFileIsRelativeToTheConfig in gateway).
func TestJWKSFileIsReadRelativeToTheConfig(t *testing.T) {
	dir := t.TempDir()
	jwks := []byte(`{"keys":[]}`)
	if err := os.WriteFile(filepath.Join(dir, "keys.json"), jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gw.yaml")
	os.WriteFile(path, []byte(good+"jwt:\n  issuer: i\n  audience: a\n  jwksFile: keys.json\n"), 0o600)
	cfg, err := LoadWith(path, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if j := cfg.Credentials.JWT; j == nil || j.JWKSFile != filepath.Join(dir, "keys.json") || string(j.JWKS) != string(jwks) {
		t.Fatalf("JWT settings %+v, want the file at %s and its bytes", j, filepath.Join(dir, "keys.json"))
	}
}

// Validation says, each at its key, a key source of the jwt section it
// cannot read: a secret's variable not set, a JWKS file it cannot open.
// The public keys are not its to judge; the gateway's check reports them
// beside these (TestJWTProblemsEachAtTheirKey in gateway).
func TestUnreadableJWTKeySourcesAreSaid(t *testing.T) {
	dir := t.TempDir()
	src := good + `jwt:
  issuer: i
  audience: a
  hmacSecretEnv: GW_SECRET
  publicKeys:
    - "not a key"
  jwksFile: absent.json
`
	path := filepath.Join(dir, "gw.yaml")
	os.WriteFile(path, []byte(src), 0o600)
	_, err := LoadWith(path, noEnv)
	want := path + ":17: jwt.hmacSecretEnv: environment variable GW_SECRET is not set; it must hold the HS256 secret\n" +
		path + ":20: jwt.jwksFile: open " + filepath.Join(dir, "absent.json") + ": no such file or directory"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

// A check given to Parse reports at key paths; its problems are listed
// with validation's, in document order, and one under a key that did not
// decode is dropped like validation's own.
func TestChecksReportWithValidation(t *testing.T) {
	src := strings.Replace(good, "listen: 127.0.0.1:8080\n", "listen: 127.0.0.1:8080\npins: {size: many}\n", 1) + "jwt: {issuer: i, audience: a}\n"
	check := func(c *Config, report func(path, msg string)) {
		if c.Credentials.JWT == nil || c.Credentials.JWT.Issuer != "i" {
			t.Errorf("the check was given credentials %+v", c.Credentials)
		}
		report("jwt.issuer", "checked")
		report("routes[0].kind", "checked too")
		report("pins.size", "follows from a key that did not decode")
	}
	_, err := Parse("c.yaml", []byte(src), noEnv, check)
	want := "c.yaml:2: pins.size: must be a whole number, not the string \"many\"\n" +
		"c.yaml:14: routes[0].kind: checked too\n" +
		"c.yaml:15: jwt.issuer: checked"
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("listen: [\n"))
	f.Add([]byte("routes:\n  - path: /\n    kind: proxy\n    upstream: http://x\n"))
	f.Add([]byte("a: &a [x, *a]\nlisten: *a\nbackends: [{<<: *a}, {<<: {name: n}}]\n"))
	f.Add([]byte("tenants:\n  - name: t\n    name: u\n    policy: {budget: {window: 30, runClock: 1e400}}\n"))
	f.Add([]byte("routes: [{allowedOrigins: [\"https://x:443/\", null, 1]}]\n---\nlisten: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Parse("f.yaml", data, noEnv)
	})
}

// The example must hold on any machine: the local backend's defaults
// depend on the CPUs.
func TestExampleConfigIsValidOnAnyMachine(t *testing.T) {
	src, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, cpus := range []int{1, 2, 4, 96} {
		if _, err := parse("config.example.yaml", src, noEnv, cpus); err != nil {
			t.Errorf("on %d CPUs:\n%v", cpus, err)
		}
	}
}

// The keys the example shows commented out are valid when uncommented.
func TestExampleCommentedKeysAreValid(t *testing.T) {
	src, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(\s*)# ((?:minWorkers|maxWorkers|cpuSlots|budget|  window|  executions|  runClock):)`)
	on := re.ReplaceAll(src, []byte("$1$2"))
	if n := len(re.FindAll(src, -1)); n != 7 {
		t.Fatalf("uncommented %d keys, want 7", n)
	}
	cfg, err := parse("config.example.yaml", on, noEnv, 2)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Tenants[0].Policy.Budget; b.Executions != 10000 || b.RunClock.Std() != 10*time.Minute || b.Window.Std() != time.Hour {
		t.Fatalf("budget %+v", b)
	}
}

func TestBudgetWeightAndSlotsParse(t *testing.T) {
	const key = "a-key-for-this-test-0123456789"
	hash, _ := auth.HashAPIKey(key)
	src := strings.Replace(strings.Replace(good, "sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb", hash, 1), "    backend: local\n", `    backend: local
    policy:
      cpuSlots: 1
      budget: {window: 1h, executions: 10000, runClock: 10m}
`, 1)
	cfg, err := Parse("c.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Tenants[0].Policy
	want := Budget{Window: Duration(time.Hour), Executions: 10000, RunClock: Duration(10 * time.Minute)}
	if p.Budget != want || !p.Budget.IsSet() || p.CPUSlots != 1 || p.Weight != 1 {
		t.Fatalf("policy %+v", p)
	}
	if (Budget{Window: Duration(time.Hour)}).IsSet() {
		t.Fatal("a window alone bounds nothing")
	}
}

// Each bad policy or local key, its whole text at its line.
func TestPolicyAndLocalKeyProblems(t *testing.T) {
	const remote = "  - name: far\n    type: remote\n    remote:\n      members:\n        - url: ws://127.0.0.1:9/\n"
	cases := []struct {
		name, policy string
		backend      string // added to the backends
		tenantOn     string
		want         string
	}{
		{"budget without a window", "budget: {executions: 10}", "", "local",
			`c.yaml:8: tenants[0].policy.budget.window: is required with a budget: the period it refills over, e.g. 1h`},
		{"budget window too long", "budget: {window: 745h, runClock: 1h}", "", "local",
			`c.yaml:8: tenants[0].policy.budget.window: 745h0m0s is longer than 31 days (744h0m0s); use a shorter window`},
		{"negative budget window", "budget: {window: -1s}", "", "local",
			`c.yaml:8: tenants[0].policy.budget.window: must not be negative`},
		{"negative executions", "budget: {window: 1h, executions: -1}", "", "local",
			`c.yaml:8: tenants[0].policy.budget.executions: must not be negative (0 sets no bound)`},
		{"negative run clock", "budget: {window: 1h, runClock: -1s}", "", "local",
			`c.yaml:8: tenants[0].policy.budget.runClock: must not be negative (0 sets no bound)`},
		{"memoryMB too small on a remote backend", "memoryMB: 8", remote, "far",
			`c.yaml:13: tenants[0].policy.memoryMB: 8 MB is too small for a JavaScript runtime; use at least 16`},
		{"negative cpuSlots", "cpuSlots: -1", "", "local",
			`c.yaml:8: tenants[0].policy.cpuSlots: must not be negative (0 takes the group's default)`},
		{"negative weight", "weight: -1", "", "local",
			`c.yaml:8: tenants[0].policy.weight: -1 is not a weight: use a number above 0 and at most 1000 (1 is the default)`},
		{"weight too large", "weight: 1000.5", "", "local",
			`c.yaml:8: tenants[0].policy.weight: 1000.5 is not a weight: use a number above 0 and at most 1000 (1 is the default)`},
		{"weight not a number", "weight: .nan", "", "local",
			`c.yaml:8: tenants[0].policy.weight: NaN is not a weight: use a number above 0 and at most 1000 (1 is the default)`},
		{"rate not a number", "rate: .nan", "", "local",
			`c.yaml:8: tenants[0].policy.rate: must be a number of executions per second`},
		{"rate infinite", "rate: .inf", "", "local",
			`c.yaml:8: tenants[0].policy.rate: must be a number of executions per second`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const key = "a-key-for-this-test-0123456789"
			hash, _ := auth.HashAPIKey(key)
			src := strings.Replace(strings.Replace(good, "sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb", hash, 1), "    backend: local\n", "    backend: "+c.tenantOn+"\n    policy: {"+c.policy+"}\n", 1)
			src = strings.Replace(src, "tenants:\n", c.backend+"tenants:\n", 1)
			got := problems(t, src, 2)
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), c.want)
			}
		})
	}
	for _, key := range []string{"minWorkers", "maxWorkers", "poolSize", "runsPerWorker", "workerMemoryMB", "queue", "queueTimeout", "workerIdleTimeout"} {
		value := "-1"
		if strings.HasSuffix(key, "Timeout") {
			value = "-1s"
		}
		src := strings.Replace(good, "    type: local\n", "    type: local\n    local:\n      "+key+": "+value+"\n", 1)
		want := "c.yaml:6: backends[0].local." + key + ": must not be negative"
		if got := problems(t, src, 2); len(got) != 1 || got[0] != want {
			t.Errorf("%s: got:\n%s\nwant:\n%s", key, strings.Join(got, "\n"), want)
		}
	}
	// isolateTenants is still accepted.
	src := strings.Replace(good, "    type: local\n", "    type: local\n    local: {isolateTenants: true, poolSize: 2}\n", 1)
	if got := problems(t, src, 2); got != nil {
		t.Errorf("the deprecated keys: %s", strings.Join(got, "\n"))
	}
}

// A tenant on a remote group takes every policy key a local group honours:
// the members apply them (memoryMB, weight, cpuSlots) or report the run
// clock its budget is charged from.
func TestRemoteTenantTakesLocalPolicyKeys(t *testing.T) {
	src := strings.Replace(good, "tenants:\n", "  - name: far\n    type: remote\n    remote:\n      members:\n        - url: ws://127.0.0.1:9/\ntenants:\n", 1)
	src = strings.Replace(src, "    backend: local\n", "    backend: far\n    policy: {memoryMB: 64, weight: 3, cpuSlots: 2, budget: {window: 1h, runClock: 1m}}\n", 1)
	cfg, err := Parse("c.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Tenants[0].Policy
	if p.MemoryMB != 64 || p.Weight != 3 || p.CPUSlots != 2 || p.Budget.RunClock != Duration(time.Minute) {
		t.Fatalf("policy %+v", p)
	}
}

// A remote group takes a local group's nativeOutbound and native keys,
// parsed and checked by the same code: its ranges are kept, and a bad one
// is reported at its key under remote.
func TestRemoteGroupTakesTheNativeKeys(t *testing.T) {
	const far = "  - name: far\n    type: remote\n    remote:\n      members:\n        - url: ws://127.0.0.1:9/\n"
	native := "      nativeOutbound: true\n      native: {deny: [192.0.2.0/24], allow: [127.0.0.0/8], maxResponseBytes: 1024, maxRedirects: -1, requestTimeout: 2s}\n"
	cfg, err := Parse("c.yaml", []byte(strings.Replace(good, "tenants:\n", far+native+"tenants:\n", 1)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Backends[1].Remote
	if !r.NativeOutbound || fmt.Sprint(r.Native.DenyRanges, r.Native.AllowRanges) != "[192.0.2.0/24] [127.0.0.0/8]" ||
		r.Native.MaxResponseBytes != 1024 || r.Native.MaxRedirects != -1 || r.Native.RequestTimeout.Std() != 2*time.Second {
		t.Fatalf("remote native settings %+v %+v", r.NativeOutbound, r.Native)
	}
	for _, c := range []struct{ native, want string }{
		{"      native: {allow: [10.0.0.0/33]}\n", `c.yaml:10: backends[1].remote.native.allow[0]: "10.0.0.0/33" is not a CIDR range such as 10.20.0.0/16 or fd00::/8`},
		{"      native: {requestTimeout: -1s}\n", `c.yaml:10: backends[1].remote.native: maxResponseBytes and requestTimeout must not be negative`},
	} {
		got := problems(t, strings.Replace(good, "tenants:\n", far+c.native+"tenants:\n", 1), 2)
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), c.want)
		}
	}
}

// readiness is required or optional, optional when left out.
func TestBackendReadiness(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(good), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Backends[0].Readiness; r != ReadinessOptional {
		t.Fatalf("default readiness %q, want optional", r)
	}
	src := strings.Replace(good, "    type: local\n", "    type: local\n    readiness: required\n", 1)
	if cfg, err := Parse("c.yaml", []byte(src), noEnv); err != nil || cfg.Backends[0].Readiness != ReadinessRequired {
		t.Fatalf("readiness: required gave %v", err)
	}
	src = strings.Replace(good, "    type: local\n", "    type: local\n    readiness: mandatory\n", 1)
	want := `c.yaml:5: backends[0].readiness: "mandatory" is not a readiness; use required (the group gates /readyz) or optional (the default: it does not)`
	if got := problems(t, src, 2); len(got) != 1 || got[0] != want {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}

// A remote group lists each executor server once: the URL names the member.
func TestRemoteMembersListedOnce(t *testing.T) {
	src := strings.Replace(good, "tenants:\n", "  - name: far\n    type: remote\n    remote:\n      members:\n        - url: ws://127.0.0.1:9/\n        - url: ws://127.0.0.1:9/\ntenants:\n", 1)
	want := `c.yaml:10: backends[1].remote.members[1].url: "ws://127.0.0.1:9/" is already members[0]; list each executor server once`
	if got := problems(t, src, 2); len(got) != 1 || got[0] != want {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
}

// TestConnectionsDefaults: a file that sets no connections keys gets the
// defaults, and the descriptor reserve grows with the local worker
// processes.
func TestConnectionsDefaults(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(good), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Connections; c.IdleTimeout.Std() != 60*time.Second || c.MaxUnauthenticated != 256 || c.DescriptorReserve != 0 {
		t.Fatalf("defaults %+v", c)
	}
	if got, want := cfg.DescriptorReserve(2), 128+8*8; got != want {
		t.Fatalf("DescriptorReserve(2) = %d, want %d (eight worker processes)", got, want)
	}
	cfg.Connections.DescriptorReserve = 40
	if got := cfg.DescriptorReserve(2); got != 40 {
		t.Fatalf("a set reserve reads %d", got)
	}
}

// Validation hands the gateway what it parsed, so that nothing is parsed
// twice: the tenants' and the local backend's ranges, the routes' origin
// patterns, and the digests of the keys.
func TestValidationKeepsWhatItParsed(t *testing.T) {
	const key = "a-key-for-this-test-0123456789"
	hash, _ := auth.HashAPIKey(key)
	src := strings.Replace(strings.Replace(good, "sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb", hash, 1), "    backend: local\n", "    backend: local\n    policy: {nativeDeny: [10.20.0.0/16, \"fd00::/8\"]}\n", 1) +
		"    allowedOrigins: [\"https://*.example.com\", \"[::1]:8000\"]\n"
	src = strings.Replace(src, "    type: local\n", "    type: local\n    local: {native: {deny: [192.0.2.0/24], allow: [\"10.1.2.0/24\", \"fd00:1::/64\"]}}\n", 1)
	cfg, err := Parse("c.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(cfg.Tenants[0].Policy.NativeDenyRanges), "[10.20.0.0/16 fd00::/8]"; got != want {
		t.Errorf("nativeDeny parsed as %s, want %s", got, want)
	}
	if n := cfg.Backends[0].Local.Native; fmt.Sprint(n.DenyRanges, n.AllowRanges) != "[192.0.2.0/24] [10.1.2.0/24 fd00:1::/64]" {
		t.Errorf("local.native ranges parsed as %v and %v", n.DenyRanges, n.AllowRanges)
	}
	if got, want := fmt.Sprint(cfg.Routes[0].Origins), `[{https *.example.com} { \[::1\]:8000}]`; got != want {
		t.Errorf("allowedOrigins parsed as %s, want %s", got, want)
	}
	want := []TenantKey{{Name: "k", Tenant: "demo", Hash: sha256.Sum256([]byte(key))}}
	if got := cfg.Credentials.Keys; !slices.Equal(got, want) {
		t.Errorf("the keys validation read are %+v, want %+v (the key's SHA-256)", got, want)
	}
}

// Two hashes that differ only in the case of their hex digits are the same
// key, refused at its line rather than when the gateway starts.
func TestAKeyHashInOtherCaseIsTheSameKey(t *testing.T) {
	upper := strings.Replace(good, "routes:", "  - name: again\n    backend: local\n    keys: [{name: k2, hash: \"sha256:46E64BB8073F1820BFD1418553E3694E3967B060F73B1A6AA8FBACE39A7D54FB\"}]\nroutes:", 1)
	_, err := Parse("c.yaml", []byte(upper), noEnv)
	if want := "c.yaml:13: tenants[1].keys[0].hash: the same key is already configured as demo/k; every key must be distinct"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// A key that did not decode is reported once: the problems that only
// follow from it (a burst without a rate, a tenant's value above a limit
// that fell back to its default, a reference to a name) are not reported
// beside it.
func TestNoFollowOnProblemsOfAKeyThatDidNotDecode(t *testing.T) {
	src := strings.Replace(good, "    backend: local\n", "    backend: local\n    policy: {rate: \"five\", burst: 3, timeoutMs: 400000, maxConcurrent: 100}\n", 1)
	src = strings.Replace(src, "backends:\n", "limits: {timeoutMs: lots, maxConcurrent: many}\nbackends:\n", 1)
	want := []string{
		`c.yaml:2: limits.timeoutMs: must be a whole number, not the string "lots"`,
		`c.yaml:2: limits.maxConcurrent: must be a whole number, not the string "many"`,
		`c.yaml:9: tenants[0].policy.rate: must be a number, not the string "five"`,
	}
	if got := problems(t, src, 2); !slices.Equal(got, want) {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// With the limits valid, the same policy's own problems remain.
	src = strings.Replace(src, "limits: {timeoutMs: lots, maxConcurrent: many}\n", "", 1)
	src = strings.Replace(src, `rate: "five", `, "", 1)
	want = []string{
		`c.yaml:8: tenants[0].policy.timeoutMs: 400000 is outside the operator limit: use 1 to 300000 (limits.timeoutMs)`,
		`c.yaml:8: tenants[0].policy.maxConcurrent: 100 is outside the operator limit: use 1 to 64 (limits.maxConcurrent)`,
		`c.yaml:8: tenants[0].policy.burst: burst needs a rate: set rate (executions per second) too`,
	}
	if got := problems(t, src, 2); !slices.Equal(got, want) {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A name that did not decode: what refers to it is not reported as
	// naming nothing.
	src = strings.Replace(good, "  - name: local\n", "  - name: [local]\n", 1)
	src = strings.Replace(src, "  - name: demo\n", "  - name: [demo]\n", 1)
	src = strings.Replace(src, "    kind: executor\n", "    kind: executor\n    tenants: [demo]\n", 1)
	want = []string{
		`c.yaml:3: backends[0].name: must be a string, not a list`,
		`c.yaml:6: tenants[0].name: must be a string, not a list`,
	}
	if got := problems(t, src, 2); !slices.Equal(got, want) {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The jwt section comes back as the settings a verifier is built from: the
// secret read from its variable.
func TestTheJWTSectionIsReturnedAsSettings(t *testing.T) {
	src := good + "jwt:\n  issuer: i\n  audience: a\n  tenantClaim: app\n  leeway: 5s\n  hmacSecretEnv: GW_SECRET\n"
	secret := "0123456789abcdef0123456789abcdef"
	cfg, err := Parse("c.yaml", []byte(src), func(k string) string {
		if k == "GW_SECRET" {
			return secret
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	j := cfg.Credentials.JWT
	if j == nil {
		t.Fatal("no JWT settings returned")
	}
	if j.Issuer != "i" || j.Audience != "a" || j.TenantClaim != "app" || j.Leeway != 5*time.Second || string(j.HMACSecret) != secret {
		t.Errorf("JWT settings %+v", *j)
	}
	if len(cfg.Credentials.Keys) != 1 || cfg.Credentials.Keys[0].Name != "k" || cfg.Credentials.Keys[0].Tenant != "demo" {
		t.Errorf("keys %+v", cfg.Credentials.Keys)
	}
}
