package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every decoding problem of a file is reported at once, each at its line
// with the key path as the file writes it, in the file's words, with a
// suggestion where a known key is close.
func TestEveryDecodingProblemAtOnce(t *testing.T) {
	src := `listen: 127.0.0.1:8080
drainTimeout: 5 seconds
lsiten: x
admin: {listen: 127.0.0.1:9090, tls: yes}
backends:
  - name: local
    type: local
    local:
      maxWorkers: four
      queueTimeout: 30
      memoryMB: 99999999999999999999
      MaxWorkers: 2
  - name: far
    type: remote
    remote:
      members:
        - url: {host: x}
        - url: ws://127.0.0.1:9/
          keyenv: X
tenants:
  - name: demo
    backend: local
    backend: far
    frobnicate: 1
    keys: [{name: k, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]
    policy: {rate: fast, nativeOutbound: "yes", maxHandles: 1.5}
routes:
  - path: /v1/executor
    kind: executor
    allowedOrigins: http://x
pins: []
`
	want := `c.yaml:2: drainTimeout: "5 seconds" is not a duration such as 5s, 250ms or 1h30m
c.yaml:3: lsiten: unknown key; did you mean "listen"?
c.yaml:4: admin.tls: must be a map of keys (certFile, keyFile), not the string "yes"
c.yaml:9: backends[0].local.maxWorkers: must be a whole number, not the string "four"
c.yaml:10: backends[0].local.queueTimeout: 30 has no unit: write a duration such as 30s or 30ms
c.yaml:11: backends[0].local.memoryMB: 99999999999999999999 is out of range
c.yaml:12: backends[0].local.MaxWorkers: unknown key; did you mean "maxWorkers"?
c.yaml:17: backends[1].remote.members[0].url: must be a string, not a map
c.yaml:19: backends[1].remote.members[1].keyenv: unknown key; did you mean "keyEnv"?
c.yaml:23: tenants[0].backend: is set twice in this map; keep one
c.yaml:24: tenants[0].frobnicate: unknown key; the keys here are: name, backend, keys, policy
c.yaml:26: tenants[0].policy.rate: must be a number, not the string "fast"
c.yaml:26: tenants[0].policy.nativeOutbound: must be true or false, not the string "yes"
c.yaml:26: tenants[0].policy.maxHandles: must be a whole number, not the number 1.5
c.yaml:30: routes[0].allowedOrigins: must be a list of strings, not the string "http://x"
c.yaml:31: pins: must be a map of keys (size), not a list`
	if _, err := Parse("c.yaml", []byte(src), noEnv); err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

// Decoding and validation problems come together, in document order; a
// key that did not decode gets no second problem from validation.
func TestDecodingAndValidationProblemsTogether(t *testing.T) {
	src := strings.Replace(good, "listen: 127.0.0.1:8080\n", "listen: [1]\nlog: {level: loud}\nbackends: none\n", 1)
	src = strings.Replace(src, "backends:\n  - name: local\n    type: local\n", "", 1)
	want := `c.yaml:1: listen: must be a string, not a list
c.yaml:2: log.level: "loud" is not a log level; use debug, info, warn or error
c.yaml:3: backends: must be a list, not the string "none"
c.yaml:6: tenants[0].backend: no backend is named "local"; declare it under backends or use one of: (none declared)`
	if _, err := Parse("c.yaml", []byte(src), noEnv); err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

// A syntax error is placed at its line, with the lines around it once.
func TestSyntaxErrorShowsItsContextOnce(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"listen: 127.0.0.1:8080\nbackends:\n  - name: local\n\ttype: local\n", `c.yaml:4: found character '	' that cannot start any token
   1 | listen: 127.0.0.1:8080
   2 | backends:
   3 |   - name: local
>  4 | 	type: local
       ^`},
		{"listen: 127.0.0.1:8080\nadmin:\n  listen: x\n listen2: y\n", `c.yaml:4: value is not allowed in this context
   1 | listen: 127.0.0.1:8080
   2 | admin:
   3 |   listen: x
>  4 |  listen2: y
        ^`},
		// An IPv6 address in brackets, unquoted, gets a hint to quote it.
		{"listen: [::1]:8080\n", `c.yaml:1: value is not allowed in this context; YAML reads [ and ] outside quotes as a list, so quote a value that holds an IPv6 address: "[::1]:8080"
>  1 | listen: [::1]:8080
                    ^`},
		{"listen: 127.0.0.1:8080\nbackends:\n  - {name: r, type: remote, members: [{url: ws://[::1]:8787/}]}\n", `c.yaml:3: found an invalid key for this map; YAML reads [ and ] outside quotes as a list, so quote a value that holds an IPv6 address: "ws://[::1]:8787/"
   1 | listen: 127.0.0.1:8080
   2 | backends:
>  3 |   - {name: r, type: remote, members: [{url: ws://[::1]:8787/}]}
                                                         ^`},
		// Quoted, it is not what went wrong, and no hint is given.
		{"listen: 127.0.0.1:8080\nadmin: {listen: \"[::1]:9090\", x: [a}\n", `c.yaml:2: ',' or ']' must be specified
   1 | listen: 127.0.0.1:8080
>  2 | admin: {listen: "[::1]:9090", x: [a}
                                          ^`},
	} {
		if _, err := Parse("c.yaml", []byte(c.src), noEnv); err == nil || err.Error() != c.want {
			t.Errorf("got:\n%v\nwant:\n%s", err, c.want)
		}
	}
}

