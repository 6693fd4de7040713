//go:build !linux

package wire

import (
	"os"
	"time"
)

// Outside Linux there is no shared run table: the parent cannot see which
// run a worker is executing, so it has no backstop for Go code past a run's
// deadline, and a worker's death fails every run on it with WORKER_CRASHED.

type Table struct{}

func NewTable(int) (*Table, error)   { return nil, nil }
func OpenTable() *Table              { return nil }
func (t *Table) Slots() int          { return 0 }
func (t *Table) Write(int, Slot)     {}
func (t *Table) Read(int) Slot       { return Slot{} }
func (t *Table) Each(func(Slot))     {}
func (t *Table) CloseFile()          {}
func (t *Table) Release()            {}
func (t *Table) ExtraFile() *os.File { return nil }

var monoStart = time.Now()

func MonoNow() int64 { return int64(time.Since(monoStart)) }
