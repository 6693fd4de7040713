package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/supolka/codemode-gateway/auth"
	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/executorserver"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/gateway/connlimit"
	"github.com/supolka/codemode-gateway/gateway/kinds"
	"github.com/supolka/codemode-gateway/internal/memlimit"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// keyHashes collects repeated --key-hash flags.
type keyHashes []string

func (k *keyHashes) String() string     { return strings.Join(*k, ",") }
func (k *keyHashes) Set(v string) error { *k = append(*k, v); return nil }

// serve runs `gateway serve`: the gateway of a configuration file, or with
// --executor-server a bare executor server.
func serve(args []string, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "--executor-server" || a == "-executor-server" || strings.HasPrefix(a, "--executor-server=") {
			return serveExecutor(args, stdout, stderr)
		}
	}
	fs := newFlagSet("serve [--config FILE] [flags]", `Serve the gateway a configuration file describes: its listeners, tenants,
routes and backends. SIGHUP (or gateway reload) re-reads the file; SIGINT or
SIGTERM fails readiness, then stops, giving open requests their drain.
gateway serve --executor-server serves one ExecutorApi on the embedded local
backend instead, without a configuration file (serve --executor-server -h).`)
	cfgPath := fs.String("config", "config.yaml", "the configuration file")
	listen := fs.String("listen", "", "override the configuration's listen address (port 0 picks a free one)")
	admin := fs.String("admin-listen", "", "override the configuration's admin listen address")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	cfg, err := config.Load(*cfgPath, gateway.CheckCredentials)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	override := func(c *config.Config) {
		if *listen != "" {
			c.Listen = *listen
		}
		if *admin != "" {
			c.Admin.Listen = *admin
		}
	}
	override(cfg)
	logger := newLogger(cfg.Log, stderr)
	gw, err := gateway.New(cfg, gateway.Options{Logger: logger, ConfigPath: *cfgPath, Override: override, Version: runningVersion(), Kinds: kinds.All(), MemoryLimit: true})
	if err != nil {
		logger.Error("gateway serve failed", "error", err)
		return 1
	}
	defer gw.Close()
	logger.Info("gateway starting", "version", runningVersion(), "go", runtime.Version(), "protocol", protocol.ProtocolVersion,
		"config", *cfgPath, "configDigest", cfg.Digest)
	// SIGHUP re-reads the file; an invalid one is refused with a log line.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			gw.ReloadFile()
		}
	}()
	// SIGINT and SIGTERM drain from here on: a script that reads the
	// listening lines below and then signals is never met by the default
	// action, which would end the process without a drain.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	guard := connlimit.Options{MaxUnauthenticated: cfg.Connections.MaxUnauthenticated, Reserve: cfg.DescriptorReserve(runtime.NumCPU())}
	ln, scheme, err := listenMaybeTLS(cfg.Listen, gw.TLSConfig(), &guard)
	if err != nil {
		logger.Error("gateway serve failed", "error", err)
		return 1
	}
	idle := cfg.Connections.IdleTimeout.Std()
	srv := newServer(gw.Handler(), idle)
	adminSrv, err := serveAdmin(cfg.Admin.Listen, gw.AdminTLSConfig(), gw.AdminHandler(), idle, stdout, cfg.Log.Format)
	if err != nil {
		logger.Error("gateway serve failed: admin listener", "error", err)
		return 1
	}
	// Tests and scripts read the addresses from these lines.
	announce(stdout, cfg.Log.Format, "gateway listening on", fmt.Sprintf("%s://%s", scheme, ln.Addr()))

	if !serveUntil(ctx, srv, ln, logger) {
		return 1
	}
	// Draining: readiness fails at once and the listener stops accepting;
	// executions in flight finish (up to drainTimeout) on their open
	// connections; then held handles are closed and the process exits 0.
	logger.Info("stopping: draining", "timeout", cfg.DrainTimeout.Std())
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.DrainTimeout.Std())
	defer cancel()
	srv.SetKeepAlivesEnabled(false)
	ln.Close()
	if err := gw.Drain(drainCtx); err != nil {
		logger.Warn("drain ended with executions still in flight", "error", err)
	}
	shutdown(logger, 5*time.Second, srv, adminSrv)
	return 0
}

