// Package config is the gateway's configuration: one YAML file, decoded into
// typed structs and validated up front. Unknown keys, values of the wrong
// type, bad values and dangling references all fail with the file, the line
// and what to fix. Secrets never sit in the file: API keys are stored as
// hashes, and other secrets are named by the environment variable that
// holds them.
//
// docs/configuration.md is the reference of every key.
package config

import (
	"crypto/tls"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/supolka/codemode-gateway/internal/bearer"
)

// Config is the whole file.
type Config struct {
	// Listen is the address of the gateway's listener.
	Listen string `yaml:"listen"`
	// TLS serves Listen over TLS; absent serves plain HTTP.
	TLS *TLS `yaml:"tls"`
	// Admin configures the operator's listener (metrics, health).
	Admin Admin `yaml:"admin"`
	// Log configures the structured log.
	Log Log `yaml:"log"`
	// Connections bounds what clients hold on the gateway's listener.
	Connections Connections `yaml:"connections"`
	// DrainTimeout bounds how long a stopping gateway waits for executions
	// in flight. Default: 30s.
	DrainTimeout Duration `yaml:"drainTimeout"`
	// Limits are the operator's caps: no tenant policy may exceed them.
	Limits Limits `yaml:"limits"`
	// Backends are the named backend groups executions run on.
	Backends []Backend `yaml:"backends"`
	// JWT configures JWT bearer tokens; absent means API keys only.
	JWT *JWT `yaml:"jwt"`
	// Tenants are the applications that may connect.
	Tenants []Tenant `yaml:"tenants"`
	// Routes map paths (and WebSocket subprotocols) to what serves them.
	Routes []Route `yaml:"routes"`
	// Pins bounds the executionId pin table.
	Pins Pins `yaml:"pins"`
	// ExecutionIDs configures the ids clients see for retained executions.
	ExecutionIDs ExecutionIDs `yaml:"executionIds"`
	// Tracing exports OpenTelemetry traces; off by default.
	Tracing Tracing `yaml:"tracing"`

	// Dir is the directory of the file, against which relative paths in
	// it are resolved. Set by Load.
	Dir string `yaml:"-"`
	// Digest names the file's bytes in logs (the first 16 hex digits of
	// their SHA-256). Set by Parse.
	Digest string `yaml:"-"`
	// Credentials are the tenants' credentials as validation read them;
	// the gateway builds its authenticator from them.
	Credentials Credentials `yaml:"-"`
}

// Credentials are what an authenticator is built from, as plain data: the
// API keys every tenant declared and, with a jwt section, its settings
// with the secret read from the environment and the JWKS file read.
// Validation checks what it reads; what only the authenticator's code can
// check (the keys of the jwt section) the gateway checks by building it,
// as a Check given to Load.
type Credentials struct {
	Keys []TenantKey
	// JWT is nil without a jwt section.
	JWT *JWTSettings
}

// TenantKey is one API key of a tenant.
type TenantKey struct {
	// Name is the key's name, safe to log.
	Name   string
	Tenant string
	// Hash is the key's digest, read from its "sha256:" form.
	Hash bearer.KeyHash
}

// JWTSettings are the jwt section as a verifier is built from it.
type JWTSettings struct {
	Issuer   string
	Audience string
	// TenantClaim is as the file says; empty takes the verifier's default.
	TenantClaim string
	// HMACSecretEnv names the variable HMACSecret was read from, for the
	// problems of the secret; empty when the section names none.
	HMACSecretEnv string
	// HMACSecret is that variable's value: nil when the section names no
	// variable, or the variable is not set.
	HMACSecret []byte
	// PublicKeys are PEM public keys, as the file gives them.
	PublicKeys []string
	// JWKSFile is the JWKS file's path, resolved against the file's
	// directory; empty when the section names none.
	JWKSFile string
	// JWKS is its contents, read once by validation so that the keys
	// served are the keys checked: nil when there is no file to read or
	// it could not be read.
	JWKS []byte
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
}

