package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// withRemote is good with a remote group far whose remote section is
// section (indented under remote:).
func withRemote(section string) string {
	return strings.Replace(good, "tenants:\n", "  - name: far\n    type: remote\n    remote:\n"+section+"tenants:\n", 1)
}

// A remote group found in DNS takes the defaults of the keys it leaves
// out, and names each address's member by the URL it is dialled at.
func TestDiscoverDefaultsAndMembers(t *testing.T) {
	cfg, err := Parse("c.yaml", []byte(withRemote("      discover: {dns: executors.ns.svc.cluster.local, port: 8787}\n")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Backends[1].Remote.Discover
	want := Discover{DNS: "executors.ns.svc.cluster.local", Port: 8787, Scheme: "ws", Path: "/", Interval: DefaultDiscoverInterval, EmptyGrace: DefaultDiscoverGrace}
	if *d != want {
		t.Fatalf("discover is %+v, want %+v", *d, want)
	}
	var got []string
	for _, a := range []string{"10.0.0.7", "fd00::7", "::ffff:10.0.0.8"} {
		got = append(got, d.Member(netip.MustParseAddr(a)).URL)
	}
	if w := []string{"ws://10.0.0.7:8787/", "ws://[fd00::7]:8787/", "ws://10.0.0.8:8787/"}; !slices.Equal(got, w) {
		t.Fatalf("members %v, want %v", got, w)
	}

	env := func(k string) string { return map[string]string{"EXEC_KEY": "s3cret"}[k] }
	cfg, err = Parse("c.yaml", []byte(withRemote("      discover: {dns: executors, port: 443, scheme: wss, path: /v1/executor, keyEnv: EXEC_KEY, interval: 30s, emptyGrace: 5m}\n")), env)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Backends[1].Remote.Discover.Member(netip.MustParseAddr("10.1.2.3"))
	if w := (RemoteMember{URL: "wss://10.1.2.3:443/v1/executor", KeyEnv: "EXEC_KEY", Key: "s3cret", ServerName: "executors"}); m != w {
		t.Fatalf("member %+v, want %+v", m, w)
	}
}

// Each mistake in a discover section is named at its key, whole.
func TestDiscoverValidation(t *testing.T) {
	for _, c := range []struct {
		name, section string
		want          []string
	}{
		{"neither members nor discover", "      healthInterval: 5s\n", []string{
			`c.yaml:7: backends[1].remote.members: a remote backend needs at least one member {url: ws://host:port/}, or discover: {dns: name, port: n} to find them in DNS`}},
		{"both", "      members: [{url: \"ws://127.0.0.1:9/\"}]\n      discover: {dns: executors, port: 8787}\n", []string{
			`c.yaml:9: backends[1].remote.discover: members and discover are two ways to name the executor servers; keep one`}},
		{"no name, no port", "      discover: {scheme: ws}\n", []string{
			`c.yaml:8: backends[1].remote.discover.dns: is required: the DNS name whose addresses are the executor servers (a Kubernetes headless Service's name)`,
			`c.yaml:8: backends[1].remote.discover.port: is required: the executor servers' port, 1 to 65535`}},
		{"an address", "      discover: {dns: 10.0.0.1, port: 8787}\n", []string{
			`c.yaml:8: backends[1].remote.discover.dns: "10.0.0.1" is an address, not a name; list it under members instead`}},
		{"not a name", "      discover: {dns: \"exec utors\", port: 8787}\n", []string{
			`c.yaml:8: backends[1].remote.discover.dns: "exec utors" is not a DNS name such as executors.namespace.svc.cluster.local`}},
		{"a URL for a name", "      discover: {dns: \"ws://executors/\", port: 8787}\n", []string{
			`c.yaml:8: backends[1].remote.discover.dns: "ws://executors/" is not a DNS name such as executors.namespace.svc.cluster.local`}},
		{"port out of range", "      discover: {dns: executors, port: 70000}\n", []string{
			`c.yaml:8: backends[1].remote.discover.port: is required: the executor servers' port, 1 to 65535`}},
		{"scheme", "      discover: {dns: executors, port: 8787, scheme: https}\n", []string{
			`c.yaml:8: backends[1].remote.discover.scheme: "https" is not a scheme; use ws or wss`}},
		{"path", "      discover: {dns: executors, port: 8787, path: \"v1?x=1\"}\n", []string{
			`c.yaml:8: backends[1].remote.discover.path: "v1?x=1" is not a path such as / or /v1/executor`}},
		{"key env", "      discover: {dns: executors, port: 8787, keyEnv: NOT_SET_ANYWHERE}\n", []string{
			`c.yaml:8: backends[1].remote.discover.keyEnv: environment variable NOT_SET_ANYWHERE is not set; it must hold the bearer key for these executor servers`}},
		{"interval", "      discover: {dns: executors, port: 8787, interval: 100ms}\n", []string{
			`c.yaml:8: backends[1].remote.discover.interval: 100ms is too short; resolve the name at most once a second`}},
		{"grace", "      discover: {dns: executors, port: 8787, emptyGrace: -1s}\n", []string{
			`c.yaml:8: backends[1].remote.discover.emptyGrace: must not be negative`}},
		{"unknown key", "      discover: {dns: executors, port: 8787, every: 10s}\n", []string{
			`c.yaml:8: backends[1].remote.discover.every: unknown key; the keys here are: dns, port, scheme, path, keyEnv, interval, emptyGrace`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := problems(t, withRemote(c.section), 2); !slices.Equal(got, c.want) {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}
