package protocol

import (
	"strings"
	"sync"
	"testing"
)

func TestConsoleCaptureEmptyLinesFillTheBound(t *testing.T) {
	c := NewConsoleCapture(0)
	kept := 0
	for c.Add(LogLevelLog, "") {
		kept++
	}
	// An empty line costs 26 bytes: the total stays below the bound for
	// 65535/26 of them (65536 is no multiple of 26, so the next one passes
	// it).
	if want := (ConsoleCaptureLimit - 1) / 26; kept != want {
		t.Errorf("kept %d empty lines, want %d", kept, want)
	}
	if c.Used() != kept*26 || !c.Stopped() {
		t.Errorf("used %d, stopped %v", c.Used(), c.Stopped())
	}
	lines := c.Lines()
	if len(lines) != kept+1 || lines[kept] != (LogLine{LogLevelWarn, ConsoleCaptureMessage}) {
		t.Errorf("last line %#v of %d", lines[len(lines)-1], len(lines))
	}
	// Later lines, even small ones, are dropped and the warn line is not
	// repeated.
	if c.Add(LogLevelError, "x") || len(c.Lines()) != kept+1 {
		t.Error("capture went on after it stopped")
	}
}

func TestConsoleCaptureDropsTheLineThatMeetsTheBoundWhole(t *testing.T) {
	c := NewConsoleCapture(100)
	first := LogLine{LogLevelLog, strings.Repeat("a", 100-26-10)} // costs 90
	if !c.Add(first.Level, first.Text) || c.Used() != 90 {
		t.Fatalf("used %d", c.Used())
	}
	if c.Add(LogLevelLog, "0123456789") { // would cost 36: past the bound
		t.Error("a line past the bound was kept")
	}
	got := c.Lines()
	if len(got) != 2 || got[0] != first || got[1].Text != ConsoleCaptureMessage {
		t.Errorf("got %#v", got)
	}
	// The line that meets the bound exactly is dropped whole, and capture
	// stops; one byte less is kept.
	c = NewConsoleCapture(100)
	if c.Add(LogLevelLog, strings.Repeat("a", 74)) || c.Used() != 0 || !c.Stopped() {
		t.Errorf("a line landing on the bound: used %d stopped %v", c.Used(), c.Stopped())
	}
	if got := c.Lines(); len(got) != 1 || got[0] != (LogLine{LogLevelWarn, ConsoleCaptureMessage}) {
		t.Errorf("a line landing on the bound: lines %#v", got)
	}
	c = NewConsoleCapture(100)
	if !c.Add(LogLevelLog, strings.Repeat("a", 73)) || c.Used() != 99 || c.Stopped() {
		t.Errorf("one byte under the bound: used %d stopped %v", c.Used(), c.Stopped())
	}
	// Escapes are charged: a control character costs six bytes.
	c = NewConsoleCapture(0)
	c.Add(LogLevelLog, "\x01")
	if c.Used() != 26+6 {
		t.Errorf("used %d", c.Used())
	}
}

func TestConsoleCaptureConcurrent(t *testing.T) {
	c := NewConsoleCapture(0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 2000 {
				c.Add(LogLevelLog, "line")
			}
		})
	}
	wg.Wait()
	if c.Used() > ConsoleCaptureLimit || !c.Stopped() {
		t.Errorf("used %d, stopped %v", c.Used(), c.Stopped())
	}
	if n := strings.Count(strings.Join(func() []string {
		var s []string
		for _, l := range c.Lines() {
			s = append(s, l.Text)
		}
		return s
	}(), "\n"), ConsoleCaptureMessage); n != 1 {
		t.Errorf("warn line appears %d times", n)
	}
}

// Used is the bytes charged so far (the warn line is not charged); the
// tests read it, and Stopped.
func (c *ConsoleCapture) Used() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

// Stopped reports whether capture has stopped.
func (c *ConsoleCapture) Stopped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopped
}
