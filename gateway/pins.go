package gateway

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/supolka/codemode-gateway/protocol"
)

// pin says where a granted executionId's handles live and whose they are.
type pin struct {
	member *member
	tenant string
	inner  string // the backend's own executionId
}

// pins is the bounded table of granted executionIds. Past its size the least
// recently used pin is evicted, and past a tenant's handle bound that
// tenant's least recently used one; either way the handles are closed on
// their backend, since nobody could reach them any more.
type pins struct {
	mu       sync.Mutex
	all      *simplelru.LRU[string, pin]
	byTenant map[string]*simplelru.LRU[string, struct{}]
	evicted  []evictedPin // filled under mu, closed after it is released
	dropping bool         // a removal that is not an eviction
	// perMember counts the pins naming each member, so that a removed
	// member learns when its last pin goes (released) without a scan.
	perMember map[*member]*memberPins

	hits, evictions atomic.Int64
	misses          map[string]int64 // by the asking tenant; guarded by mu
}

type evictedPin struct {
	id string
	p  pin
}

// memberPins are the pins naming one member, and the channel a waiter for
// their end reads (nil while nobody waits).
type memberPins struct {
	n    int
	gone chan struct{}
}

func newPins(size int) *pins {
	ps := &pins{byTenant: map[string]*simplelru.LRU[string, struct{}]{}, perMember: map[*member]*memberPins{}, misses: map[string]int64{}}
	// simplelru calls this for every removal from the table, whatever the
	// reason; it is the one place that keeps the tenant lists and the
	// member counts in step.
	ps.all, _ = simplelru.NewLRU(size, func(id string, p pin) {
		if t := ps.byTenant[p.tenant]; t != nil {
			t.Remove(id)
		}
		if !ps.dropping {
			// The close that follows is a call on the member, counted
			// before its pin goes so that a retiring member waits for it.
			p.member.handleCalls.Add(1)
			ps.evicted = append(ps.evicted, evictedPin{id, p})
		}
		ps.unpinned(p.member)
	})
	return ps
}

// add pins id to m for tenant, within the tenant's bound of maxHandles.
func (ps *pins) add(id string, p pin, maxHandles int) {
	tenant := p.tenant
	ps.mu.Lock()
	t := ps.byTenant[tenant]
	if t == nil {
		t, _ = simplelru.NewLRU[string, struct{}](max(maxHandles, 1), nil)
		ps.byTenant[tenant] = t
	}
	for t.Len() >= max(maxHandles, 1) {
		// The tenant is at its bound: its least recently used pin goes.
		oldest, _, _ := t.GetOldest()
		if !ps.all.Remove(oldest) {
			t.Remove(oldest)
		}
	}
	// Counted before the Add, whose eviction must not take the member's
	// count through zero on its way up.
	ps.pinned(p.member)
	if old, had := ps.all.Peek(id); had {
		ps.unpinned(old.member) // replaced in place: no removal to count it
	}
	ps.all.Add(id, p)
	t.Add(id, struct{}{})
	evicted := ps.evicted
	ps.evicted = nil
	ps.mu.Unlock()
	ps.close(evicted)
}

// lookup returns the pin of id when tenant owns it. Any other tenant, an
// unknown id and an evicted id read the same: not found, so nothing leaks
// whether an id exists.
func (ps *pins) lookup(id, tenant string) (pin, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.all.Peek(id)
	if !ok || p.tenant != tenant {
		ps.misses[tenant]++
		return pin{}, false
	}
	ps.all.Get(id) // only the owner's use refreshes it
	ps.byTenant[tenant].Get(id)
	ps.hits.Add(1)
	return p, true
}

// drop forgets id without closing anything: its handles are already gone.
func (ps *pins) drop(id string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.dropping = true
	ps.all.Remove(id)
	ps.dropping = false
}

// closeAll closes every pinned execution on its backend and waits for the
// closes (each bounded), for a replica that is going away.
func (ps *pins) closeAll() int {
	ps.mu.Lock()
	var all []evictedPin
	for _, id := range ps.all.Keys() {
		p, _ := ps.all.Peek(id)
		all = append(all, evictedPin{id, p})
	}
	ps.dropping = true
	ps.all.Purge()
	ps.dropping = false
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			e.p.member.execFor(e.p.tenant).CloseHandles(ctx, e.p.inner)
		}()
	}
	wg.Wait()
	return len(all)
}

// holds reports whether a pin names m.
func (ps *pins) holds(m *member) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.perMember[m] != nil
}

// released is closed once no pin names m: at once when none does.
func (ps *pins) released(m *member) <-chan struct{} {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	c := ps.perMember[m]
	if c == nil {
		return closedChan
	}
	if c.gone == nil {
		c.gone = make(chan struct{})
	}
	return c.gone
}

// pinned and unpinned keep the member counts, under mu.
func (ps *pins) pinned(m *member) {
	c := ps.perMember[m]
	if c == nil {
		c = &memberPins{}
		ps.perMember[m] = c
	}
	c.n++
}

func (ps *pins) unpinned(m *member) {
	c := ps.perMember[m]
	if c.n--; c.n > 0 {
		return
	}
	delete(ps.perMember, m)
	if c.gone != nil {
		close(c.gone)
	}
}

// missesByTenant copies the miss counts, by the tenant that asked: an
// authenticated tenant's name, so the set is bounded by the configuration.
func (ps *pins) missesByTenant() map[string]int64 {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return maps.Clone(ps.misses)
}

func (ps *pins) len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.all.Len()
}

// close closes the handles of evicted pins on their backends, in the
// background: eviction happens on a request's path and must not wait.
func (ps *pins) close(evicted []evictedPin) {
	for _, e := range evicted {
		ps.evictions.Add(1)
		go func() {
			defer e.p.member.handleCalls.Add(-1)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := e.p.member.execFor(e.p.tenant).CloseHandles(ctx, e.p.inner)
			if err != nil && protocol.CodeOf(err) != protocol.CodeHandlesClosed {
				e.p.member.log.Warn("closing evicted handles failed", "error", err)
			}
		}()
	}
}
