package config

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/supolka/codemode-gateway/internal/bearer"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
)

type validator struct {
	file string
	// lines are the lines of the file's key paths, from the decoder.
	lines  map[string]int
	getenv Getenv
	// numCPU is the machine's, for the local backend's defaults.
	numCPU int
	// inherited marks the tenant policy keys the file left out, which
	// took the operator's limit, by tenant index and key.
	inherited map[int]map[string]bool
	problems  Problems
}

func (v *validator) add(path, format string, args ...any) {
	v.problems = append(v.problems, &Problem{File: v.file, Line: lineOf(v.lines, path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

// addAfter is add for a problem that follows from the keys after: it is
// dropped when one of them did not decode, which was reported already.
func (v *validator) addAfter(after []string, path, format string, args ...any) {
	v.add(path, format, args...)
	v.problems[len(v.problems)-1].after = after
}

// nameKeys are the name keys of a list's n entries: a reference to a
// name follows from them, and says nothing new when one did not decode.
func nameKeys(list string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s[%d].name", list, i)
	}
	return out
}

// notNegative reports the key at path when its value is below zero.
func (v *validator) notNegative(path string, n int64) {
	if n < 0 {
		v.add(path, "must not be negative")
	}
}

// secretLength reports the variable env named at path when the secret it
// holds (n bytes) is shorter than min, saying apart one that is not set at
// all, as every other …Env key does: an operator who exported it in
// another shell needs to hear that, not that it is too short.
func (v *validator) secretLength(path, env string, n int, must string, min int) {
	if msg := secretProblem(env, n, must, min); msg != "" {
		v.add(path, "%s", msg)
	}
}

// secretProblem is what is wrong with a secret of n bytes read from the
// environment variable env that must be min bytes long, or "".
func secretProblem(env string, n int, must string, min int) string {
	switch {
	case n == 0:
		return fmt.Sprintf("environment variable %s is not set; it %s", env, must)
	case n < min:
		return fmt.Sprintf("environment variable %s %s", env, must)
	}
	return ""
}

// AdminTokenProblem is what is wrong with an admin listener's token read
// from the environment variable env (admin.tokenEnv, or an executor
// server's --admin-token-env), or "".
func AdminTokenProblem(env, token string) string {
	return secretProblem(env, len(token), adminTokenRule, minAdminToken)
}

// An admin token's rule.
const (
	minAdminToken  = 16
	adminTokenRule = "must hold a token of at least 16 bytes; make one with `gateway hash-key --new`"
)

// namePattern is what tenant and backend names may be: they appear in logs,
// metrics labels and executionIds.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// workerUserPattern is a user name or uid:gid.
var workerUserPattern = regexp.MustCompile(`^([a-z_][a-z0-9_.-]{0,31}|[0-9]{1,10}:[0-9]{1,10})$`)

// tokenPattern is an HTTP token, what a WebSocket subprotocol must be.
var tokenPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// cidrs parses a list of CIDR ranges at path, each one that does not parse
// a problem of its own.
func (v *validator) cidrs(path string, cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for j, c := range cidrs {
		r, err := netip.ParsePrefix(c)
		if addr, aerr := netip.ParseAddr(c); aerr == nil {
			// One address: the range of it alone is what was meant.
			v.add(fmt.Sprintf("%s[%d]", path, j), "%q is one address, not a CIDR range; write %s", c, netip.PrefixFrom(addr.WithZone(""), addr.BitLen()))
			continue
		}
		if err != nil {
			v.add(fmt.Sprintf("%s[%d]", path, j), "%q is not a CIDR range such as 10.20.0.0/16 or fd00::/8", c)
			continue
		}
		out = append(out, r)
	}
	return out
}

func (v *validator) validate(c *Config) {
	if c.Listen == "" {
		v.add("listen", "is required: the address to listen on, e.g. 127.0.0.1:8080")
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		v.add("listen", "%q is not host:port (%v)", c.Listen, err)
	}
	if c.Admin.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Admin.Listen); err != nil {
			v.add("admin.listen", "%q is not host:port (%v)", c.Admin.Listen, err)
		} else if c.Admin.Listen == c.Listen {
			v.add("admin.listen", "must differ from listen: the admin endpoints stay off the tenants' listener")
		}
	}
	if env := c.Admin.TokenEnv; env != "" {
		c.Admin.Token = v.getenv(env)
		v.secretLength("admin.tokenEnv", env, len(c.Admin.Token), adminTokenRule, minAdminToken)
	}
	v.tls("tls", c, c.TLS)
	v.tls("admin.tls", c, c.Admin.TLS)
	switch c.Log.Format {
	case "text", "json":
	default:
		v.add("log.format", "%q is not a log format; use text or json", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.add("log.level", "%q is not a log level; use debug, info, warn or error", c.Log.Level)
	}
	v.notNegative("connections.idleTimeout", int64(c.Connections.IdleTimeout))
	v.notNegative("connections.maxUnauthenticated", int64(c.Connections.MaxUnauthenticated))
	v.notNegative("connections.descriptorReserve", int64(c.Connections.DescriptorReserve))
	v.notNegative("drainTimeout", int64(c.DrainTimeout))
	v.limits(c.Limits)
	v.tracing(&c.Tracing)
	v.notNegative("pins.size", int64(c.Pins.Size))
	if env := c.ExecutionIDs.KeyEnv; env != "" {
		c.ExecutionIDs.Key = []byte(v.getenv(env))
		v.secretLength("executionIds.keyEnv", env, len(c.ExecutionIDs.Key), "must hold a key of at least 32 bytes, the same on every replica", 32)
	}

	backends := map[string]*Backend{}
	if len(c.Backends) == 0 {
		v.add("backends", "declare at least one backend group, e.g. {name: local, type: local}")
	}
	for i := range c.Backends {
		b := &c.Backends[i]
		path := fmt.Sprintf("backends[%d]", i)
		_, dup := backends[b.Name]
		v.uniqueName(path+".name", b.Name, "backend", dup)
		backends[b.Name] = b
		v.backend(path, b)
	}

	if c.JWT != nil {
		c.Credentials.JWT = v.jwt(c, c.JWT)
	}

	tenants := map[string]bool{}
	hashes := map[bearer.KeyHash]string{}
	var keys []TenantKey
	if len(c.Tenants) == 0 {
		v.add("tenants", "declare at least one tenant")
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		path := fmt.Sprintf("tenants[%d]", i)
		v.uniqueName(path+".name", t.Name, "tenant", tenants[t.Name])
		tenants[t.Name] = true
		if t.Backend == "" {
			v.add(path+".backend", "is required: the name of the backend group this tenant's executions run on")
		} else if _, ok := backends[t.Backend]; !ok {
			v.addAfter(nameKeys("backends", len(c.Backends)), path+".backend", "no backend is named %q; declare it under backends or use one of: %s", t.Backend, names(c.Backends))
		}
		if len(t.Keys) == 0 && c.JWT == nil {
			v.add(path+".keys", "tenant %q has no API keys and no jwt section is configured, so nobody can authenticate as it", t.Name)
		}
		keyNames := map[string]bool{}
		for j, k := range t.Keys {
			kp := fmt.Sprintf("%s.keys[%d]", path, j)
			if k.Name == "" {
				v.add(kp+".name", "is required: a name for this key, safe to appear in logs")
			} else if keyNames[k.Name] {
				v.add(kp+".name", "tenant %q already has a key named %q", t.Name, k.Name)
			}
			keyNames[k.Name] = true
			h, ok := bearer.ParseKeyHash(k.Hash)
			if !ok {
				v.add(kp+".hash", "must be %q followed by 64 hex digits; make one with `gateway hash-key`", bearer.HashPrefix)
			} else if other, dup := hashes[h]; dup {
				v.add(kp+".hash", "the same key is already configured as %s; every key must be distinct", other)
			} else {
				hashes[h] = fmt.Sprintf("%s/%s", t.Name, k.Name)
				keys = append(keys, TenantKey{Name: k.Name, Tenant: t.Name, Hash: h})
			}
		}
		v.policy(path+".policy", &t.Policy, c.Limits)
		// On a remote group memoryMB, weight and cpuSlots are sent to the
		// members, which hold them to their own flags and refuse what they
		// cannot honour at connect time.
		if m := t.Policy.MemoryMB; m != 0 && m < 16 {
			v.add(path+".policy.memoryMB", "%d MB is too small for a JavaScript runtime; use at least 16", m)
		}
	}
	v.capacity(c)
	c.Credentials.Keys = keys

	if len(c.Routes) == 0 {
		v.add("routes", "declare at least one route, e.g. {path: /v1/executor, kind: executor}")
	}
	type slot struct{ path, proto string }
	taken := map[slot]int{}
	for i := range c.Routes {
		r := &c.Routes[i]
		path := fmt.Sprintf("routes[%d]", i)
		v.route(path, r, c.Limits, tenants, nameKeys("tenants", len(c.Tenants)))
		protos := r.Subprotocols
		if len(protos) == 0 {
			protos = []string{""} // the path's default
		}
		for _, p := range protos {
			if other, dup := taken[slot{r.Path, p}]; dup {
				if p == "" {
					v.add(path+".subprotocols", "routes[%d] is already the default of path %q; give one of them subprotocols", other, r.Path)
				} else {
					v.add(path+".subprotocols", "routes[%d] already answers subprotocol %q on path %q", other, p, r.Path)
				}
				continue
			}
			taken[slot{r.Path, p}] = i
		}
	}
}

func names(bs []Backend) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	if len(out) == 0 {
		return "(none declared)"
	}
	return strings.Join(out, ", ")
}

// uniqueName is name, and a problem when another of its kind (seen) has
// the same name already.
func (v *validator) uniqueName(path, name, what string, seen bool) {
	v.name(path, name, what)
	if seen && name != "" {
		v.add(path, "another %s is already named %q; names must be unique", what, name)
	}
}

func (v *validator) name(path, name, what string) {
	if name == "" {
		v.add(path, "is required: a %s name", what)
	} else if !namePattern.MatchString(name) {
		v.add(path, "%q is not a valid %s name: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64", name, what)
	}
}

func (v *validator) limits(l Limits) {
	if l.TimeoutMs < 0 || l.TimeoutMs > protocol.MaxSupportedTimeout {
		v.add("limits.timeoutMs", "must be between 1 and %d (the widest delay a 32-bit timer accepts)", protocol.MaxSupportedTimeout)
	}
	v.notNegative("limits.maxConcurrent", int64(l.MaxConcurrent))
	v.notNegative("limits.maxConnections", int64(l.MaxConnections))
	v.notNegative("limits.maxHandles", int64(l.MaxHandles))
	v.notNegative("limits.maxMessageBytes", l.MaxMessageBytes)
	v.notNegative("limits.maxCallsPerConnection", int64(l.MaxCallsPerConnection))
	v.notNegative("limits.wireMemoryMB", int64(l.WireMemoryMB))
	if l.MaxCallsPerConnection > 0 && l.MaxCallsPerConnection < 16 {
		v.add("limits.maxCallsPerConnection", "%d is too small: a client keeps a few calls open beside each execution; use at least 16, or leave it out for 1024", l.MaxCallsPerConnection)
	}
	if mb := int64(l.WireMemoryMB); mb > 0 && mb<<20 < 4*l.MaxMessageBytes {
		v.add("limits.wireMemoryMB", "%d MB is too small: it must hold at least four of the largest messages (limits.maxMessageBytes, %d bytes)", l.WireMemoryMB, l.MaxMessageBytes)
	}
	if l.MaxMessageBytes > 0 && l.MaxMessageBytes < 64<<10 {
		v.add("limits.maxMessageBytes", "%d is too small: a run at every contract bound sends messages of up to a few hundred KiB; use at least 65536, or leave it out for 1 MiB", l.MaxMessageBytes)
	}
}

func (v *validator) backend(path string, b *Backend) {
	switch b.Readiness {
	case ReadinessRequired, ReadinessOptional:
	default:
		v.add(path+".readiness", "%q is not a readiness; use required (the group gates /readyz) or optional (the default: it does not)", b.Readiness)
	}
	switch b.Type {
	case "local":
		if b.Remote != nil {
			v.add(path+".remote", "a local backend takes no remote section")
		}
		l := b.Local
		v.notNegative(path+".local.minWorkers", int64(l.MinWorkers))
		v.notNegative(path+".local.maxWorkers", int64(l.MaxWorkers))
		v.notNegative(path+".local.poolSize", int64(l.PoolSize))
		v.notNegative(path+".local.runsPerWorker", int64(l.RunsPerWorker))
		v.notNegative(path+".local.workerMemoryMB", int64(l.WorkerMemoryMB))
		v.notNegative(path+".local.queue", int64(l.Queue))
		v.notNegative(path+".local.queueTimeout", int64(l.QueueTimeout))
		v.notNegative(path+".local.workerIdleTimeout", int64(l.WorkerIdleTimeout))
		v.notNegative(path+".local.memoryMB", int64(l.MemoryMB))
		v.notNegative(path+".local.defaultTimeoutMs", l.DefaultTimeoutMs)
		if l.PoolSize != 0 && l.MaxWorkers != 0 {
			v.add(path+".local.poolSize", "poolSize is the old name of maxWorkers; keep one")
		}
		if l.MemoryMB != 0 && l.MemoryMB < 16 {
			v.add(path+".local.memoryMB", "%d MB is too small for a JavaScript runtime; use at least 16", l.MemoryMB)
		}
		if l.DefaultTimeoutMs > protocol.MaxSupportedTimeout {
			v.add(path+".local.defaultTimeoutMs", "must be at most %d", protocol.MaxSupportedTimeout)
		}
		if u := l.WorkerUser; u != "" && !workerUserPattern.MatchString(u) {
			v.add(path+".local.workerUser", "%q is neither a user name nor uid:gid in numbers (e.g. 65534:65534)", u)
		}
		v.native(path+".local.native", &l.Native)
		v.notNegative(path+".local.handlesIdleTimeout", int64(l.HandlesIdleTimeout))
	case "remote":
		if b.Local != nil {
			v.add(path+".local", "a remote backend takes no local section")
		}
		switch {
		case b.Remote == nil || (len(b.Remote.Members) == 0 && b.Remote.Discover == nil):
			v.add(path+".remote.members", "a remote backend needs at least one member {url: ws://host:port/}, or discover: {dns: name, port: n} to find them in DNS")
			return
		case b.Remote.Discover != nil && len(b.Remote.Members) > 0:
			v.add(path+".remote.discover", "members and discover are two ways to name the executor servers; keep one")
			return
		case b.Remote.Discover != nil:
			v.discover(path+".remote.discover", b.Remote.Discover)
		}
		urls := map[string]int{}
		for j := range b.Remote.Members {
			m := &b.Remote.Members[j]
			mp := fmt.Sprintf("%s.remote.members[%d]", path, j)
			u, err := url.Parse(m.URL)
			if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
				v.add(mp+".url", "%q is not a ws:// or wss:// URL of an executor server", m.URL)
			} else if other, dup := urls[m.URL]; dup {
				v.add(mp+".url", "%q is already members[%d]; list each executor server once", m.URL, other)
			} else {
				urls[m.URL] = j
			}
			if m.KeyEnv != "" {
				if m.Key = v.getenv(m.KeyEnv); m.Key == "" {
					v.add(mp+".keyEnv", "environment variable %s is not set; it must hold the bearer key for this executor server", m.KeyEnv)
				}
			}
		}
		if b.Remote.HealthInterval < 0 || b.Remote.DialTimeout < 0 {
			v.add(path+".remote", "healthInterval and dialTimeout must not be negative")
		}
		v.native(path+".remote.native", &b.Remote.Native)
	case "":
		v.add(path+".type", "is required: local or remote")
	default:
		v.add(path+".type", "%q is not a backend type; use local or remote", b.Type)
	}
}

