package protocol

import "sync"

// ConsoleCapture collects the console lines of one run under
// ConsoleCaptureLimit, charging each line LogLineWireSize. A line that
// leaves the total below the bound is kept whole. The first line that meets
// the bound (lands exactly on it or past it) is dropped whole, capture
// stops, and one warn line with ConsoleCaptureMessage takes the place of
// that line and of every later one; the run goes on. Safe for concurrent
// use. It is the one implementation of the console bound: the
// sandbox captures through it.
type ConsoleCapture struct {
	mu      sync.Mutex
	limit   int
	used    int
	stopped bool
	lines   []LogLine
}

// NewConsoleCapture returns a capture bounded by limit bytes; 0 means
// ConsoleCaptureLimit.
func NewConsoleCapture(limit int) *ConsoleCapture {
	if limit <= 0 {
		limit = ConsoleCaptureLimit
	}
	return &ConsoleCapture{limit: limit}
}

// Add captures one line and reports whether it was kept.
func (c *ConsoleCapture) Add(level LogLevel, text string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	l := LogLine{Level: level, Text: text}
	cost := LogLineWireSize(l)
	if c.used+cost >= c.limit {
		c.stopped = true
		c.lines = append(c.lines, LogLine{Level: LogLevelWarn, Text: ConsoleCaptureMessage})
		return false
	}
	c.used += cost
	c.lines = append(c.lines, l)
	return true
}

// Lines returns a copy of the captured lines, the warn line included once
// capture has stopped. It is never nil.
func (c *ConsoleCapture) Lines() []LogLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]LogLine{}, c.lines...)
}
