package capnweb

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// exportOverhead is what one export costs beyond the bytes of the message
// that made it: its table entry, its cell and what the call keeps while it
// is outstanding (measured near 600 bytes; rounded up).
const exportOverhead = 1024

// decodeFactor is what a received message costs while it is read and
// decoded, in multiples of its size: the bytes read, the strings decoded
// from them, and the copy a handler makes to pass them on (an execute's
// code framed for a worker process).
const decodeFactor = 3

// callFactor is what a pushed call's message costs, in multiples of its
// size, beyond the message itself while the call runs: its decoded
// arguments, and what the handler makes of them (a job written to a
// worker) until it returns.
const callFactor = 2

// stallAfter is how long a reader waits for room with nothing given back
// before the budget is taken to be stuck (readers waiting on room that
// only their own peers' releases, or their peers' departures, would give)
// and the session holding the most is aborted.
const stallAfter = 2 * time.Second

// MemoryBudget bounds the bytes the sessions sharing it hold on behalf of
// their peers: the messages being read and decoded, the messages that
// pushed calls still outstanding (and their decoded arguments while the
// calls run), those calls' results until the peer releases them, and
// messages waiting to be written. A session reads its next message only
// when the budget has room for the largest one (backpressure: its peer's
// writes wait in the socket). Past the bound, or when readers have waited
// stallAfter with nothing given back, the session holding the most is
// aborted (with the reason MemoryBudgetText), so a peer that pushes calls
// and never pulls them costs its own connection, not the others'.
type MemoryBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
	by   map[*Session]int64
	// gaveBack, made by the first reader that waits for room, is closed
	// when bytes are given back, to wake the readers waiting; nil when none
	// waits, so that a give-back nobody waits for allocates nothing.
	gaveBack chan struct{}
	// freed is what was given back since the last collection the budget
	// asked for; collecting says one is under way.
	freed      int64
	collecting bool
}

// NewMemoryBudget makes a budget of limit bytes.
func NewMemoryBudget(limit int64) *MemoryBudget {
	return &MemoryBudget{limit: limit, by: map[*Session]int64{}}
}

// Held is what the sessions sharing the budget hold now.
func (b *MemoryBudget) Held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// reserve charges n bytes to s once the budget has room for them, waiting
// until then or until s ends (false). A session alone on the budget always
// has room.
func (b *MemoryBudget) reserve(s *Session, n int64) bool {
	// Most reads find room at once: the stall timer is made only for a
	// reader that has to wait.
	var stall *time.Timer
	for {
		b.mu.Lock()
		if b.used+n <= b.limit || b.used == b.by[s] {
			b.used += n
			b.by[s] += n
			b.mu.Unlock()
			if stall != nil {
				stall.Stop()
			}
			return true
		}
		if b.gaveBack == nil {
			b.gaveBack = make(chan struct{})
		}
		wake := b.gaveBack
		b.mu.Unlock()
		if stall == nil {
			stall = time.NewTimer(stallAfter)
		}
		select {
		case <-wake:
			stall.Reset(stallAfter)
		case <-s.done:
			stall.Stop()
			return false
		case <-stall.C:
			b.abortStuck()
			stall.Reset(stallAfter)
		}
	}
}

// abortStuck aborts the session holding the most, for a budget that
// stays spent.
func (b *MemoryBudget) abortStuck() {
	b.mu.Lock()
	top, most := b.topLocked()
	b.mu.Unlock()
	if top != nil {
		top.protocolError(&ProtocolError{Reason: MemoryBudgetText(b.limit, most)})
	}
}

// topLocked is the session holding the most, and how much. Caller holds
// b.mu.
func (b *MemoryBudget) topLocked() (*Session, int64) {
	var top *Session
	var most int64
	for t, v := range b.by {
		if v > most {
			top, most = t, v
		}
	}
	return top, most
}

// charge adds n bytes (negative: gives them back, garbage now) to what s
// holds. When a charge takes the budget past its bound it returns the
// session that holds the most, to be aborted, and how much it holds.
func (b *MemoryBudget) charge(s *Session, n int64) (*Session, int64) {
	return b.change(s, n, true)
}

// unreserve gives back n bytes reserved for a read that the message read
// did not fill: room, never memory, so nothing for a collection to find.
// Counted as garbage, each small message's unused reservation (three times
// the largest message) asked for a collection every few dozen reads: on a
// load of tool calls the gateway collected forty times a second.
func (b *MemoryBudget) unreserve(s *Session, n int64) {
	b.change(s, -n, false)
}