// native checks a group's native section, local or remote alike, and
// parses its ranges.
func (v *validator) native(path string, n *NativeFetch) {
	n.DenyRanges = v.cidrs(path+".deny", n.Deny)
	n.AllowRanges = v.cidrs(path+".allow", n.Allow)
	if n.MaxResponseBytes < 0 || n.RequestTimeout < 0 {
		v.add(path, "maxResponseBytes and requestTimeout must not be negative")
	}
}

// dnsName is a host name as DNS writes it: dot-separated labels of
// letters, digits, hyphens (and underscores, which service records use),
// with an optional final dot.
var dnsName = regexp.MustCompile(`^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?\.?$`)

// minDiscoverInterval keeps a typo (1ms) from resolving the name in a
// tight loop on every replica.
const minDiscoverInterval = Duration(1e9)

func (v *validator) discover(path string, d *Discover) {
	switch _, err := netip.ParseAddr(d.DNS); {
	case d.DNS == "":
		v.add(path+".dns", "is required: the DNS name whose addresses are the executor servers (a Kubernetes headless Service's name)")
	case err == nil:
		v.add(path+".dns", "%q is an address, not a name; list it under members instead", d.DNS)
	case len(d.DNS) > 253 || !dnsName.MatchString(d.DNS):
		v.add(path+".dns", "%q is not a DNS name such as executors.namespace.svc.cluster.local", d.DNS)
	}
	if d.Port < 1 || d.Port > 65535 {
		v.add(path+".port", "is required: the executor servers' port, 1 to 65535")
	}
	if d.Scheme != "ws" && d.Scheme != "wss" {
		v.add(path+".scheme", "%q is not a scheme; use ws or wss", d.Scheme)
	}
	if u, err := url.Parse(d.Path); err != nil || !strings.HasPrefix(d.Path, "/") || u.Path != d.Path || u.RawQuery != "" || u.Fragment != "" {
		v.add(path+".path", "%q is not a path such as / or /v1/executor", d.Path)
	}
	if d.KeyEnv != "" {
		if d.Key = v.getenv(d.KeyEnv); d.Key == "" {
			v.add(path+".keyEnv", "environment variable %s is not set; it must hold the bearer key for these executor servers", d.KeyEnv)
		}
	}
	if d.Interval < minDiscoverInterval {
		v.add(path+".interval", "%s is too short; resolve the name at most once a second", d.Interval.Std())
	}
	if d.EmptyGrace < 0 {
		v.add(path+".emptyGrace", "must not be negative")
	}
}

