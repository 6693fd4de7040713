package webplatform

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package when a request goroutine outlives the tests:
// every run here ends, and its requests must end with it.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := requestGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintln(os.Stderr, "request goroutines outlived their runs:\n"+leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// requestGoroutines waits up to d for the goroutines this package starts
// to end, and returns the stacks of those still alive.
func requestGoroutines(d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 4<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "webplatform.(*platform).fetch") || strings.Contains(g, "webplatform.(*nativeClient)") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
