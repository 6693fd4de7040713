package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"slices"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/internal/serving"
)

// A reload may change the members of a remote group, and nothing else about
// the backends: an added executor server takes executions at once; a
// removed one takes no new executions, finishes those it runs and keeps
// serving the handles pinned to it, and is closed when none is left.

// memberName is a remote member's name: its group and a tag of its URL
// under the executionId key, so that replicas sharing the key name it
// alike (ids carry the name), whatever its place in the list, and a tenant
// who decodes an id learns nothing of the URL.
func (c idCodec) memberName(group, url string) string {
	h := hmac.New(sha256.New, c.key)
	h.Write([]byte("member\x00" + url))
	return group + "/" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9])
}

// withoutMembers is bs with the member lists of remote groups left out,
// and of a discover section only that it is there: what a reload must
// leave as it is. A reload may change discover's settings; it may not
// turn a list into discovery or back.
func withoutMembers(bs []config.Backend) []config.Backend {
	out := slices.Clone(bs)
	for i := range out {
		if r := out[i].Remote; r != nil {
			c := *r
			c.Members = nil
			if c.Discover != nil {
				c.Discover = &config.Discover{}
			}
			out[i].Remote = &c
		}
	}
	return out
}

// setMembers makes the group's members those listed, keeping the member
// of an entry already there, and returns the members it added and those
// it removed (now retired).
func (g *group) setMembers(list []config.RemoteMember) (added, removed []*member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	kept := map[config.RemoteMember]*member{}
	for _, m := range g.members {
		kept[m.entry] = m
	}
	next := make([]*member, 0, len(list))
	for i, rm := range list {
		m := kept[rm]
		if m == nil {
			var err error
			if m, err = g.remote.member(rm, i); err != nil {
				// The remote kind makes every member it is given.
				g.remote.log.Error("backend member not made; the entry is left out", "backend", g.name, "member", i, "error", err)
				continue
			}
			added = append(added, m)
		}
		delete(kept, rm)
		next = append(next, m)
	}
	for _, m := range g.members {
		if kept[m.entry] == m {
			removed = append(removed, m)
			g.retired[m] = struct{}{}
		}
	}
	g.members = next
	return added, removed
}

// applyMembers gives each remote group the members cfg lists, or the
// discover settings it gives.
func (g *Gateway) applyMembers(cfg *config.Config) {
	for _, b := range cfg.Backends {
		grp := g.groups[b.Name]
		if grp == nil || grp.remote == nil {
			continue
		}
		if grp.discovery != nil {
			grp.reloadDiscovery(b.Remote.Discover)
			continue
		}
		if g.changeMembers(grp, b.Remote.Members, "added by a reload", "removed by a reload") {
			// Admit the new members now rather than at the next interval.
			go grp.checkHealth(grp.ctx, grp.remote.dialTimeout)
		}
	}
}

// changeMembers makes grp's members those of list, saying how each added
// and removed one came and went; it reports whether any was added. A
// removed member is retired: it takes no new executions and is closed
// once its executions and pinned handles are done.
func (g *Gateway) changeMembers(grp *group, list []config.RemoteMember, added, removed string) bool {
	in, out := grp.setMembers(list)
	for _, m := range in {
		g.handles.addMember(m)
		m.log.Info("executor server " + added)
	}
	for _, m := range out {
		m.log.Info("executor server " + removed + ": it finishes its executions and keeps its pinned handles until they close")
		go g.retire(grp, m)
	}
	return len(in) > 0
}

// handleCall counts a call on one of m's retained executions until the
// function it returns is called.
func (m *member) handleCall() (done func()) {
	m.handleCalls.Add(1)
	return func() { m.handleCalls.Add(-1) }
}

// retire closes a removed member once no execution and no call on a
// handle runs on it and no pin of this replica names it, woken by the ends
// of all three rather than polling. Closing the gateway closes it sooner.
func (g *Gateway) retire(grp *group, m *member) {
	// An execution that was running when the reload came may still pin a
	// handle as it ends, and a handle's pin goes while the call that closed
	// it is still answering: all three are asked again after every wake.
	for m.inFlight.Load() > 0 || m.handleCalls.Load() > 0 || g.handles.pins.holds(m) {
		if !serving.WaitClosed(grp.ctx, m.inFlight.Idle()) || !serving.WaitClosed(grp.ctx, m.handleCalls.Idle()) ||
			!serving.WaitClosed(grp.ctx, g.handles.pins.released(m)) {
			return // the group closed it
		}
	}
	grp.mu.Lock()
	_, still := grp.retired[m]
	delete(grp.retired, m)
	grp.mu.Unlock()
	if !still {
		return // the group closed it
	}
	g.handles.removeMember(m)
	m.exec.Close()
	m.log.Info("removed executor server closed: its executions and pinned handles are done")
}
