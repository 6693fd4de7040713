//go:build !linux

package wire

import (
	"os"
	"time"
)

// Outside Linux there is no shared gate page: the parent cannot see which
// run a worker is executing, so it has no backstop for Go code past a run's
// deadline, and a worker's death fails every run on it with WORKER_CRASHED.

type Page struct{}

const PageFD = 3

func NewPage() (*Page, error) { return nil, nil }
func OpenPage() *Page         { return nil }

type Bound uint32

const (
	BoundTime Bound = iota
	BoundMemory
)

type Entry struct {
	Holder   uint64
	Deadline int64
	Bound    Bound
}

func (g *Page) Set(run uint64, deadline int64, b Bound) {}
func (g *Page) Read() Entry                             { return Entry{} }
func (g *Page) CloseFile()                              {}
func (g *Page) Release()                                {}
func (g *Page) ExtraFile() *os.File                     { return nil }

var monoStart = time.Now()

func MonoNow() int64 { return int64(time.Since(monoStart)) }