// Unavailable reports whether a key source the section names could not be
// read: its secret's variable not set, or its JWKS file unreadable.
// Validation reported that already, at its key; the settings still show
// what else is wrong with the section.
func (j *JWTSettings) Unavailable() bool {
	return (j.HMACSecretEnv != "" && j.HMACSecret == nil) || (j.JWKSFile != "" && j.JWKS == nil)
}

// Admin is the operator's listener: /metrics, /healthz, /readyz.
type Admin struct {
	// Listen is its address; empty serves no admin endpoints. Keep it off
	// the tenants' network.
	Listen string `yaml:"listen"`
	// TLS serves the admin listener over TLS; absent serves plain HTTP.
	TLS *TLS `yaml:"tls"`
	// TokenEnv names the environment variable holding a bearer token every
	// request to the admin listener must carry; empty asks for none.
	TokenEnv string `yaml:"tokenEnv"`
	// Token is TokenEnv's value, read once by validation.
	Token string `yaml:"-"`
}

// Connections bounds the connections of the gateway's listener, so that
// clients without a credential cannot take the process's descriptors.
type Connections struct {
	// IdleTimeout closes a connection that sent no request for this long
	// between requests. Default: 60s.
	IdleTimeout Duration `yaml:"idleTimeout"`
	// MaxUnauthenticated is how many connections may be open without
	// having authenticated; past it the oldest is closed. Default: 256.
	MaxUnauthenticated int `yaml:"maxUnauthenticated"`
	// DescriptorReserve is how many descriptors under the process's limit
	// the listener leaves for everything else (worker processes above
	// all); at the limit it stops accepting. Default: 128, and 8 for each
	// worker process the local groups may start.
	DescriptorReserve int `yaml:"descriptorReserve"`
}

// TLS names a certificate and its key, PEM files relative to the config
// file. Both are read again on every reload, so a renewed certificate is
// picked up by SIGHUP.
type TLS struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// Certificate is the pair, loaded by validation.
	Certificate *tls.Certificate `yaml:"-"`
}

// Log configures the structured log (log/slog).
type Log struct {
	// Format is "text" (default) or "json".
	Format string `yaml:"format"`
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `yaml:"level"`
}

// Limits are the operator's caps on every tenant's policy.
type Limits struct {
	// TimeoutMs caps the run bound any request may ask for (a null timeout
	// lifts to it). Default: 300000 (five minutes).
	TimeoutMs int64 `yaml:"timeoutMs"`
	// MaxConcurrent caps a tenant's executions in flight. Default: 64.
	MaxConcurrent int `yaml:"maxConcurrent"`
	// MaxConnections caps a tenant's open connections. Default: 256.
	MaxConnections int `yaml:"maxConnections"`
	// MaxHandles caps a tenant's retained executions. Default: 64.
	MaxHandles int `yaml:"maxHandles"`
	// MaxMessageBytes caps a route's message-size limit. Default: 1 MiB.
	MaxMessageBytes int64 `yaml:"maxMessageBytes"`
	// MaxCallsPerConnection bounds the calls a client has made on one
	// connection and not released (pulled and released, as the client
	// library does); past it the connection is aborted. Default: 1024.
	MaxCallsPerConnection int `yaml:"maxCallsPerConnection"`
	// WireMemoryMB bounds what every connection together holds for its
	// client: the calls outstanding, their results until released, and
	// messages waiting to be written. Past it the connection holding the
	// most is aborted. Default: 512.
	WireMemoryMB int `yaml:"wireMemoryMB"`
}

// Backend is one named backend group.
type Backend struct {
	Name string `yaml:"name"`
	// Type is "local" (the embedded goja pool) or "remote" (executor
	// servers).
	Type string `yaml:"type"`
	// Readiness says whether the group gates the replica's /readyz:
	// "required" (the replica is not ready while the group has no usable
	// member) or "optional" (the default: it is not). A replica with no
	// usable group at all is never ready.
	Readiness Readiness      `yaml:"readiness"`
	Local     *LocalBackend  `yaml:"local"`
	Remote    *RemoteBackend `yaml:"remote"`
}

// Readiness is a backend group's part in its replica's readiness.
type Readiness string

