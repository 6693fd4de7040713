package testutil

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// Buffer collects what a child process or a logger writes while the test
// reads it: a bytes.Buffer safe for concurrent Write and String. When Echo
// is set, every write is also logged to it as it comes.
type Buffer struct {
	Echo testing.TB

	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	if b.Echo != nil {
		b.Echo.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