// serveAdmin serves an admin handler on addr, in the background, and
// prints where; an empty addr serves nothing (and the nil server it
// returns shuts down as a no-op).
func serveAdmin(addr string, tc *tls.Config, h http.Handler, idle time.Duration, stdout io.Writer, format string) (*adminServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, scheme, err := listenMaybeTLS(addr, tc, nil)
	if err != nil {
		return nil, err
	}
	srv := newServer(h, idle)
	go srv.Serve(ln)
	// Tests and scripts read the address from this line.
	announce(stdout, format, "admin listening on", fmt.Sprintf("%s://%s", scheme, ln.Addr()))
	return &adminServer{srv}, nil
}

// adminServer is an admin listener's server, nil when there is none.
type adminServer struct{ srv *http.Server }

func (a *adminServer) Shutdown(ctx context.Context) {
	if a != nil {
		a.srv.Shutdown(ctx)
	}
}

// shutdown stops srv and the admin listener, giving open requests up to
// grace.
func shutdown(logger *slog.Logger, grace time.Duration, srv *http.Server, admin *adminServer) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	srv.Shutdown(ctx)
	admin.Shutdown(ctx)
	logger.Info("stopped")
}

// serveUntil serves srv on ln until ctx ends (true: the caller stops it),
// or until serving fails (false, said on stderr).
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, logger *slog.Logger) bool {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		logger.Error("gateway serve failed", "error", err)
		return false
	case <-ctx.Done():
		return true
	}
}

// listenMaybeTLS opens a listener, under guard's bounds when guard is not
// nil (beneath TLS, so they count connections still in the handshake),
// with TLS when tc is not nil.
func listenMaybeTLS(addr string, tc *tls.Config, guard *connlimit.Options) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	if guard != nil {
		ln = connlimit.New(ln, *guard)
	}
	if tc == nil {
		return ln, "http", nil
	}
	return tls.NewListener(ln, tc), "https", nil
}

// runningVersion is the version `gateway version` prints, for metrics,
// spans and the start-up line.
func runningVersion() string {
	info, _ := debug.ReadBuildInfo()
	return buildVersion(version, info)
}

// announce writes where a listener listens to stdout, for tests and
// scripts: a plain line, or, when the log is JSON, a JSON line whose
// message is the same text, so that stdout holds one format.
func announce(stdout io.Writer, format, what, url string) {
	if format == "json" {
		slog.New(slog.NewJSONHandler(stdout, nil)).Info(what+" "+url, "url", url)
		return
	}
	fmt.Fprintf(stdout, "%s %s\n", what, url)
}

// newServer is the HTTP server of a listener: headers within ten seconds
// and connlimit.MaxHeaderBytes, a connection idle between requests closed
// after idle, and, on a connlimit listener, handlers able to mark a
// connection authenticated.
func newServer(h http.Handler, idle time.Duration) *http.Server {
	return &http.Server{
		Handler: h, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: connlimit.MaxHeaderBytes,
		IdleTimeout: idle, ConnContext: connlimit.ConnContext,
	}
}