// Anchors, aliases and merge keys decode as YAML means them, and a
// problem inside an alias is placed at the alias.
func TestAnchorsAliasesAndMergeKeys(t *testing.T) {
	src := `listen: 127.0.0.1:8080
x-defaults: &policy {maxConcurrent: 4, timeoutMs: 1000}
backends:
  - &local {name: local, type: local}
  - <<: *local
    name: second
tenants:
  - name: demo
    backend: second
    keys: [{name: k, hash: sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb}]
    policy:
      <<: *policy
      timeoutMs: 500
routes:
  - {path: /v1/executor, kind: executor, allowedOrigins: &origins ["https://a.example"]}
  - {path: /v2/executor, kind: executor, allowedOrigins: *origins}
`
	_, err := Parse("c.yaml", []byte(src), noEnv)
	want := `c.yaml:2: x-defaults: unknown key; the keys here are: listen, tls, admin, log, connections, drainTimeout, limits, backends, jwt, tenants, routes, pins, executionIds, tracing`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
	// Anchors under a key the gateway knows decode.
	src = strings.Replace(src, "x-defaults: &policy {maxConcurrent: 4, timeoutMs: 1000}\n", "limits: &policy {maxConcurrent: 4, timeoutMs: 1000}\n", 1)
	cfg, err := Parse("c.yaml", []byte(src), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Tenants[0].Policy
	if cfg.Backends[1].Name != "second" || cfg.Backends[1].Type != "local" || p.MaxConcurrent != 4 || p.TimeoutMs != 500 ||
		fmt.Sprint(cfg.Routes[1].AllowedOrigins) != "[https://a.example]" {
		t.Fatalf("decoded %+v %+v %+v", cfg.Backends, p, cfg.Routes)
	}
	bad := strings.Replace(src, "allowedOrigins: *origins}", "allowedOrigins: [*policy]}", 1)
	want = `c.yaml:16: routes[1].allowedOrigins[0]: must be a string, not a map`
	if _, err := Parse("c.yaml", []byte(bad), noEnv); err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
	bad = strings.Replace(src, "allowedOrigins: *origins}", "allowedOrigins: *nowhere}", 1)
	want = `c.yaml:16: routes[1].allowedOrigins: alias *nowhere names no anchor`
	if _, err := Parse("c.yaml", []byte(bad), noEnv); err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

// Aliases cannot make the decoder's work explode: past a bound of values
// it stops with one problem.
func TestAliasesCannotExplode(t *testing.T) {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:8080\nroutes:\n  - path: /\n    kind: executor\n    allowedOrigins: &o [")
	for i := range 1000 {
		fmt.Fprintf(&b, "\"h%d\", ", i)
	}
	b.WriteString("\"x\"]\n")
	for range 300 {
		b.WriteString("  - {allowedOrigins: *o}\n")
	}
	start := time.Now()
	_, err := Parse("c.yaml", []byte(b.String()), noEnv)
	want := "c.yaml:5: routes[249].allowedOrigins[245]: the file expands to more than 250000 values (through aliases); write the values out"
	if err == nil || err.Error() != want {
		t.Fatalf("got %.300v", err)
	}
	t.Logf("refused in %v", time.Since(start))
}

// reload reads the admin section alone: problems elsewhere are the
// gateway's to report, not the command's.
func TestReadAdminIgnoresTheRest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	os.WriteFile(path, []byte("admin: {listen: 127.0.0.1:9191}\nbogus: 1\ntenants: 3\n"), 0o600)
	a, err := ReadAdmin(path)
	if err != nil || a.Listen != "127.0.0.1:9191" {
		t.Fatalf("got %+v, %v", a, err)
	}
	os.WriteFile(path, []byte("admin: {lsten: 127.0.0.1:9191}\n"), 0o600)
	if _, err := ReadAdmin(path); err == nil || err.Error() != path+`:1: admin.lsten: unknown key; did you mean "listen"?` {
		t.Fatalf("got %v", err)
	}
}

// A file with more problems than anyone reads lists the first hundred.
func TestProblemsAreListedUpToAHundred(t *testing.T) {
	var b strings.Builder
	for i := range 150 {
		fmt.Fprintf(&b, "unknown%d: 1\n", i)
	}
	_, err := Parse("c.yaml", []byte(b.String()), noEnv)
	lines := strings.Split(fmt.Sprint(err), "\n")
	if len(lines) != 101 || lines[99] != "c.yaml:100: unknown99: unknown key; the keys here are: listen, tls, admin, log, connections, drainTimeout, limits, backends, jwt, tenants, routes, pins, executionIds, tracing" ||
		lines[100] != "c.yaml: and 54 more problems" {
		t.Fatalf("got %d lines, ending:\n%s", len(lines), strings.Join(lines[max(0, len(lines)-2):], "\n"))
	}
}