// jwt reads the jwt section's secret from the environment and its JWKS
// file, saying at its key a variable that is not set or a file that cannot
// be read, and returns the settings. The keys themselves are the
// authenticator's to check: the gateway builds it (a Check).
func (v *validator) jwt(c *Config, j *JWT) *JWTSettings {
	s := &JWTSettings{Issuer: j.Issuer, Audience: j.Audience, TenantClaim: j.TenantClaim, HMACSecretEnv: j.HMACSecretEnv, PublicKeys: j.PublicKeys, Leeway: j.Leeway.Std()}
	if j.HMACSecretEnv != "" {
		if secret := v.getenv(j.HMACSecretEnv); secret == "" {
			v.add("jwt.hmacSecretEnv", "environment variable %s is not set; it must hold the HS256 secret", j.HMACSecretEnv)
		} else {
			s.HMACSecret = []byte(secret)
		}
	}
	// The JWKS file is read here, once: the gateway builds its verifier
	// from these bytes, so a file gone or changed since serves the keys
	// that were checked.
	if j.JWKSFile != "" {
		s.JWKSFile = c.Resolve(j.JWKSFile)
		data, err := os.ReadFile(s.JWKSFile)
		if err != nil {
			v.add("jwt.jwksFile", "%v", err)
		} else {
			s.JWKS = append([]byte{}, data...) // never nil: read
		}
	}
	return s
}

