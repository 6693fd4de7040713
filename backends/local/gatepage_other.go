//go:build !linux

package local

import (
	"os"
	"time"
)

// Outside Linux there is no shared gate page: the parent cannot see which
// run a worker is executing, so it has no backstop for Go code past a run's
// deadline, and a worker's death fails every run on it with WORKER_CRASHED.

type gatePage struct{}

const gatePageFD = 3

func newGatePage() (*gatePage, error) { return nil, nil }
func openGatePage() *gatePage         { return nil }

type gateBound uint32

const (
	boundTime gateBound = iota
	boundMemory
)

type gateEntry struct {
	holder   uint64
	deadline int64
	bound    gateBound
}

func (g *gatePage) set(run uint64, deadline int64, b gateBound) {}
func (g *gatePage) read() gateEntry                             { return gateEntry{} }
func (g *gatePage) closeFile()                                  {}
func (g *gatePage) release()                                    {}
func (g *gatePage) extraFile() *os.File                         { return nil }

var monoStart = time.Now()

func monoNow() int64 { return int64(time.Since(monoStart)) }
