package sandbox

import (
	"container/heap"
	"math"
	"time"

	"github.com/dop251/goja"
)

// timer is one pending setTimeout or setInterval.
type timer struct {
	id       int64
	when     time.Time
	seq      uint64 // order of timers due at the same instant
	callback goja.Callable
	args     []goja.Value
	interval time.Duration // zero for setTimeout
	index    int
}

// timerQueue is the run's pending timers, earliest first.
type timerQueue struct {
	items  []*timer
	byID   map[int64]*timer
	nextID int64
	seq    uint64
}

func (q *timerQueue) Len() int { return len(q.items) }
func (q *timerQueue) Less(i, j int) bool {
	a, b := q.items[i], q.items[j]
	if a.when.Equal(b.when) {
		return a.seq < b.seq
	}
	return a.when.Before(b.when)
}
func (q *timerQueue) Swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index = i
	q.items[j].index = j
}
func (q *timerQueue) Push(x any) {
	t := x.(*timer)
	t.index = len(q.items)
	q.items = append(q.items, t)
}
func (q *timerQueue) Pop() any {
	t := q.items[len(q.items)-1]
	q.items[len(q.items)-1] = nil
	q.items = q.items[:len(q.items)-1]
	return t
}

func (q *timerQueue) peek() *timer {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0]
}

func (q *timerQueue) add(t *timer) {
	if q.byID == nil {
		q.byID = map[int64]*timer{}
	}
	q.seq++
	t.seq = q.seq
	q.byID[t.id] = t
	heap.Push(q, t)
}

func (q *timerQueue) remove(id int64) {
	t, ok := q.byID[id]
	if !ok {
		return
	}
	delete(q.byID, id)
	if t.index >= 0 {
		heap.Remove(q, t.index)
		t.index = -1
	}
}

// timerDelay reads a delay argument as the web platform does, in whole
// milliseconds: missing, NaN or negative is 0; past 2^31-1, where a 32-bit
// timer overflows, it fires almost at once, as in Node.
func timerDelay(v goja.Value) time.Duration {
	if v == nil || goja.IsUndefined(v) {
		return 0
	}
	f := v.ToFloat()
	if math.IsNaN(f) || f < 0 {
		return 0
	}
	if f > math.MaxInt32 {
		return time.Millisecond
	}
	return time.Duration(f) * time.Millisecond
}

// setTimer is setTimeout (repeat false) or setInterval (repeat true).
func (s *session) setTimer(repeat bool) func(goja.FunctionCall) goja.Value {
	return func(call goja.FunctionCall) goja.Value {
		cb, ok := goja.AssertFunction(call.Argument(0))
		if !ok {
			panic(s.vm.NewTypeError("The callback must be a function: this runtime does not compile strings."))
		}
		delay := timerDelay(call.Argument(1))
		var args []goja.Value
		if len(call.Arguments) > 2 {
			args = append(args, call.Arguments[2:]...)
		}
		s.timers.nextID++
		t := &timer{id: s.timers.nextID, when: time.Now().Add(delay), callback: cb, args: args}
		if repeat {
			t.interval = max(delay, time.Millisecond)
		}
		s.timers.add(t)
		return s.vm.ToValue(t.id)
	}
}

// clearTimer is clearTimeout and clearInterval (they share one id space).
func (s *session) clearTimer(call goja.FunctionCall) goja.Value {
	v := call.Argument(0)
	if goja.IsNumber(v) {
		s.timers.remove(v.ToInteger())
	}
	return goja.Undefined()
}

// fireTimers runs every timer that is due, earliest first, each as its own
// task. An exception a callback throws has nobody left to catch it, so it
// ends the run with its message, as an uncaught exception ends a process.
func (s *session) fireTimers() {
	now := time.Now()
	for s.live() {
		t := s.timers.peek()
		if t == nil || t.when.After(now) {
			return
		}
		heap.Pop(&s.timers)
		t.index = -1
		if t.interval > 0 {
			t.when = now.Add(t.interval)
			s.timers.seq++
			t.seq = s.timers.seq
			heap.Push(&s.timers, t)
		} else {
			delete(s.timers.byID, t.id)
		}
		if _, err := t.callback(goja.Undefined(), t.args...); err != nil {
			if s.granted && isException(err) {
				// A retained session has nobody left to report a timer's
				// exception to; it keeps serving.
				continue
			}
			s.stop(err)
			return
		}
	}
}