// The values of Backend.Readiness.
const (
	ReadinessRequired Readiness = "required"
	ReadinessOptional Readiness = "optional"
)

// LocalBackend configures the embedded pool of worker processes. Every zero
// field takes the local backend's default (see LocalDefaults).
type LocalBackend struct {
	// MinWorkers is how many worker processes are kept started and warm.
	// Default: one per CPU, at most MaxWorkers.
	MinWorkers int `yaml:"minWorkers"`
	// MaxWorkers is the ceiling of worker processes. Default: four per
	// CPU.
	MaxWorkers int `yaml:"maxWorkers"`
	// PoolSize is poolSize, the deprecated old name of maxWorkers, still
	// accepted; a file sets one of the two, and Settings reads either as
	// the ceiling.
	PoolSize int `yaml:"poolSize"`
	// RunsPerWorker is how many executions one worker process hosts at
	// once, those waiting on the host and retained ones included. Default:
	// 512.
	RunsPerWorker int `yaml:"runsPerWorker"`
	// WorkerMemoryMB is one worker process's memory across all its
	// executions. Default: 1024.
	WorkerMemoryMB int `yaml:"workerMemoryMB"`
	// Queue is how many executions of one tenant may wait for room; one
	// more fails at once with QUEUE_OVERFLOW. Default: 64.
	Queue int `yaml:"queue"`
	// QueueTimeout is how long an execution may wait for room before it
	// fails with QUEUE_OVERFLOW. Default: 10s.
	QueueTimeout Duration `yaml:"queueTimeout"`
	// WorkerIdleTimeout stops a worker process whose tenant has had
	// nothing to run on it for this long. Default: 30s.
	WorkerIdleTimeout Duration `yaml:"workerIdleTimeout"`
	// MemoryMB is each run's memory limit. Default: 128.
	MemoryMB int `yaml:"memoryMB"`
	// DefaultTimeoutMs is the run bound of a request that sets none.
	// Default: 30000.
	DefaultTimeoutMs int64 `yaml:"defaultTimeoutMs"`
	// HandlesIdleTimeout closes a retained execution nobody invoked for
	// this long. Default: 60s.
	HandlesIdleTimeout Duration `yaml:"handlesIdleTimeout"`
	// IsolateTenants is accepted and ignored: a worker process is always
	// kept to one tenant.
	//
	// Deprecated: leave it out.
	IsolateTenants bool `yaml:"isolateTenants"`
	// NativeOutbound lets programs fetch from this process when a request
	// leaves outbound absent. Default false, the operator's veto: such
	// requests then get no network at all.
	NativeOutbound bool `yaml:"nativeOutbound"`
	// Native bounds native fetch where it is allowed.
	Native NativeFetch `yaml:"native"`
	// WorkerUser is who the worker processes run as when the gateway runs
	// as root: a user name or "uid:gid". Default "65534:65534" (nobody).
	WorkerUser string `yaml:"workerUser"`
	// DisableSeccomp starts worker processes without their system-call
	// filter, for a kernel without seccomp. Default false.
	DisableSeccomp bool `yaml:"disableSeccomp"`
}

// NativeFetch bounds the requests programs make natively. Loopback,
// link-local (cloud metadata among them), private, unspecified and
// multicast ranges are always denied unless allowed here.
type NativeFetch struct {
	// Deny adds CIDR ranges to the built-in deny list.
	Deny []string `yaml:"deny"`
	// Allow carves CIDR ranges out of the deny list (an internal API).
	Allow []string `yaml:"allow"`
	// DenyRanges and AllowRanges are Deny and Allow parsed, by validation.
	DenyRanges  []netip.Prefix `yaml:"-"`
	AllowRanges []netip.Prefix `yaml:"-"`
	// MaxResponseBytes caps one response body. Default: 8 MiB.
	MaxResponseBytes int64 `yaml:"maxResponseBytes"`
	// MaxRedirects is how many redirects one request follows (each hop
	// checked against the deny list). Default 20; negative: none.
	MaxRedirects int `yaml:"maxRedirects"`
	// RequestTimeout bounds one request inside the run's own bound.
	// Default: 30s.
	RequestTimeout Duration `yaml:"requestTimeout"`
}

