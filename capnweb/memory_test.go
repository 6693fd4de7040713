package capnweb

import (
	"context"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/internal/testutil"
	"github.com/supolka/codemode-gateway/jsvalue"
)

// budgetAbort is MemoryBudgetText's whole text, any held figure.
func budgetAbort(limit int64) *regexp.Regexp {
	text := regexp.QuoteMeta(MemoryBudgetText(limit, 999999999))
	return regexp.MustCompile(`^\["abort",\["error","Error","` + strings.Replace(text, "999999999", `[0-9]+`, 1) + `"\]\]$`)
}

// TestMemoryBudgetAbortsTheConnectionThatHoldsIt: a peer that pushes calls
// and never pulls their results is aborted once the sessions' shared budget
// is spent; another session on the same budget keeps working, and what the
// aborted one held is given back.
func TestMemoryBudgetAbortsTheConnectionThatHoldsIt(t *testing.T) {
	const limit = 256 << 10
	budget := NewMemoryBudget(limit)
	big := strings.Repeat("x", 8<<10)
	main := Methods{"big": func(context.Context, []any) (any, error) { return big, nil }}

	// The greedy peer speaks raw frames.
	a, b := Pipe()
	greedy := NewSession(a, main, Options{Memory: budget})
	defer greedy.Close()
	// The other is a session pair on the same budget.
	c, d := Pipe()
	server := NewSession(c, main, Options{Memory: budget})
	defer server.Close()
	client := NewSession(d, nil, Options{})
	defer client.Close()

	ctx := ctx10(t)
	go func() {
		for i := 0; i < 200; i++ {
			if b.WriteMessage(ctx, []byte(`["push",["pipeline",0,["big"],[]]]`)) != nil {
				return
			}
		}
	}()
	var last string
	for {
		m, err := b.ReadMessage(ctx)
		if err != nil {
			break
		}
		last = string(m)
	}
	if !budgetAbort(limit).MatchString(last) {
		t.Fatalf("last frame = %s", last)
	}
	<-greedy.Done()
	if used := budget.Used(); used > 16<<10 {
		t.Fatalf("the budget still holds %d bytes after the greedy session ended", used)
	}
	for i := 0; i < 100; i++ {
		v, err := client.Main().Call(ctx, "big")
		if err != nil || v != big {
			t.Fatalf("call %d on the other session: %v", i, err)
		}
	}
	// A call's answer is held until the caller's release arrives, which it
	// sends after the answer: the last calls' answers may still be in it.
	testutil.WaitFor(t, 5*time.Second, func() bool { return budget.Used() <= 16<<10 },
		"the other session's settled calls to give the budget back")
}

// TestApproxSizeCountsStringsAndBytes: a result is charged what its text
// and data take.
func TestApproxSizeCountsStringsAndBytes(t *testing.T) {
	v := jsvalue.Object{{Key: "resultJson", Value: strings.Repeat("a", 1000)}, {Key: "logs", Value: []any{jsvalue.Object{{Key: "text", Value: strings.Repeat("b", 500)}}}},
		{Key: "data", Value: Bytes{Data: make([]byte, 2000)}}}
	if n := approxSize(v, 0); n < 3500 || n > 4000 {
		t.Fatalf("approxSize = %d, want the 3,500 bytes of text and data and a little", n)
	}
}

// forcedCollections is how many collections the process was asked for so
// far (runtime.GC, as the budget asks).
func forcedCollections() uint32 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.NumForcedGC
}

// Used is how many bytes the sessions hold now; the tests read it.
func (b *MemoryBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// TestMemoryBudgetCollectsWhatWasGivenBack: once a quarter of the bound
// was given back the budget asks for a collection (one at a time), so that
// what sessions let go of does not wait for the collector's pacing.
func TestMemoryBudgetCollectsWhatWasGivenBack(t *testing.T) {
	b := NewMemoryBudget(64 << 20)
	s := &Session{}
	b.charge(s, 32<<20)
	before := forcedCollections()
	b.charge(s, -(8 << 20)) // an eighth: no collection
	b.mu.Lock()
	asked := b.collecting
	b.mu.Unlock()
	if asked {
		t.Fatal("a collection was asked for after an eighth of the bound was given back")
	}
	b.charge(s, -(8 << 20)) // a quarter in all
	testutil.WaitFor(t, 10*time.Second, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return !b.collecting && forcedCollections() > before
	}, "the collection the budget asked for")
	if b.freed != 0 {
		t.Fatalf("%d bytes given back still counted after the collection", b.freed)
	}
}

// TestReadingSmallMessagesAsksForNoCollection: each read over a WebSocket
// reserves room for the largest message, and what the message read did not
// fill is given back; that room was never memory, so a session answering
// hundreds of small calls makes the budget ask for no collection. (It asked
// for one every few dozen reads, forty a second on a load of tool calls.)
func TestReadingSmallMessagesAsksForNoCollection(t *testing.T) {
	budget := NewMemoryBudget(64 << 20)
	main := Methods{"echo": func(_ context.Context, args []any) (any, error) { return args[0], nil }}
	url, _ := wsServer(t, main, Options{Memory: budget})
	ctx := ctx10(t)
	client := wsDial(t, ctx, url)
	before := forcedCollections()
	// 500 calls are 500 reads at least, each reserving over 3 MiB: as
	// garbage given back, 1.5 GiB, a collection for every 16 MiB.
	for i := range 500 {
		if v, err := client.Main().Call(ctx, "echo", float64(i)); err != nil || v != float64(i) {
			t.Fatalf("call %d: %v, %v", i, v, err)
		}
	}
	if n := forcedCollections() - before; n != 0 {
		t.Fatalf("500 small calls made the budget ask for %d collections", n)
	}
	budget.mu.Lock()
	freed := budget.freed
	budget.mu.Unlock()
	if freed > 1<<20 {
		t.Fatalf("500 small calls counted %d bytes as garbage given back", freed)
	}
}
