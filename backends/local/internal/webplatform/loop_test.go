package webplatform

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/supolka/codemode-gateway/protocol"
)

// testLoop is a minimal event loop in the shape of the sandbox's session: a
// task queue the runtime's goroutine drains, host-wait accounting, a run
// context, and setTimeout/clearTimeout on Go timers.
type testLoop struct {
	vm     *goja.Runtime
	tasks  chan func()
	done   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc

	// Touched on the loop goroutine only.
	waits    int // host waits open now
	maxWaits int // most host waits open at once
	opened   int // host waits ever opened
	guest    int // guest work open now
	guestRan int // guest work ever opened
	// Work off the loop, from any goroutine.
	offLoop    atomic.Int32 // open now
	offLoopRan atomic.Int32 // ever started
	stopErr    error
	timerID    int64
	timers     map[int64]*time.Timer

	mu     sync.Mutex
	closed bool
}

func newTestLoop() *testLoop {
	ctx, cancel := context.WithCancel(context.Background())
	return &testLoop{tasks: make(chan func(), 16), done: make(chan struct{}), ctx: ctx, cancel: cancel, timers: map[int64]*time.Timer{}}
}

func (l *testLoop) Post(fn func()) {
	select {
	case l.tasks <- fn:
	case <-l.done:
	}
}

func (l *testLoop) HostWait() func() {
	l.waits++
	l.opened++
	l.maxWaits = max(l.maxWaits, l.waits)
	return closeOnce("host wait", &l.waits)
}

func (l *testLoop) OffLoop() func() {
	l.offLoop.Add(1)
	l.offLoopRan.Add(1)
	var once sync.Once
	return func() { once.Do(func() { l.offLoop.Add(-1) }) }
}

func (l *testLoop) GuestWork() func() {
	l.guest++
	l.guestRan++
	return closeOnce("guest work", &l.guest)
}

// closeOnce returns the done function of one open wait counted in open: it
// takes the wait off, and panics when called twice.
func closeOnce(what string, open *int) func() {
	closed := false
	return func() {
		if closed {
			panic(what + " closed twice")
		}
		closed = true
		*open--
	}
}

func (l *testLoop) Context() context.Context { return l.ctx }
func (l *testLoop) Stop(err error)           { l.stopErr = err }

func (l *testLoop) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.cancel()
		close(l.done)
		for _, t := range l.timers {
			t.Stop()
		}
	}
}

// installTimers gives the runtime setTimeout and clearTimeout.
func (l *testLoop) installTimers() {
	_ = l.vm.Set("setTimeout", func(c goja.FunctionCall) goja.Value {
		cb, ok := goja.AssertFunction(c.Argument(0))
		if !ok {
			panic(l.vm.NewTypeError("callback"))
		}
		d := time.Duration(c.Argument(1).ToFloat() * float64(time.Millisecond))
		l.timerID++
		id := l.timerID
		l.timers[id] = time.AfterFunc(d, func() {
			l.Post(func() {
				if _, ok := l.timers[id]; !ok {
					return
				}
				delete(l.timers, id)
				if _, err := cb(goja.Undefined()); err != nil {
					l.stopErr = err
				}
			})
		})
		return l.vm.ToValue(id)
	})
	_ = l.vm.Set("clearTimeout", func(c goja.FunctionCall) goja.Value {
		id := c.Argument(0).ToInteger()
		if t, ok := l.timers[id]; ok {
			t.Stop()
			delete(l.timers, id)
		}
		return goja.Undefined()
	})
}

// outcome is how a test program settled.
type outcome struct {
	value string // JSON of the fulfilled value
	err   string // "Name: message" of the rejection
}

func (o outcome) String() string {
	if o.err != "" {
		return "rejected " + o.err
	}
	return o.value
}

// runProgram installs the platform with cfg in a fresh runtime and runs
// body as the body of an async function, until it settles (or 10 s pass).
func runProgram(t testing.TB, cfg Config, body string) (outcome, *testLoop) {
	t.Helper()
	l := newTestLoop()
	defer l.close()
	l.vm = goja.New()
	l.vm.SetParserOptions(parser.WithDisableSourceMaps)
	l.vm.SetMaxCallStackSize(1000)
	l.installTimers()
	if _, err := Install(l.vm, l, cfg); err != nil {
		t.Fatalf("Install: %v", err)
	}
	v, err := l.vm.RunString("(async () => {\n" + body + "\n})()")
	if err != nil {
		t.Fatalf("program did not start: %v", err)
	}
	p := v.Export().(*goja.Promise)
	deadline := time.After(10 * time.Second)
	for p.State() == goja.PromiseStatePending {
		select {
		case task := <-l.tasks:
			task()
		case <-deadline:
			t.Fatalf("program did not settle in 10 s")
		}
	}
	if l.stopErr != nil {
		t.Fatalf("loop stopped: %v", l.stopErr)
	}
	if p.State() == goja.PromiseStateRejected {
		r := p.Result()
		desc, _ := l.vm.RunString("(e) => (e && typeof e === 'object' ? String(e.name) + ': ' + String(e.message) : 'thrown ' + String(e))")
		f, _ := goja.AssertFunction(desc)
		s, err := f(goja.Undefined(), r)
		if err != nil {
			t.Fatalf("describing rejection: %v", err)
		}
		return outcome{err: s.String()}, l
	}
	stringify, _ := goja.AssertFunction(l.vm.Get("JSON").ToObject(l.vm).Get("stringify"))
	s, err := stringify(goja.Undefined(), p.Result())
	if err != nil {
		t.Fatalf("stringify: %v", err)
	}
	if goja.IsUndefined(s) {
		return outcome{value: "undefined"}, l
	}
	return outcome{value: s.String()}, l
}

// disabled is the Config of most tests: no network.
var disabled = Config{Mode: protocol.OutboundDisabled}

// caseTable runs small programs and compares their outcome.
type programCase struct {
	name string
	body string
	want string
}

func runCases(t *testing.T, cfg Config, cases []programCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := runProgram(t, cfg, c.body)
			if got.String() != c.want {
				t.Errorf("program:\n%s\ngot:  %s\nwant: %s", c.body, got, c.want)
			}
		})
	}
}

func rejected(name, message string) string { return fmt.Sprintf("rejected %s: %s", name, message) }