// RemoteBackend configures a pool of remote executor servers: listed one
// by one (Members) or found in DNS (Discover), never both.
type RemoteBackend struct {
	Members []RemoteMember `yaml:"members"`
	// Discover finds the members in DNS instead of a list.
	Discover *Discover `yaml:"discover"`
	// HealthInterval is how often members are checked. Default: 5s.
	HealthInterval Duration `yaml:"healthInterval"`
	// DialTimeout bounds one connection attempt. Default: 10s.
	DialTimeout Duration `yaml:"dialTimeout"`
	// NativeOutbound and Native mean what they mean on a local group;
	// the gateway sends them to the members with each tenant's session,
	// and the members apply them.
	NativeOutbound bool        `yaml:"nativeOutbound"`
	Native         NativeFetch `yaml:"native"`
}

// RemoteMember is one executor server.
type RemoteMember struct {
	// URL is its ws:// or wss:// address.
	URL string `yaml:"url"`
	// KeyEnv names the environment variable holding the bearer key the
	// gateway presents to it; empty sends none.
	KeyEnv string `yaml:"keyEnv"`
	// Key is KeyEnv's value, read once by validation.
	Key string `yaml:"-"`
	// ServerName is the name a wss:// server's certificate is checked
	// against when it is not the URL's host: a member found in DNS is
	// dialled at its address, and its certificate names the DNS name.
	ServerName string `yaml:"-"`
}

// Discover names a remote group's members by one DNS name, as a
// Kubernetes headless Service does: every address the name resolves to (A
// and AAAA) is an executor server on Port, re-resolved every Interval.
type Discover struct {
	// DNS is the name to resolve.
	DNS string `yaml:"dns"`
	// Port is the executor servers' port.
	Port int `yaml:"port"`
	// Scheme is "ws" (default) or "wss". With wss, each server's
	// certificate is checked against DNS, not its address.
	Scheme string `yaml:"scheme"`
	// Path is the servers' route. Default: "/".
	Path string `yaml:"path"`
	// KeyEnv names the environment variable holding the bearer key the
	// gateway presents to every member; empty sends none.
	KeyEnv string `yaml:"keyEnv"`
	// Key is KeyEnv's value, read once by validation.
	Key string `yaml:"-"`
	// Interval is how often the name is resolved again. Default: 10s.
	Interval Duration `yaml:"interval"`
	// EmptyGrace is how long the members are kept when the name resolves
	// to no address; past it the group has no members until the name
	// resolves again. Default: 1m.
	EmptyGrace Duration `yaml:"emptyGrace"`
}

// Member is the executor server at addr, one of those d names.
func (d *Discover) Member(addr netip.Addr) RemoteMember {
	u := url.URL{Scheme: d.Scheme, Host: netip.AddrPortFrom(addr.Unmap(), uint16(d.Port)).String(), Path: d.Path}
	m := RemoteMember{URL: u.String(), KeyEnv: d.KeyEnv, Key: d.Key}
	if d.Scheme == "wss" {
		m.ServerName = strings.TrimSuffix(d.DNS, ".")
	}
	return m
}

// JWT configures JWT bearer tokens.
type JWT struct {
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
	// TenantClaim names the claim that carries the tenant. Default:
	// "tenant".
	TenantClaim string `yaml:"tenantClaim"`
	// HMACSecretEnv names the environment variable holding the HS256
	// secret.
	HMACSecretEnv string `yaml:"hmacSecretEnv"`
	// PublicKeys are PEM public keys for RS256 and ES256.
	PublicKeys []string `yaml:"publicKeys"`
	// JWKSFile names a JSON Web Key Set file, relative to the config file.
	JWKSFile string `yaml:"jwksFile"`
	// Leeway is the clock skew allowed on exp and nbf. Default: 0.
	Leeway Duration `yaml:"leeway"`
}

// Tenant is one application.
type Tenant struct {
	Name string `yaml:"name"`
	// Backend names the backend group its executions run on.
	Backend string `yaml:"backend"`
	// Keys are its API keys, stored as hashes.
	Keys []APIKey `yaml:"keys"`
	// Policy bounds what it may do, inside the operator's limits.
	Policy Policy `yaml:"policy"`
}

