package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serve --listen and --admin-listen replace the file's listen and
// admin.listen: the example file's ports stay free, the gateway answers
// on the given addresses, and SIGINT drains it (it is caught from before
// the listening lines are printed).
func TestServeListensWhereTheFlagsSay(t *testing.T) {
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		defer outW.Close()
		done <- run([]string{"serve", "--config", "../../config.example.yaml", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, outW, io.Discard)
	}()
	lines := bufio.NewScanner(outR)
	listening := regexp.MustCompile(`^(admin|gateway) listening on (http://127\.0\.0\.1:[0-9]+)$`)
	urls := map[string]string{}
	for len(urls) < 2 && lines.Scan() {
		m := listening.FindStringSubmatch(lines.Text())
		if m == nil {
			t.Fatalf("stdout: %q", lines.Text())
		}
		urls[m[1]] = m[2]
	}
	go io.Copy(io.Discard, outR)
	if len(urls) != 2 {
		t.Fatalf("serve ended before listening: %d", <-done)
	}
	for _, u := range urls {
		if strings.HasSuffix(u, ":8080") || strings.HasSuffix(u, ":9090") {
			t.Fatalf("%s is the file's address, not the flag's", u)
		}
	}
	// /healthz is the admin listener's alone.
	for which, want := range map[string]int{"admin": http.StatusOK, "gateway": http.StatusNotFound} {
		res, err := http.Get(urls[which] + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != want {
			t.Errorf("%s /healthz: %d, want %d", which, res.StatusCode, want)
		}
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d after SIGINT, want 0", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop within a minute of SIGINT")
	}
}

// make run passes LISTEN and ADMIN on as serve's flags, and nothing when
// they are not set.
func TestMakeRunTakesOtherAddresses(t *testing.T) {
	for vars, want := range map[string]string{
		"": "./bin/gateway serve --config config.example.yaml",
		"LISTEN=127.0.0.1:9000 ADMIN=127.0.0.1:9001": "./bin/gateway serve --config config.example.yaml --listen 127.0.0.1:9000 --admin-listen 127.0.0.1:9001",
		"ADMIN=127.0.0.1:9001":                       "./bin/gateway serve --config config.example.yaml --admin-listen 127.0.0.1:9001",
	} {
		args := append([]string{"-n", "--no-print-directory", "-C", "../..", "run"}, strings.Fields(vars)...)
		cmd := exec.Command("make", args...)
		// Not the flags of a make that runs this test (make test).
		cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MAKELEVEL=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("make %s: %v", strings.Join(args, " "), err)
		}
		cmds := strings.Split(strings.TrimSpace(string(out)), "\n")
		if got := cmds[len(cmds)-1]; got != want {
			t.Errorf("make run %s runs:\n%s\nwant:\n%s", vars, got, want)
		}
	}
}
