package cluster

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// A private Subnet is Supported (no longer reported as unimplemented) and its switch gets
// the drop that admits its own CIDR, its allowSubnets and the join CIDR; turning private off
// removes the ACLs.
func TestPrivateSubnetProgrammed(t *testing.T) {
	o := DefaultOptions()
	sn := subnetAt("priv", "10.40.0.0/24", created0)
	sn.Spec.Private, sn.Spec.AllowSubnets = true, []string{"10.41.0.0/24"}
	e := defaultEnv(t, sn)
	e.reconcileSubnet(t, "priv")
	var got kovnv1.Subnet
	_ = e.c.Get(context.Background(), types.NamespacedName{Name: "priv"}, &got)
	if c := findCondition(got.Status.Conditions, kovnv1.ConditionSupported); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Supported %+v, want True", c)
	}
	m := privateMatches(t, e)
	if len(m) != 2 {
		t.Fatalf("ACL matches %q, want the drop and the stateful one", m)
	}
	drop := m[0]
	if !strings.Contains(drop, ".src") {
		drop = m[1]
	}
	// The drop names the sources it drops: all but the subnet and allowSubnets. The join CIDR is
	// dropped too: a node's own join address passes by its node's ACL, above this one.
	src := strings.TrimSuffix(strings.TrimPrefix(drop, "ip4.dst == 10.40.0.0/24 && ip4.src == {"), "}")
	dropped := func(ip string) bool {
		for _, c := range strings.Split(src, ", ") {
			if netip.MustParsePrefix(c).Contains(netip.MustParseAddr(ip)) {
				return true
			}
		}
		return false
	}
	joinIP := netip.MustParsePrefix(o.JoinCIDR).Addr().Next().String()
	for ip, want := range map[string]bool{"10.40.0.5": false, "10.41.0.5": false, joinIP: true, "10.16.0.5": true, "10.40.1.1": true} {
		if dropped(ip) != want {
			t.Errorf("drop %q: source %s dropped %t, want %t", drop, ip, dropped(ip), want)
		}
	}
	got.Spec.Private = false
	if err := e.c.Update(context.Background(), &got); err != nil {
		t.Fatal(err)
	}
	e.reconcileSubnet(t, "priv")
	// Deletes reach the client's cache asynchronously (Apply waits only for inserts).
	for deadline := time.Now().Add(5 * time.Second); len(privateMatches(t, e)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("private turned off, ACLs left: %q", privateMatches(t, e))
		}
	}
}

func privateMatches(t *testing.T, e *reconcilerEnv) []string {
	t.Helper()
	var acls []nb.ACL
	if err := e.nb.List(context.Background(), &acls); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range acls {
		if a.ExternalIDs[topology.SubnetKey] == "priv" {
			out = append(out, a.Match)
		}
	}
	return out
}