func (v *validator) policy(path string, p *Policy, l Limits) {
	if p.TimeoutMs < 0 || p.TimeoutMs > l.TimeoutMs {
		v.addAfter([]string{"limits.timeoutMs"}, path+".timeoutMs", "%d is outside the operator limit: use 1 to %d (limits.timeoutMs)", p.TimeoutMs, l.TimeoutMs)
	}
	for _, f := range []struct {
		key      string
		n, limit int
	}{
		{"maxConcurrent", p.MaxConcurrent, l.MaxConcurrent},
		{"maxConnections", p.MaxConnections, l.MaxConnections},
		{"maxHandles", p.MaxHandles, l.MaxHandles},
	} {
		if f.n < 0 || f.n > f.limit {
			v.addAfter([]string{"limits." + f.key}, path+"."+f.key, "%d is outside the operator limit: use 1 to %d (limits.%s)", f.n, f.limit, f.key)
		}
	}
	p.NativeDenyRanges = v.cidrs(path+".nativeDeny", p.NativeDeny)
	if math.IsNaN(p.Rate) || math.IsInf(p.Rate, 0) {
		v.add(path+".rate", "must be a number of executions per second")
	} else if p.Rate < 0 || p.Burst < 0 {
		v.add(path+".rate", "rate and burst must not be negative")
	}
	if w := p.Weight; math.IsNaN(w) || w <= 0 || w > maxWeight {
		v.add(path+".weight", "%g is not a weight: use a number above 0 and at most %d (1 is the default)", w, maxWeight)
	}
	if p.CPUSlots < 0 {
		v.add(path+".cpuSlots", "must not be negative (0 takes the group's default)")
	}
	v.budget(path+".budget", p.Budget)
	if p.Rate == 0 && p.Burst != 0 {
		v.addAfter([]string{path + ".rate"}, path+".burst", "burst needs a rate: set rate (executions per second) too")
	}
}

