package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
)

// reload runs `gateway reload`: it asks a running gateway, through its
// admin listener, to re-read its configuration file (as SIGHUP does). The
// listener is --admin, else admin.listen of --config; the token's variable
// is --token-env, else, with the listener from the file, its
// admin.tokenEnv.
func reload(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reload [--config FILE | --admin ADDRESS] [flags]", `Make a running gateway re-read its configuration file, as SIGHUP does,
through its admin listener: --admin, else admin.listen of --config. The
bearer token is read from the variable --token-env names, else from
admin.tokenEnv of --config. The exit status is 0 once the gateway reports
the new configuration applied.`)
	cfgPath := fs.String("config", "config.yaml", "the configuration file of the gateway to reload: its admin.listen is the address")
	admin := fs.String("admin", "", "the gateway's admin listener, host:port or a URL; overrides the configuration's")
	tokenEnv := fs.String("token-env", "", "the environment variable holding the admin listener's bearer token (default: admin.tokenEnv of --config, unless --admin is given)")
	caFile := fs.String("ca", "", "a PEM file of certificates to trust for an https admin listener, beside the system's (a self-signed admin.tls certificate, say)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	client, err := reloadClient(*caFile)
	if err != nil {
		fmt.Fprintln(stderr, "gateway reload:", err)
		return 2
	}
	target, fileTokenEnv, err := reloadTarget(*admin, *cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, "gateway reload:", err)
		return 2
	}
	tokenFrom := "--token-env"
	if *tokenEnv == "" && fileTokenEnv != "" {
		*tokenEnv, tokenFrom = fileTokenEnv, "admin.tokenEnv of "+*cfgPath
	}
	// No body and no content type: the admin listener refuses the body
	// types a browser's form could send.
	req, err := http.NewRequest(http.MethodPost, target, nil)
	if err != nil {
		fmt.Fprintln(stderr, "gateway reload:", err)
		return 2
	}
	if *tokenEnv != "" {
		token := os.Getenv(*tokenEnv)
		if token == "" {
			fmt.Fprintf(stderr, "gateway reload: environment variable %s (%s) is not set\n", *tokenEnv, tokenFrom)
			return 2
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
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

// reloadClient is the HTTP client `gateway reload` posts with: the
// system's roots, and those of caFile when one is named.
func reloadClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return http.DefaultClient, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca: %s holds no PEM certificate", caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t, Timeout: time.Minute}, nil
}

// reloadTarget is where `gateway reload` posts: the admin address given,
// or the one the configuration file names, and then the file's
// admin.tokenEnv too. An address without a scheme is http (https when the
// file gives the admin listener TLS); a wildcard host is reached on
// loopback.
func reloadTarget(admin, cfgPath string) (target, tokenEnv string, err error) {
	scheme := "http"
	if admin == "" {
		a, err := config.ReadAdmin(cfgPath)
		if err != nil {
			return "", "", err
		}
		if a.Listen == "" {
			return "", "", fmt.Errorf("%s sets no admin.listen, so its gateway has no admin listener to ask (unless started with --admin-listen: give that address as --admin); send it SIGHUP instead", cfgPath)
		}
		admin, tokenEnv = a.Listen, a.TokenEnv
		if a.TLS != nil {
			scheme = "https"
		}
	}
	if !strings.Contains(admin, "://") {
		host, port, err := net.SplitHostPort(admin)
		if err != nil {
			return "", "", fmt.Errorf("admin address %q is neither host:port nor a URL", admin)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = "127.0.0.1"
			if ip != nil && ip.To4() == nil {
				host = "::1"
			}
		}
		admin = scheme + "://" + net.JoinHostPort(host, port)
	}
	return strings.TrimRight(admin, "/") + "/reload", tokenEnv, nil
}
