package gateway

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
)

// A remote group with remote.discover finds its members in DNS: every
// address its name resolves to is a member, resolved again every interval.
// Members come and go as they do on a reload (changeMembers): an added one
// takes executions once it passes its health check, a removed one finishes
// its executions and keeps its pinned handles until they close.
//
// A resolution that fails keeps the members as they are: a DNS outage says
// nothing about the executor servers, which the health checks watch. An
// answer with no address (the name does not exist, or has no A or AAAA
// record) keeps them for emptyGrace, the length of a DNS blip or of a
// one-member StatefulSet's restart, and then empties the group: past it
// the addresses may belong to other pods.

// Resolver looks up a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// discovery is a remote group's member discovery.
type discovery struct {
	resolver Resolver
	settings atomic.Pointer[config.Discover] // a reload swaps them
	// kick asks the loop for a resolution now (a reload).
	kick chan struct{}
	// now is the clock of emptyGrace.
	now func() time.Time

	// mu keeps one resolution at a time; emptySince is when the name
	// started to resolve to no address (zero: it resolves).
	mu         sync.Mutex
	emptySince time.Time

	// failures and empties count the resolutions that failed and those
	// that found no address, for codemode_discovery_failures_total.
	failures, empties atomic.Int64
}

// startDiscovery resolves grp's name once, so that the group starts with
// its members, and then every interval until the group closes.
func (g *Gateway) startDiscovery(grp *group, d *config.Discover, r Resolver) {
	disc := &discovery{resolver: r, kick: make(chan struct{}, 1), now: time.Now}
	disc.settings.Store(d)
	grp.discovery = disc
	g.discover(grp)
	grp.wg.Add(1)
	go g.discoverLoop(grp)
}

func (g *Gateway) discoverLoop(grp *group) {
	defer grp.wg.Done()
	d := grp.discovery
	t := time.NewTimer(d.settings.Load().Interval.Std())
	defer t.Stop()
	for {
		select {
		case <-grp.ctx.Done():
			return
		case <-t.C:
		case <-d.kick:
		}
		g.discover(grp)
		t.Reset(d.settings.Load().Interval.Std())
	}
}

// discover resolves grp's name and makes its members the addresses found.
func (g *Gateway) discover(grp *group) {
	d := grp.discovery
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.settings.Load()
	log := g.log.With("backend", grp.name, "dns", s.DNS)
	ctx, cancel := context.WithTimeout(grp.ctx, grp.remote.dialTimeout)
	addrs, err := d.resolver.LookupIPAddr(ctx, s.DNS)
	cancel()
	var dnsErr *net.DNSError
	if err != nil && !(errors.As(err, &dnsErr) && dnsErr.IsNotFound) {
		if grp.ctx.Err() != nil {
			return // the group closed
		}
		d.failures.Add(1)
		log.Warn("resolving the executor servers' name failed; the members stay as they were", "error", err, "members", len(grp.current()))
		return
	}
	list := membersAt(s, addrs)
	if len(list) == 0 {
		d.empties.Add(1)
		now := d.now()
		if d.emptySince.IsZero() {
			d.emptySince = now
		}
		if len(grp.current()) == 0 {
			return
		}
		if now.Sub(d.emptySince) < s.EmptyGrace.Std() {
			log.Warn("the executor servers' name resolves to no address; the members stay until emptyGrace has passed", "emptyGrace", s.EmptyGrace.Std(), "members", len(grp.current()))
			return
		}
		log.Warn("the executor servers' name has resolved to no address for emptyGrace; the group has no members until it resolves again", "emptyGrace", s.EmptyGrace.Std())
	} else {
		d.emptySince = time.Time{}
	}
	if g.changeMembers(grp, list, "found in DNS", "gone from DNS") {
		// Admit the new members now rather than at the next interval.
		grp.checkHealth(grp.ctx, grp.remote.dialTimeout)
	}
}

// membersAt are the members at addrs, each address once, in the order of
// the addresses (so that a member's place in the group does not follow the
// resolver's shuffling).
func membersAt(s *config.Discover, addrs []net.IPAddr) []config.RemoteMember {
	var ips []netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ips = append(ips, ip.Unmap().WithZone(a.Zone))
	}
	slices.SortFunc(ips, netip.Addr.Compare)
	ips = slices.Compact(ips)
	out := make([]config.RemoteMember, 0, len(ips))
	for _, ip := range ips {
		out = append(out, s.Member(ip))
	}
	return out
}

// reloadDiscovery gives grp the discover settings of a reload (a key, an
// interval) and resolves its name again at once.
func (grp *group) reloadDiscovery(d *config.Discover) {
	grp.discovery.settings.Store(d)
	select {
	case grp.discovery.kick <- struct{}{}:
	default: // a resolution is already asked for
	}
}