// maxWeight bounds policy.weight: a share a thousand times another's is
// already all of a group.
const maxWeight = 1000

// maxBudgetWindow bounds policy.budget.window.
const maxBudgetWindow = 31 * 24 * time.Hour

func (v *validator) budget(path string, b Budget) {
	if b.Executions < 0 {
		v.add(path+".executions", "must not be negative (0 sets no bound)")
	}
	if b.RunClock < 0 {
		v.add(path+".runClock", "must not be negative (0 sets no bound)")
	}
	switch w := b.Window.Std(); {
	case w < 0:
		v.add(path+".window", "must not be negative")
	case w == 0 && b.IsSet():
		v.add(path+".window", "is required with a budget: the period it refills over, e.g. 1h")
	case w > maxBudgetWindow:
		v.add(path+".window", "%s is longer than 31 days (%s); use a shorter window", w, maxBudgetWindow)
	}
}

func (v *validator) route(path string, r *Route, l Limits, tenants map[string]bool, tenantNames []string) {
	if !strings.HasPrefix(r.Path, "/") {
		v.add(path+".path", "%q must start with /", r.Path)
	}
	switch r.Kind {
	case "executor":
		if r.Upstream != "" {
			v.add(path+".upstream", "an executor route serves ExecutorApi itself and takes no upstream")
		}
	case "proxy":
		u, err := url.Parse(r.Upstream)
		if r.Upstream == "" || err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			v.add(path+".upstream", "a proxy route needs an http:// or https:// upstream URL (WebSocket upgrades are proxied over it too)")
		} else {
			r.UpstreamURL = u
		}
	case "":
		v.add(path+".kind", "is required: executor or proxy")
	default:
		v.add(path+".kind", "%q is not a route kind; use executor or proxy", r.Kind)
	}
	for j, p := range r.Subprotocols {
		sp := fmt.Sprintf("%s.subprotocols[%d]", path, j)
		if !tokenPattern.MatchString(p) {
			v.add(sp, "%q is not a valid subprotocol token", p)
		} else if strings.HasPrefix(p, bearer.SubprotocolPrefix) {
			v.add(sp, "%q starts with %q, which marks a credential and is never selected", p, bearer.SubprotocolPrefix)
		}
	}
	for j, o := range r.AllowedOrigins {
		if p, err := ParseOrigin(o); err != nil {
			v.add(fmt.Sprintf("%s.allowedOrigins[%d]", path, j), "%v", err)
		} else {
			r.Origins = append(r.Origins, p)
		}
	}
	if r.AllowAnyOrigin {
		if len(r.AllowedOrigins) > 0 {
			v.add(path+".allowAnyOrigin", "lets every origin connect, so allowedOrigins would add nothing: keep one of the two")
		}
		r.Origins = []OriginPattern{{Host: "*"}}
	}
	for j, t := range r.Tenants {
		if !tenants[t] {
			v.addAfter(tenantNames, fmt.Sprintf("%s.tenants[%d]", path, j), "no tenant is named %q", t)
		}
	}
	if r.MaxMessageBytes < 0 || r.MaxMessageBytes > l.MaxMessageBytes {
		v.addAfter([]string{"limits.maxMessageBytes"}, path+".maxMessageBytes", "%d is outside the operator limit: use 1 to %d (limits.maxMessageBytes)", r.MaxMessageBytes, l.MaxMessageBytes)
	}
}

