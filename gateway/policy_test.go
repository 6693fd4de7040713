package gateway

import (
	"context"
	"net/netip"
	"reflect"
	"testing"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestMemberRunsUnderTheTenantsPolicy: the member is given the tenant's
// name whatever the caller said, the lower of the caller's and the
// tenant's memory limits, and both their denied ranges, the caller's
// first; the caller's own policy is left as it was.
func TestMemberRunsUnderTheTenantsPolicy(t *testing.T) {
	rig := newRig(t, config.Policy{MemoryMB: 32, NativeDeny: []string{"10.0.0.0/8"}})
	callerDeny := netip.MustParsePrefix("192.0.2.0/24")
	tenantDeny := netip.MustParsePrefix("10.0.0.0/8")
	for _, c := range []struct {
		callerMB, wantMB int
	}{{0, 32}, {16, 16}, {64, 32}} {
		caller := protocol.Policy{Tenant: "someone-else", MemoryLimitMB: c.callerMB, NativeDeny: []netip.Prefix{callerDeny}}
		if _, err := rig.t.ExecuteWith(context.Background(), &protocol.ExecuteRequest{Code: "async () => 1"}, caller); err != nil {
			t.Fatal(err)
		}
		got := *rig.be.policy.Load()
		want := protocol.Policy{Tenant: "acme", MemoryLimitMB: c.wantMB, NativeDeny: []netip.Prefix{callerDeny, tenantDeny}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("caller at %d MB: the member got %+v, want %+v", c.callerMB, got, want)
		}
		if len(caller.NativeDeny) != 1 || caller.Tenant != "someone-else" {
			t.Errorf("the caller's policy changed: %+v", caller)
		}
	}
}