// APIKey is one stored API key.
type APIKey struct {
	Name string `yaml:"name"`
	// Hash is "sha256:" and the hex digest (see `gateway hash-key`).
	Hash string `yaml:"hash"`
}

// Policy is a tenant's bounds. A zero value takes its default: for a cap,
// the operator's limit.
type Policy struct {
	// TimeoutMs caps the run bound of this tenant's requests.
	TimeoutMs int64 `yaml:"timeoutMs"`
	// MemoryMB lowers this tenant's memory limit below its local backend's
	// memoryMB; 0 keeps the backend's. On a remote backend the members
	// lower their own --memory-mb to it, and refuse one above it.
	MemoryMB int `yaml:"memoryMB"`
	// NativeOutbound lets this tenant's programs fetch natively where its
	// backend allows it. Default false: a request that leaves outbound
	// absent runs with no network at all.
	NativeOutbound bool `yaml:"nativeOutbound"`
	// NativeDeny adds CIDR ranges this tenant's native fetches must not
	// reach, even inside its backend's allow list.
	NativeDeny []string `yaml:"nativeDeny"`
	// NativeDenyRanges are NativeDeny parsed, by validation.
	NativeDenyRanges []netip.Prefix `yaml:"-"`
	// MaxConcurrent caps executions in flight; one more fails at once with
	// QUEUE_OVERFLOW.
	MaxConcurrent int `yaml:"maxConcurrent"`
	// Rate limits executions started per second (with Burst); 0 is
	// unlimited. Over it execute fails at once with QUEUE_OVERFLOW.
	Rate  float64 `yaml:"rate"`
	Burst int     `yaml:"burst"`
	// MaxConnections caps open connections; one more gets HTTP 429.
	MaxConnections int `yaml:"maxConnections"`
	// MaxHandles caps retained executions; a grant past it closes the
	// tenant's least recently used one.
	MaxHandles int `yaml:"maxHandles"`
	// Budget bounds what the tenant may spend over a window.
	Budget Budget `yaml:"budget"`
	// Weight is the tenant's weight in its local group's fair share of
	// worker processes: a tenant of weight 2 gets twice the share of one
	// of weight 1 when both have work waiting. Default (and 0): 1; at most
	// 1000. On a remote backend each member shares its worker processes
	// by it.
	Weight float64 `yaml:"weight"`
	// CPUSlots is how many of the tenant's executions may run JavaScript
	// at the same moment on its local group: one per worker process, since
	// a worker process runs one runtime at a time. Default (0): the
	// group's, the smaller of the CPUs and maxWorkers - 1, at least 1.
	CPUSlots int `yaml:"cpuSlots"`
}

// Budget is a tenant's allowance over a window. Each bound is a bucket that
// holds the whole budget when full and refills continuously at
// budget/window, so a tenant that spent it all may start again as soon as
// the bucket can pay, not at the end of a calendar window.
type Budget struct {
	// Window is the period a budget refills over: required when a budget
	// is set, at most 31 days.
	Window Duration `yaml:"window"`
	// Executions is how many executions may start per window; 0 sets no
	// bound. An execution is refused while the bucket holds less than one.
	Executions int `yaml:"executions"`
	// RunClock is how much run-clock time (the CPU the tenant's programs
	// spent, as local backends measure it) the tenant may use per window;
	// 0 sets no bound. Each run is charged when it ends, so the bucket may
	// go below zero; executions are refused until it is back at zero.
	// On a remote backend it is charged the run clock the members report
	// in each result's usage.
	RunClock Duration `yaml:"runClock"`
}

// IsSet reports whether the budget bounds anything.
func (b Budget) IsSet() bool { return b.Executions != 0 || b.RunClock != 0 }

