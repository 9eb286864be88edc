package cluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/kovn/kovn/pkg/cluster/topology"
)

// An external address inside a Subnet would let a Service capture a pod's traffic: it is
// dropped with a reason; ClusterIPs and addresses outside the cluster stay.
func TestRefuseInClusterVIPs(t *testing.T) {
	st := NewState(DefaultOptions())
	st.setSubnet(topology.SubnetIn{Name: "ovn-default", Switch: "ovn-default", CIDRs: testPrefixes("10.16.0.0/16", "fd00:10:16::/64")})
	r := &ServiceReconciler{State: st}
	vips := testAddrs("10.96.0.10", "fd00:10:96::a", "198.51.100.10", "10.16.0.5", "fd00:10:16::5")
	kept, why := r.refuseInClusterVIPs(vips, 2)
	if want := testAddrs("10.96.0.10", "fd00:10:96::a", "198.51.100.10"); !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if len(why) != 2 || !strings.Contains(why[0], "10.16.0.5 refused: it is inside subnet ovn-default (10.16.0.0/16)") {
		t.Errorf("reasons = %q", why)
	}
	// A ClusterIP is never refused, even if it looked like a pod address.
	if kept, why := r.refuseInClusterVIPs(testAddrs("10.16.0.9"), 1); len(kept) != 1 || len(why) != 0 {
		t.Errorf("ClusterIP only: kept %v, reasons %v", kept, why)
	}
}
