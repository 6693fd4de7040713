package local

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// probeFile is where the probe tries to write; any user may create it
// where no filter stands in the way.
var probeFile = filepath.Join(os.TempDir(), "codemode-worker-probe")

// probeWorker tries, inside a worker, what a confined worker must not do,
// and one outbound connection to dial: each entry is the error the try met
// ("ok" when it was allowed), then the worker's uid.
func probeWorker(dial string) []any {
	res := func(err error) any {
		if err == nil {
			return "ok"
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return errno.Error()
		}
		return err.Error()
	}
	var out []any
	out = append(out, res(exec.Command("/bin/true").Run()))
	if c, err := net.DialTimeout("tcp", dial, 5*time.Second); err == nil {
		c.Close()
		out = append(out, "ok")
	} else {
		out = append(out, res(err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		ln.Close()
	}
	out = append(out, res(err))
	out = append(out, res(os.WriteFile(probeFile, []byte("x"), 0o600)))
	parent, _ := os.FindProcess(os.Getppid())
	out = append(out, res(parent.Signal(syscall.Signal(0))))
	return append(out, os.Getuid())
}

// TestWorkerIsConfined: a worker cannot start a program, write a file,
// signal another process or (when native fetch is vetoed) open a socket;
// under a root gateway it runs as nobody. With native fetch allowed it may
// connect out, still not listen.
func TestWorkerIsConfined(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the system-call filter is Linux's")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	os.Remove(probeFile)
	defer os.Remove(probeFile)
	uid := float64(os.Getuid())
	if uid == 0 {
		uid = 65534
	}
	const denied = "operation not permitted"
	for _, c := range []struct {
		name   string
		vetoed bool
		want   []any
	}{
		{"native vetoed", true, []any{denied, denied, denied, denied, denied, uid}},
		{"native allowed", false, []any{denied, "ok", denied, denied, denied, uid}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newScripted(t, Options{MaxWorkers: 1, Native: NativeOptions{Vetoed: c.vetoed}})
			res := runScript(t, e, "probe "+ln.Addr().String())
			var got []any
			if err := json.Unmarshal([]byte(res.ResultJSON), &got); err != nil {
				t.Fatalf("%s: %v", res.ResultJSON, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("the worker's tries met %v, want %v", got, c.want)
			}
			if _, err := os.Stat(probeFile); err == nil {
				t.Fatal("the worker wrote a file")
			}
		})
	}
}

// TestWorkerWithoutTheFilter: NoSeccomp leaves the worker its system calls
// (the probe's starting point, so the test above can fail).
func TestWorkerWithoutTheFilter(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the system-call filter is Linux's")
	}
	e := newScripted(t, Options{MaxWorkers: 1, NoSeccomp: true})
	res := runScript(t, e, "probe 127.0.0.1:1")
	var got []any
	if err := json.Unmarshal([]byte(res.ResultJSON), &got); err != nil {
		t.Fatalf("%s: %v", res.ResultJSON, err)
	}
	if got[0] != "ok" || got[2] != "ok" {
		t.Fatalf("without the filter the worker could not exec or listen: %v", got)
	}
	os.Remove(probeFile)
}