func (v *validator) tls(path string, c *Config, t *TLS) {
	if t == nil {
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		v.add(path, "needs both certFile and keyFile")
		return
	}
	cert, err := tls.LoadX509KeyPair(c.Resolve(t.CertFile), c.Resolve(t.KeyFile))
	if err != nil {
		v.add(path, "cannot load the certificate and key: %v", err)
		return
	}
	t.Certificate = &cert
}

// Resolve makes a path from the file relative to the file's directory.
func (c *Config) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}

func (v *validator) tracing(t *Tracing) {
	if t.Endpoint != "" {
		if _, err := telemetry.EndpointURL(t.Endpoint); err != nil {
			v.add("tracing.endpoint", "%s", strings.TrimPrefix(err.Error(), "tracing: "))
		}
	}
	switch t.Protocol {
	case "", telemetry.ProtocolHTTP, telemetry.ProtocolGRPC:
	default:
		v.add("tracing.protocol", "%q is not an OTLP protocol this gateway speaks; use %s or %s", t.Protocol, telemetry.ProtocolHTTP, telemetry.ProtocolGRPC)
	}
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		v.add("tracing.sampleRatio", "%v is not a share of traces; use a number from 0 to 1", *r)
	}
	for i := range t.Headers {
		h := &t.Headers[i]
		p := fmt.Sprintf("tracing.headers[%d]", i)
		if !tokenPattern.MatchString(h.Name) {
			v.add(p+".name", "%q is not an HTTP header name", h.Name)
		}
		if h.ValueEnv == "" {
			v.add(p+".valueEnv", "is required: the environment variable that holds the header's value")
		} else if h.Value = v.getenv(h.ValueEnv); h.Value == "" {
			v.add(p+".valueEnv", "environment variable %s is not set; it must hold the value of header %s", h.ValueEnv, h.Name)
		}
	}
}
