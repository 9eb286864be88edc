package cluster

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/ipam"
)

// A FloatingIP's claim: free addresses per family, a taken or foreign address refused with
// its reason and nothing held, a changed spec moving the claim, and a refused change keeping
// what the FloatingIP held.
func TestFloatingIPAllocate(t *testing.T) {
	st := NewState(DefaultOptions())
	if err := st.IPAM.AddOrUpdateSubnet("ext", []netip.Prefix{netip.MustParsePrefix("172.28.100.0/24"), netip.MustParsePrefix("fd00:28:100::/64")},
		[]netip.Addr{netip.MustParseAddr("172.28.100.1"), netip.MustParseAddr("fd00:28:100::1")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.IPAM.Restore(podOwner("ul", "u1"), ipam.Allocation{Subnet: "ext", IPs: []netip.Addr{netip.MustParseAddr("172.28.100.2")}}); err != nil {
		t.Fatal(err)
	}
	r := &FloatingIPReconciler{State: st}
	fip := func(name string, addrs ...string) *kovnv1.FloatingIP {
		return &kovnv1.FloatingIP{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kovnv1.FloatingIPSpec{Subnet: "ext", Addresses: addrs}}
	}
	a, reason, err := r.allocate(fip("web", "172.28.100.200"))
	if err != nil || len(a.IPs) != 2 || a.IPs[0] != netip.MustParseAddr("172.28.100.200") || !a.IPs[1].Is6() {
		t.Fatalf("web: %v %s %v, want 172.28.100.200 and a free IPv6 address", a.IPs, reason, err)
	}
	for _, tc := range []struct {
		name, addr, reason string
	}{
		{"thief", "172.28.100.200", kovnv1.ReasonAddressInUse}, // web's
		{"podaddr", "172.28.100.2", kovnv1.ReasonAddressInUse}, // a pod's
		{"gateway", "172.28.100.1", kovnv1.ReasonAddressInUse}, // the physical router's
		{"foreign", "10.9.9.9", kovnv1.ReasonOutsideSubnet},
		{"bad", "nope", kovnv1.ReasonInvalidIPs},
	} {
		_, reason, err := r.allocate(fip(tc.name, tc.addr))
		if err == nil || reason != tc.reason {
			t.Errorf("%s claiming %s: reason %q, err %v; want %s", tc.name, tc.addr, reason, err, tc.reason)
		}
		if _, held := st.IPAM.Lookup(fipOwner(tc.name)); held {
			t.Errorf("%s holds addresses after a refused claim", tc.name)
		}
	}
	// web asks for another address: it moves; then for a taken one: it keeps what it had.
	if a, _, err := r.allocate(fip("web", "172.28.100.201")); err != nil || a.IPs[0] != netip.MustParseAddr("172.28.100.201") {
		t.Fatalf("web moved: %v %v", a.IPs, err)
	}
	if owner, _ := st.IPAM.OwnerOf("ext", netip.MustParseAddr("172.28.100.200")); owner != "" {
		t.Fatalf("172.28.100.200 still held by %q after web moved", owner)
	}
	if _, _, err := r.allocate(fip("web", "172.28.100.2")); err == nil {
		t.Fatal("web took a pod's address")
	}
	if held, _ := st.IPAM.Lookup(fipOwner("web")); len(held.IPs) != 2 || held.IPs[0] != netip.MustParseAddr("172.28.100.201") {
		t.Fatalf("web after a refused change holds %v, want 172.28.100.201 still", held.IPs)
	}
}
