package config

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/supolka/codemode-gateway/gateway/connlimit"
)

// Defaults of the operator limits.
const (
	DefaultLimitTimeoutMs    = 300000
	DefaultLimitConcurrent   = 64
	DefaultLimitConnections  = 256
	DefaultLimitHandles      = 64
	DefaultLimitMessageBytes = 1 << 20
	DefaultPinsSize          = 10000
	DefaultHealthInterval    = Duration(5e9)
	DefaultRemoteDialTimeout = Duration(10e9)
	DefaultDiscoverInterval  = Duration(10e9)
	DefaultDiscoverGrace     = Duration(60e9)
	DefaultDrainTimeout      = Duration(30e9)
	maxConfigBytes           = 4 << 20
	// maxProblems is how many problems of one file are listed.
	maxProblems = 100

	DefaultMaxCallsPerConnection = 1024
	DefaultWireMemoryMB          = 512

	DefaultIdleTimeout        = Duration(60e9)
	DefaultMaxUnauthenticated = connlimit.DefaultMaxUnauthenticated
	// DescriptorsPerWorker is what the default descriptorReserve keeps
	// for each worker process: its pipes, its gate page, its stat file,
	// and the ones it takes while it starts.
	DescriptorsPerWorker = 8
)

// DescriptorReserve is connections.descriptorReserve, or where the file
// sets none its default on a machine of numCPU CPUs: connlimit's reserve
// and 8 for each worker process the local groups may start.
func (c *Config) DescriptorReserve(numCPU int) int {
	if r := c.Connections.DescriptorReserve; r > 0 {
		return r
	}
	r := connlimit.DefaultReserve
	for _, b := range c.Backends {
		if b.Local != nil {
			r += DescriptorsPerWorker * b.Local.Settings(numCPU).MaxWorkers
		}
	}
	return r
}

// Problem is one thing wrong with a configuration file, placed at its line.
type Problem struct {
	File string
	Line int // 0 when the problem has no single place
	// Path is where in the document, e.g. tenants[1].backend.
	Path string
	// Msg says what is wrong and what to do.
	Msg string
	// after are the keys this problem follows from: when one of them did
	// not decode, its own problem says it all and this one is dropped.
	after []string
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems are every problem found in one file, in document order.
type Problems []*Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Getenv reads the environment variables that hold secrets; tests replace
// it.
type Getenv func(string) string

// A Check checks a validated configuration with code this package does not
// build on: the gateway checks the jwt section's keys by building its
// authenticator of Credentials. It reports each problem with report, at
// its key path (e.g. jwt.publicKeys[0]); they are listed with
// validation's own, in document order, so that a file is refused, and
// every problem of it said, in one place whoever checks it.
type Check func(c *Config, report func(path, msg string))

// Load reads, decodes and validates the file at path, reading secrets from
// the process environment, then runs checks on it. Any failure names the
// file and, where there is one, the line.
func Load(path string, checks ...Check) (*Config, error) {
	return LoadWith(path, os.Getenv, checks...)
}

// LoadWith is Load with the environment given.
func LoadWith(path string, getenv Getenv, checks ...Check) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s: the file is larger than %d bytes; is it the right file?", path, maxConfigBytes)
	}
	return Parse(path, data, getenv, checks...)
}

// ReadAdmin reads only the admin section of the file at path, for a
// command that talks to the gateway serving it (`gateway reload`): the
// rest of the file, and the secrets it names, need not be valid where the
// command runs.
func ReadAdmin(path string) (Admin, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Admin{}, fmt.Errorf("reading the configuration: %w", err)
	}
	if len(data) > maxConfigBytes {
		return Admin{}, fmt.Errorf("%s: the file is larger than %d bytes; is it the right file?", path, maxConfigBytes)
	}
	var cfg Config
	problems, _, stopped := decodeFile(path, data, &cfg)
	if !stopped {
		problems = slices.DeleteFunc(problems, func(p *Problem) bool { return !underAny(p.Path, []string{"admin"}) })
	}
	if len(problems) > 0 {
		return Admin{}, problems
	}
	return cfg.Admin, nil
}

// Parse decodes and validates data, naming it file in every problem, then
// runs checks on it. Local groups are checked with the defaults of this
// machine's CPUs.
func Parse(file string, data []byte, getenv Getenv, checks ...Check) (*Config, error) {
	return parse(file, data, getenv, runtime.NumCPU(), checks...)
}

