package capnweb

import (
	"fmt"
	"sync"

	"github.com/supolka/codemode-gateway/jsvalue"
)

// exportOverhead is what one export costs beyond the bytes of the message
// that made it: its table entry, its cell and what the call keeps while it
// is outstanding (measured near 600 bytes; rounded up).
const exportOverhead = 1024

// MemoryBudget bounds the bytes the sessions sharing it hold on behalf of
// their peers: the messages that pushed calls still outstanding, those
// calls' results until the peer releases them, and messages waiting to be
// written. Past the bound the session holding the most is aborted (with
// the reason MemoryBudgetText), so a peer that pushes calls and never pulls
// them costs its own connection, not the others'.
type MemoryBudget struct {
	limit int64

	mu   sync.Mutex
	used int64
	by   map[*Session]int64
}

// NewMemoryBudget makes a budget of limit bytes.
func NewMemoryBudget(limit int64) *MemoryBudget {
	return &MemoryBudget{limit: limit, by: map[*Session]int64{}}
}

// charge adds n bytes (negative: gives them back) to what s holds. When a
// charge takes the budget past its bound it returns the session that holds
// the most, to be aborted, and how much it holds.
func (b *MemoryBudget) charge(s *Session, n int64) (*Session, int64) {
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
	if n < 0 || b.used <= b.limit {
		return nil, 0
	}
	var top *Session
	var most int64
	for t, v := range b.by {
		if v > most {
			top, most = t, v
		}
	}
	return top, most
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