// change is charge, and for bytes given back, garbage says whether they
// count toward the next collection.
func (b *MemoryBudget) change(s *Session, n int64, garbage bool) (*Session, int64) {
	if b == nil || n == 0 {
		return nil, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n
	if v := b.by[s] + n; v > 0 {
		b.by[s] = v
	} else {
		delete(b.by, s)
	}
	if n < 0 {
		if b.gaveBack != nil {
			close(b.gaveBack)
			b.gaveBack = nil
		}
		if garbage {
			b.freed -= n
			b.collectLocked()
		}
	}
	if n < 0 || b.used <= b.limit {
		return nil, 0
	}
	return b.topLocked()
}

// collectLocked asks for a collection once a quarter of the bound was
// given back since the last: what the sessions let go of is garbage of the
// size of the bound itself, which the collector, left to its pacing, lets
// the heap grow by as much again before it reclaims. b.mu is held.
func (b *MemoryBudget) collectLocked() {
	if b.collecting || b.freed < b.limit/4 {
		return
	}
	b.collecting, b.freed = true, 0
	go func() {
		runtime.GC()
		b.mu.Lock()
		b.collecting = false
		b.mu.Unlock()
	}()
}

// MemoryBudgetText is the abort reason of a session ended because the
// budget was spent and it held the most of it.
func MemoryBudgetText(limit, held int64) string {
	return fmt.Sprintf("this connection holds %d bytes of calls and results not yet released, the most of any while the server's bound of %d bytes on them is spent; pull and release results before making more calls", held, limit)
}

// OutstandingCallsText is the abort reason of a session whose peer pushed
// more calls than Options.MaxExports without releasing them.
func OutstandingCallsText(limit int) string {
	return fmt.Sprintf("too many calls outstanding on this connection: at most %d may be unreleased at once; pull and release the results of earlier calls before making more", limit)
}

// account charges n bytes to the session's budget. Caller holds s.mu; a
// returned action aborts the session picked to give memory back and runs
// after s.mu is released.
func (s *Session) account(n int64) func() {
	if s.opts.Memory == nil || s.ended {
		return nil
	}
	s.held += n
	victim, held := s.opts.Memory.charge(s, n)
	if victim == nil {
		return nil
	}
	limit := s.opts.Memory.limit
	return func() { victim.protocolError(&ProtocolError{Reason: MemoryBudgetText(limit, held)}) }
}

// accountReserved is account for bytes the reader reserved for the
// message being handled: as much of n as is reserved moves to what the
// session holds, and only the rest is charged anew. Caller holds s.mu.
func (s *Session) accountReserved(n int64) func() {
	if s.opts.Memory == nil || s.ended {
		return nil
	}
	rest := s.takeReserved(n)
	s.held += n - rest
	return s.account(rest)
}

// takeReserved takes what it can of n bytes from the reader's reservation
// and returns the rest, which is not charged yet. Caller holds s.mu.
func (s *Session) takeReserved(n int64) (rest int64) {
	m := min(n, s.reserved)
	s.reserved -= m
	return n - m
}

// chargeWhile charges n bytes (a call's decoded arguments) from the
// reader's reservation until done is called, even past the session's end:
// they are held until the call lets them go. Caller holds s.mu.
func (s *Session) chargeWhile(n int64) (done func()) {
	b := s.opts.Memory
	if b == nil || s.ended {
		return func() {}
	}
	if victim, held := b.charge(s, s.takeReserved(n)); victim != nil {
		go victim.protocolError(&ProtocolError{Reason: MemoryBudgetText(b.limit, held)})
	}
	var once sync.Once
	return func() {
		once.Do(func() { b.charge(s, -n) })
	}
}

// reserveRead reserves room for the message about to be read (at most
// MaxMessageSize, decoded), waiting while the budget has none: the peer's
// next message waits in the socket. False when the session ended first.
func (s *Session) reserveRead() bool {
	b := s.opts.Memory
	if b == nil {
		return true
	}
	n := decodeFactor*s.opts.MaxMessageSize + exportOverhead
	if !b.reserve(s, n) {
		return false
	}
	s.mu.Lock()
	s.reserved += n
	s.mu.Unlock()
	return true
}

// returnReserved gives back what the reader reserved and the message it
// read did not keep.
func (s *Session) returnReserved() {
	if s.opts.Memory == nil {
		return
	}
	s.mu.Lock()
	n := s.reserved
	s.reserved = 0
	s.mu.Unlock()
	s.opts.Memory.unreserve(s, n)
}

// releaseAll gives back everything the session holds; at its end. Caller
// holds s.mu.
func (s *Session) releaseAll() {
	if s.opts.Memory != nil && s.held != 0 {
		s.opts.Memory.charge(s, -s.held)
		s.held = 0
	}
}

// approxSize estimates the bytes a settled value holds: what its strings
// and byte arrays take, and a little for everything else. It bounds the
// walk's depth as the encoder does.
func approxSize(v any, depth int) int64 {
	if depth > MaxDepth+8 {
		return 0
	}
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 16
	case []byte:
		return int64(len(x)) + 24
	case Bytes:
		return int64(len(x.Data)) + 32
	case *Bytes:
		if x != nil {
			return int64(len(x.Data)) + 32
		}
	case []any:
		n := int64(24)
		for _, el := range x {
			n += approxSize(el, depth+1)
		}
		return n
	case map[string]any:
		n := int64(48)
		for k, el := range x {
			n += int64(len(k)) + 16 + approxSize(el, depth+1)
		}
		return n
	case jsvalue.Object:
		n := int64(24)
		for _, f := range x {
			n += int64(len(f.Key)) + 16 + approxSize(f.Value, depth+1)
		}
		return n
	case *Error:
		if x != nil {
			return int64(len(x.Name)+len(x.Message)+len(x.Stack)) + 64 + approxSize(x.Props, depth+1)
		}
	case error:
		return int64(len(x.Error())) + 32
	}
	return 16
}
