package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
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
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/internal/telemetry"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/capnweb"
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
	fs := flag.NewFlagSet("gateway serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "the configuration file")
	listen := fs.String("listen", "", "override the configuration's listen address (port 0 picks a free one)")
	admin := fs.String("admin-listen", "", "override the configuration's admin listen address")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*cfgPath)
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
	gw, err := gateway.New(cfg, gateway.Options{Logger: logger, ConfigPath: *cfgPath, Override: override, Version: runningVersion()})
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
	ln, scheme, err := listenMaybeTLS(cfg.Listen, gw.TLSConfig())
	if err != nil {
		logger.Error("gateway serve failed", "error", err)
		return 1
	}
	srv := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	var adminSrv *http.Server
	if cfg.Admin.Listen != "" {
		aln, ascheme, err := listenMaybeTLS(cfg.Admin.Listen, gw.AdminTLSConfig())
		if err != nil {
			logger.Error("gateway serve failed: admin listener", "error", err)
			return 1
		}
		adminSrv = &http.Server{Handler: gw.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
		go adminSrv.Serve(aln)
		announce(stdout, cfg.Log.Format, "admin listening on", fmt.Sprintf("%s://%s", ascheme, aln.Addr()))
	}
	// Tests and scripts read the addresses from these lines.
	announce(stdout, cfg.Log.Format, "gateway listening on", fmt.Sprintf("%s://%s", scheme, ln.Addr()))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		logger.Error("gateway serve failed", "error", err)
		return 1
	case <-ctx.Done():
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
	shutdown, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	srv.Shutdown(shutdown)
	if adminSrv != nil {
		adminSrv.Shutdown(shutdown)
	}
	logger.Info("stopped")
	return 0
}

// reload runs `gateway reload`: it asks a running gateway, through its
// admin listener, to re-read its configuration file (as SIGHUP does).
func reload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin", "http://127.0.0.1:9090", "the gateway's admin listener")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	resp, err := http.Post(strings.TrimRight(*admin, "/")+"/reload", "text/plain", nil)
	if err != nil {
		fmt.Fprintln(stderr, "gateway reload:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "gateway reload: refused; the running configuration stays:\n%s", body)
		return 1
	}
	fmt.Fprint(stdout, string(body))
	return 0
}

// listenMaybeTLS opens a listener, with TLS when tc is not nil.
func listenMaybeTLS(addr string, tc *tls.Config) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || tc == nil {
		return ln, "http", err
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
	fs := flag.NewFlagSet("gateway check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "the configuration file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if _, err := config.Load(*cfgPath); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: ok\n", *cfgPath)
	return 0
}

// serveUntilSignal serves h on ln until SIGINT or SIGTERM, then shuts down,
// giving open requests up to ten seconds.
func serveUntilSignal(ln net.Listener, h http.Handler, stderr io.Writer) int {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	return 0
}

// serveExecutor runs `gateway serve --executor-server`: the contract's
// ExecutorApi on one WebSocket route, served by the embedded local backend.
// It is what a gateway's remote backend group connects to.
func serveExecutor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway serve --executor-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8787", "address to listen on (port 0 picks a free one)")
	path := fs.String("path", "/", "the route that serves ExecutorApi")
	var hashes keyHashes
	fs.Var(&hashes, "key-hash", "an API key hash (from `gateway hash-key`) a caller must present as `Authorization: Bearer <key>`; repeatable")
	noAuth := fs.Bool("insecure-no-auth", false, "serve without credentials on a non-loopback address (never do this on a shared network)")
	maxWorkers := fs.Int("max-workers", 0, "the ceiling of worker processes; each hosts many executions and runs one at a time (default: four per CPU)")
	pool := fs.Int("pool-size", 0, "the old name of --max-workers")
	queue := fs.Int("queue", 0, "executions that may wait for room (default: the local backend's)")
	memory := fs.Int("memory-mb", 0, "memory limit of one run in MB (default 128)")
	timeout := fs.Int64("timeout-ms", 0, "run bound of a request that sets none, in ms (default 30000)")
	responseLimit := fs.Int("response-limit", 0, "largest result envelope or handle answer in bytes (default: just under 1 MiB)")
	readLimit := fs.Int64("read-limit", 0, "largest received WebSocket message in bytes (default 1 MiB)")
	fs.Bool("executor-server", true, "serve ExecutorApi directly (the only mode until the gateway config lands)")
	tracing := fs.Bool("tracing", false, "export OpenTelemetry traces over OTLP/HTTP, configured by the standard OTEL_* environment variables")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))

	var keys *auth.APIKeys
	if len(hashes) > 0 {
		list := make([]auth.APIKey, len(hashes))
		for i, h := range hashes {
			list[i] = auth.APIKey{Name: fmt.Sprintf("key-%d", i+1), Tenant: "executor-server", Hash: h}
		}
		var err error
		if keys, err = auth.NewAPIKeys(list); err != nil {
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
	exec, err := local.New(local.Options{
		MaxWorkers: *maxWorkers, QueueBound: *queue, MemoryLimitMB: *memory, DefaultTimeoutMs: *timeout, Logger: logger,
		// Every caller of an executor server is one tenant to it: the
		// gateway in front applies the tenants' shares.
		Shares: func(string) local.Share { return local.Share{CPUSlots: math.MaxInt} },
	})
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	defer exec.Close()
	tr, err := telemetry.Start(telemetry.Settings{Enabled: *tracing, ServiceName: "codemode-executor-server", Version: runningVersion()})
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	defer tr.Shutdown(context.Background())
	api := executorapi.NewServer(exec, executorapi.ServerOptions{
		ResponseLimit: *responseLimit,
		Session:       capnweb.Options{MaxMessageSize: *readLimit},
		Tracing:       tr,
	})
	defer api.Close()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(stderr, "gateway serve:", err)
		return 1
	}
	mux := http.NewServeMux()
	mux.Handle(*path, requireKey(keys, api))
	// Tests and scripts read the address from this line.
	fmt.Fprintf(stdout, "executor server listening on ws://%s%s\n", ln.Addr(), *path)
	logger.Info("executor server started", "addr", ln.Addr().String(), "path", *path, "auth", keys != nil)
	return serveUntilSignal(ln, mux, stderr)
}

// requireKey answers 401 before any upgrade unless the request carries one
// of keys (nil: no credential needed).
func requireKey(keys *auth.APIKeys, next http.Handler) http.Handler {
	if keys == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, err := auth.FromRequest(r)
		if err == nil {
			_, err = keys.Authenticate(r.Context(), cred.Token)
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="codemode-executor"`)
			http.Error(w, "a valid bearer credential is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
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
	fs := flag.NewFlagSet("gateway hash-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fresh := fs.Bool("new", false, "make a new random key and print it with its hash")
	if err := fs.Parse(args); err != nil {
		return 2
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