// Route maps a path, and for WebSocket upgrades the offered subprotocols,
// to what serves it.
type Route struct {
	// Path is a chi pattern, e.g. /v1/executor or /v1/proxy/*.
	Path string `yaml:"path"`
	// Kind is "executor" (serves ExecutorApi from the tenant's backend) or
	// "proxy" (an authenticated reverse proxy to Upstream).
	Kind string `yaml:"kind"`
	// Subprotocols this route answers to. Empty makes the route the
	// path's default: it serves requests that offer no subprotocol a route
	// of the path names.
	Subprotocols []string `yaml:"subprotocols"`
	// Tenants that may use it; empty means every tenant.
	Tenants []string `yaml:"tenants"`
	// AllowedOrigins are the origins a browser may connect from: host
	// patterns ("app.example.com", "*.example.com"), any scheme, or
	// origins as browsers send them ("http://127.0.0.1:8000"), scheme
	// compared (see OriginPattern). Empty allows requests without an
	// Origin and same-host origins only.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// AllowAnyOrigin lets a page of any origin connect (except the opaque
	// "null"); allowedOrigins refuses an entry that would mean it.
	AllowAnyOrigin bool `yaml:"allowAnyOrigin"`
	// Origins are AllowedOrigins parsed, by validation; with AllowAnyOrigin
	// the pattern of every host.
	Origins []OriginPattern `yaml:"-"`
	// MaxMessageBytes bounds one WebSocket message. Default: the operator
	// limit.
	MaxMessageBytes int64 `yaml:"maxMessageBytes"`
	// Upstream is the proxy target URL (proxy routes only).
	Upstream string `yaml:"upstream"`
	// UpstreamURL is Upstream parsed, by validation.
	UpstreamURL *url.URL `yaml:"-"`
}

// Pins bounds the table that pins granted executionIds to backends.
type Pins struct {
	// Size is the most pins kept; the least recently used is evicted (and
	// its handles closed) past it. Default: 10000.
	Size int `yaml:"size"`
}

// ExecutionIDs configures the executionIds the gateway hands out: each
// names its backend member and tenant and is authenticated with a key, so
// any replica that shares the key routes it.
type ExecutionIDs struct {
	// KeyEnv names the environment variable holding the key (at least 32
	// bytes), the same on every replica. Without it each process makes a
	// random key: ids then route on that process only.
	KeyEnv string `yaml:"keyEnv"`
	// Key is KeyEnv's value, read once by validation.
	Key []byte `yaml:"-"`
}

// Duration is a time.Duration written as Go writes one ("5s", "250ms").
type Duration time.Duration

// UnmarshalText reads a duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Std is the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Tracing configures OpenTelemetry traces, exported over OTLP. Off by
// default; the standard OTEL_* environment variables fill in what the file
// leaves out.
type Tracing struct {
	// Enabled turns tracing on.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the collector's URL: over HTTP its OTLP traces URL (a
	// URL without a path gets /v1/traces), over gRPC its address (http://
	// for plain text). Empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
	// OTEL_EXPORTER_OTLP_ENDPOINT, else localhost on 4318 or 4317.
	Endpoint string `yaml:"endpoint"`
	// Protocol is the OTLP transport: "http/protobuf" (the default) or
	// "grpc".
	Protocol string `yaml:"protocol"`
	// SampleRatio samples this share of new traces, from 0 to 1; a
	// caller's sampling decision is followed. Absent: OTEL_TRACES_SAMPLER,
	// else every trace.
	SampleRatio *float64 `yaml:"sampleRatio"`
	// Headers are sent with every export, each value read from an
	// environment variable (a collector's credential).
	Headers []TracingHeader `yaml:"headers"`
	// ServiceName is the service.name of the spans; default
	// codemode-gateway. OTEL_SERVICE_NAME wins.
	ServiceName string `yaml:"serviceName"`
	// RecordDigests adds the sizes and SHA-256 digests of program text,
	// tool arguments and tool results to spans; never the text itself.
	RecordDigests bool `yaml:"recordDigests"`
}

// TracingHeader is one header of the exports, its value from the
// environment.
type TracingHeader struct {
	Name string `yaml:"name"`
	// ValueEnv names the environment variable that holds the value.
	ValueEnv string `yaml:"valueEnv"`
	// Value is ValueEnv's value, read once by validation.
	Value string `yaml:"-"`
}