// parse is Parse on a machine of numCPU CPUs. Every problem is reported:
// those of decoding (unknown keys, values of the wrong kind) and those of
// validation, except the validation problems of a key that did not decode,
// which would only repeat them, and those that follow from it (a burst
// without a rate, when the rate did not decode). A syntax error is the one problem.
func parse(file string, data []byte, getenv Getenv, numCPU int, checks ...Check) (*Config, error) {
	var cfg Config
	decoded, lines, stopped := decodeFile(file, data, &cfg)
	if stopped {
		return nil, decoded
	}
	cfg.Dir = filepath.Dir(file)
	cfg.Digest = digestOf(data)
	v := &validator{file: file, lines: lines, getenv: getenv, numCPU: numCPU, inherited: leftOut(&cfg)}
	cfg.applyDefaults()
	v.validate(&cfg)
	for _, check := range checks {
		check(&cfg, func(path, msg string) { v.add(path, "%s", msg) })
	}
	var broken []string
	for _, p := range decoded {
		broken = append(broken, p.Path)
	}
	all := append(decoded, slices.DeleteFunc(v.problems, func(p *Problem) bool {
		return underAny(p.Path, broken) || slices.ContainsFunc(p.after, func(k string) bool { return underAny(k, broken) })
	})...)
	// In document order; the problems of the whole file (no line) last.
	slices.SortStableFunc(all, func(a, b *Problem) int {
		return cmp.Compare(lineOrLast(a.Line), lineOrLast(b.Line))
	})
	if n := len(all) - maxProblems; n > 0 {
		// A file this wrong is the wrong file; its first problems say so.
		all = append(all[:maxProblems], &Problem{File: file, Msg: fmt.Sprintf("and %d more problems", n)})
	}
	if len(all) > 0 {
		return nil, all
	}
	return &cfg, nil
}

func (c *Config) applyDefaults() {
	l := &c.Limits
	l.TimeoutMs = cmp.Or(l.TimeoutMs, DefaultLimitTimeoutMs)
	l.MaxConcurrent = cmp.Or(l.MaxConcurrent, DefaultLimitConcurrent)
	l.MaxConnections = cmp.Or(l.MaxConnections, DefaultLimitConnections)
	l.MaxHandles = cmp.Or(l.MaxHandles, DefaultLimitHandles)
	l.MaxMessageBytes = cmp.Or(l.MaxMessageBytes, DefaultLimitMessageBytes)
	l.MaxCallsPerConnection = cmp.Or(l.MaxCallsPerConnection, DefaultMaxCallsPerConnection)
	l.WireMemoryMB = cmp.Or(l.WireMemoryMB, DefaultWireMemoryMB)
	c.Pins.Size = cmp.Or(c.Pins.Size, DefaultPinsSize)
	c.Connections.IdleTimeout = cmp.Or(c.Connections.IdleTimeout, DefaultIdleTimeout)
	c.Connections.MaxUnauthenticated = cmp.Or(c.Connections.MaxUnauthenticated, DefaultMaxUnauthenticated)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.Log.Format = cmp.Or(c.Log.Format, "text")
	c.Log.Level = cmp.Or(c.Log.Level, "info")
	for i := range c.Backends {
		b := &c.Backends[i]
		b.Readiness = cmp.Or(b.Readiness, ReadinessOptional)
		if b.Type == "local" && b.Local == nil {
			b.Local = &LocalBackend{}
		}
		if r := b.Remote; r != nil {
			r.HealthInterval = cmp.Or(r.HealthInterval, DefaultHealthInterval)
			r.DialTimeout = cmp.Or(r.DialTimeout, DefaultRemoteDialTimeout)
			if d := r.Discover; d != nil {
				d.Scheme = cmp.Or(d.Scheme, "ws")
				d.Path = cmp.Or(d.Path, "/")
				d.Interval = cmp.Or(d.Interval, DefaultDiscoverInterval)
				d.EmptyGrace = cmp.Or(d.EmptyGrace, DefaultDiscoverGrace)
			}
		}
	}
	for i := range c.Tenants {
		p := &c.Tenants[i].Policy
		p.TimeoutMs = cmp.Or(p.TimeoutMs, l.TimeoutMs)
		p.MaxConcurrent = cmp.Or(p.MaxConcurrent, l.MaxConcurrent)
		p.MaxConnections = cmp.Or(p.MaxConnections, l.MaxConnections)
		p.MaxHandles = cmp.Or(p.MaxHandles, l.MaxHandles)
		if p.Rate > 0 && p.Burst == 0 {
			p.Burst = max(1, int(min(p.Rate, math.MaxInt32)))
		}
		p.Weight = cmp.Or(p.Weight, 1)
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		r.MaxMessageBytes = cmp.Or(r.MaxMessageBytes, l.MaxMessageBytes)
	}
}

// leftOut marks the tenant policy keys that take the operator's limit when
// left out and were left out, so that a problem can say where a value came
// from.
func leftOut(c *Config) map[int]map[string]bool {
	out := map[int]map[string]bool{}
	for i, t := range c.Tenants {
		out[i] = map[string]bool{
			"maxConcurrent": t.Policy.MaxConcurrent == 0,
			"maxHandles":    t.Policy.MaxHandles == 0,
		}
	}
	return out
}

func lineOrLast(line int) int {
	if line == 0 {
		return math.MaxInt
	}
	return line
}

// lineOf finds the line of a key path among the lines the decoder saw. A
// key that was left out has no line of its own, so the line of the nearest
// enclosing key is given.
func lineOf(lines map[string]int, path string) int {
	for path != "" {
		if line := lines[path]; line > 0 {
			return line
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// digestOf names a configuration's bytes in logs: the first 16 hex digits
// of their SHA-256, enough to tell which file a replica serves.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