// newLogger makes the structured logger the configuration asks for.
func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// checkConfig runs `gateway check-config`: it loads and validates a file
// and reports every problem with its line, without serving anything.
func checkConfig(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check-config [--config FILE]", `Load and validate a configuration file without serving anything: every
problem is reported with its line, and the exit status is 1 when there is
one, 0 when the file is ready to serve.`)
	cfgPath := fs.String("config", "config.yaml", "the configuration file")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if _, err := config.Load(*cfgPath, gateway.CheckCredentials); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", *cfgPath)
	return 0
}

// executorServerAbout is what `gateway serve --executor-server -h` says
// the command does.
const executorServerAbout = `Serve the executor contract's ExecutorApi on one WebSocket route, running
programs on the embedded local backend: what a gateway's remote backend
group connects to. The gateway names each session's tenant and its
settings (memoryMB, weight, cpuSlots, and native fetch as its group allows
it) in headers it trusts only with a member key; each tenant's runs get
worker processes of their own, shared by weight as in a local group, and
fetch natively only where the gateway's file allows it. With --admin-listen it serves
/healthz, /readyz and /metrics on a listener of their own, and it logs
one line per execution. SIGINT or SIGTERM drains it: readiness fails, the
listener closes (a replacement may take the address), new executions are
turned away with a retryable QUEUE_OVERFLOW, and the executions in flight
and the retained ones go on, for up to --drain-timeout; then it stops.`

// serveExecutor runs `gateway serve --executor-server`: the contract's
// ExecutorApi on one WebSocket route, served by the embedded local backend.
// It is what a gateway's remote backend group connects to.
func serveExecutor(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve --executor-server [flags]", executorServerAbout)
	listen := fs.String("listen", "127.0.0.1:8787", "address to listen on (port 0 picks a free one)")
	path := fs.String("path", "/", "the route that serves ExecutorApi")
	admin := fs.String("admin-listen", "", "address of the admin listener (/healthz, /readyz, /metrics); keep it off the callers' network (default: none)")
	adminTokenEnv := fs.String("admin-token-env", "", "the `name` of an environment variable holding a token (at least 16 bytes) that /metrics on the admin listener asks for as Authorization: Bearer <token>; the probes need none")
	var hashes keyHashes
	fs.Var(&hashes, "key-hash", "the `hash` of an API key (printed by gateway hash-key) a caller must present as Authorization: Bearer <key>; repeatable")
	noAuth := fs.Bool("insecure-no-auth", false, "serve without credentials on a non-loopback address (never do this on a shared network)")
	maxWorkers := fs.Int("max-workers", 0, "the ceiling of worker processes; each hosts many executions and runs one at a time (default: four per CPU)")
	pool := fs.Int("pool-size", 0, "the old name of --max-workers")
	queue := fs.Int("queue", 0, "executions that may wait for room (default: the local backend's)")
	memory := fs.Int("memory-mb", 0, "memory limit of one run in MB (default 128)")
	timeout := fs.Int64("timeout-ms", 0, "run bound of a request that sets none, in ms (default 30000)")
	responseLimit := fs.Int("response-limit", 0, "largest result envelope or handle answer in bytes (default: just under 1 MiB)")
	readLimit := fs.Int64("read-limit", 0, "largest received WebSocket message in bytes (default 1 MiB)")
	maxCalls := fs.Int("max-calls-per-connection", 16384, "calls a caller may have made on one connection and not released; one more aborts the connection")
	wireMemory := fs.Int64("wire-memory-mb", 1024, "what every connection together may hold for its caller (calls outstanding, results not released) in MB; past it the connection holding the most is aborted")
	workerUser := fs.String("worker-user", "", "who worker processes run as when this runs as root: a user name or uid:gid (default 65534:65534, nobody)")
	noSeccomp := fs.Bool("disable-seccomp", false, "start worker processes without their system-call filter (a kernel without seccomp)")
	noNative := fs.Bool("disable-native-fetch", false, "forbid native fetch: worker processes get no sockets, a tenant session whose settings allow native fetch is refused, and runs of sessions that name no tenant get no network")
	fs.Bool("executor-server", false, "serve ExecutorApi on the local backend instead of a gateway configuration (this command)")
	drainTimeout := fs.Duration("drain-timeout", 10*time.Second, "on SIGINT or SIGTERM, how long executions in flight and retained executions may go on before the server closes them and exits")
	tracing := fs.Bool("tracing", false, "export OpenTelemetry traces over OTLP/HTTP, configured by the standard OTEL_* environment variables")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	adminToken, err := adminTokenFrom(*adminTokenEnv)
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 2
	}
	var keys *auth.APIKeys
	if len(hashes) > 0 {
		var err error
		if keys, err = executorserver.Keys(hashes); err != nil {
			fmt.Fprintln(stderr, "gateway serve:", err)
			return 2
		}
	} else if !*noAuth && !isLoopback(*listen) {
		fmt.Fprintf(stderr, "gateway serve: %s is not a loopback address; give --key-hash (see `gateway hash-key`) or, knowingly, --insecure-no-auth\n", *listen)
		return 2
	}

	if *maxWorkers == 0 {
		*maxWorkers = *pool
	}
	// The gateway names each session's tenant and its settings
	// (executorserver.TenantHeader): tenants hold worker processes of their own.
	tenants := executorserver.NewMemberTenants()
	pl, err := local.New(local.Options{
		MaxWorkers: *maxWorkers, QueueBound: *queue, MemoryLimitMB: *memory, DefaultTimeoutMs: *timeout, Logger: logger,
		WorkerUser: *workerUser, NoSeccomp: *noSeccomp, Shares: tenants.Share,
		Native: local.NativeOptions{Vetoed: *noNative}, NativeOf: tenants.Native,
	})
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	exec := executorserver.New(pl, tenants, logger, runningVersion())
	defer exec.Close()
	tr, err := telemetry.Start(telemetry.Settings{Enabled: *tracing, ServiceName: "codemode-executor-server", Version: runningVersion(), Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	defer tr.Shutdown(context.Background())
	api := exec.API(executorapi.ServerOptions{
		ResponseLimit: *responseLimit,
		Session: capnweb.Options{MaxMessageSize: *readLimit, MaxExports: *maxCalls,
			Memory: capnweb.NewMemoryBudget(*wireMemory << 20)},
		Tracing: tr,
	})
	defer api.Close()
	// As the gateway does (gateway.Options.MemoryLimit): the process's
	// soft memory limit is its base plus the wire's bound.
	memlimit.Set(*wireMemory<<20, 0, os.Getenv).Log(logger)

	// Signals drain from here on, before the listening line is printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The local backend's worker processes need descriptors the listener
	// must leave them.
	ln, _, err := listenMaybeTLS(*listen, nil, &connlimit.Options{Reserve: connlimit.DefaultReserve + config.DescriptorsPerWorker*pl.Options().MaxWorkers})
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	idle := time.Duration(config.DefaultIdleTimeout)
	adminSrv, err := serveAdmin(*admin, nil, exec.AdminHandler(adminToken), idle, stdout, "text")
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve: admin listener:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle(*path, executorserver.RequireKey(keys, api))
	// Tests and scripts read the addresses from these lines.
	fmt.Fprintf(stdout, "executor server listening on ws://%s%s\n", ln.Addr(), *path)
	logger.Info("executor server started", "addr", ln.Addr().String(), "path", *path, "auth", keys != nil)

	srv := newServer(mux, idle)
	if !serveUntil(ctx, srv, ln, logger) {
		return 1
	}
	// Draining: the listener closes at once, so that a replacement can
	// listen on the address; the gateways' open connections stay, and on
	// them new executions are refused (retryable, so a gateway sends them
	// to another member) while the executions in flight, the retained ones
	// and the calls on them finish, up to the drain bound. Only then are
	// the connections closed.
	logger.Info("stopping: draining", "timeout", *drainTimeout)
	srv.SetKeepAlivesEnabled(false)
	ln.Close()
	drainCtx, cancel := context.WithTimeout(context.Background(), *drainTimeout)
	defer cancel()
	exec.Drain(drainCtx)
	shutdown(logger, 5*time.Second, srv, adminSrv)
	return 0
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hashKey runs `gateway hash-key`: it reads an API key from standard input
// (or makes a new one with --new) and prints the hash to put in the
// configuration. The key itself is printed only when it was just made.
func hashKey(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("hash-key [--new] < KEY", `Read an API key on standard input and print the hash to put in a tenant's
keys (or in --key-hash of serve --executor-server). With --new it makes a
fresh random key instead and prints the key with its hash; only then is the
key printed.`)
	fresh := fs.Bool("new", false, "make a new random key and print it with its hash")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	var key string
	if *fresh {
		key = auth.NewAPIKey()
	} else {
		b, err := io.ReadAll(io.LimitReader(stdin, 4096))
		if err != nil {
			fmt.Fprintln(stderr, "gateway hash-key:", err)
			return 1
		}
		key = strings.TrimSpace(string(b))
	}
	h, err := auth.HashAPIKey(key)
	if err != nil {
		fmt.Fprintln(stderr, "gateway hash-key:", err)
		return 2
	}
	if *fresh {
		fmt.Fprintf(stdout, "key:  %s\nhash: %s\n", key, h)
	} else {
		fmt.Fprintln(stdout, h)
	}
	return 0
}

// adminTokenFrom reads the executor server's admin token from the
// environment variable name; none when name is empty.
func adminTokenFrom(name string) (string, error) {
	if name == "" {
		return "", nil
	}
	token := os.Getenv(name)
	if msg := config.AdminTokenProblem(name, token); msg != "" {
		return "", errors.New("--admin-token-env: " + msg)
	}
	return token, nil
}
