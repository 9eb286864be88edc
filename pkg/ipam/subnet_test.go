package ipam

import (
	"net/netip"
	"testing"

	"github.com/kovn/kovn/api/v1alpha1"
)

func TestAddOrUpdateSubnetInvalid(t *testing.T) {
	for _, tc := range []struct {
		name    string
		subnet  string
		cidrs   []string
		gws     []string
		exclude []Range
		frag    string
	}{
		{"no name", "", []string{"10.0.0.0/24"}, nil, nil, "name is empty"},
		{"no CIDR", "sn", nil, nil, nil, "one or two CIDRs"},
		{"three CIDRs", "sn", []string{"10.0.0.0/24", "fd00::/64", "10.1.0.0/24"}, nil, nil, "one or two CIDRs"},
		{"two v4", "sn", []string{"10.0.0.0/24", "10.1.0.0/24"}, nil, nil, "two IPv4 CIDRs"},
		{"host bits", "sn", []string{"10.0.0.1/24"}, nil, nil, "did you mean 10.0.0.0/24"},
		{"gateway outside", "sn", []string{"10.0.0.0/24"}, []string{"10.0.1.1"}, nil, "outside the CIDRs"},
		{"gateway of missing family", "sn", []string{"10.0.0.0/24"}, []string{"fd00::1"}, nil, "outside the CIDRs"},
		{"two gateways", "sn", []string{"10.0.0.0/24"}, []string{"10.0.0.1", "10.0.0.2"}, nil, "two gateways"},
		{"gateway is network", "sn", []string{"10.0.0.0/24"}, []string{"10.0.0.0"}, nil, "network or broadcast"},
		{"gateway is broadcast", "sn", []string{"10.0.0.0/24"}, []string{"10.0.0.255"}, nil, "network or broadcast"},
		{"reversed exclude", "sn", []string{"10.0.0.0/24"}, nil,
			[]Range{{First: netip.MustParseAddr("10.0.0.9"), Last: netip.MustParseAddr("10.0.0.2")}}, "malformed"},
		{"mixed exclude", "sn", []string{"10.0.0.0/24"}, nil,
			[]Range{{First: netip.MustParseAddr("10.0.0.9"), Last: netip.MustParseAddr("fd00::1")}}, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gws []netip.Addr
			for _, g := range tc.gws {
				gws = append(gws, netip.MustParseAddr(g))
			}
			err := New().AddOrUpdateSubnet(tc.subnet, prefixes(t, tc.cidrs...), gws, tc.exclude)
			wantErr(t, err, ErrInvalid, tc.frag)
		})
	}
}

// TestExcludeClipped: exclude ranges reaching outside the CIDR only remove what is inside.
func TestExcludeClipped(t *testing.T) {
	m := New()
	err := m.AddOrUpdateSubnet("sn", prefixes(t, "10.0.0.0/29"), addrs(t, "10.0.0.1"), ranges(t, "9.0.0.0..10.0.0.3", "fd00::1"))
	wantErr(t, err, nil, "")
	if u, _ := m.Usage("sn"); u.V4Available != 3 { // .4 .5 .6
		t.Fatalf("usage: %+v", u)
	}
}

func TestSubnetUpdateKeepsAllocations(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	for i, ip := range []string{"10.0.0.10", "10.0.0.200", "10.0.0.30"} {
		mustAlloc(t, m, Request{Owner: owner(i), Subnet: "sn", IPs: addrs(t, ip)})
	}
	dyn := mustAlloc(t, m, Request{Owner: "ns/dyn", Subnet: "sn"}) // 10.0.0.2
	// Shrink to a /25 (drops .200) and exclude .10: both stay held and are reported.
	addSpec(t, m, "sn", v1alpha1.SubnetSpec{CIDRBlock: "10.0.0.0/25", ExcludeIPs: []string{"10.0.0.5..10.0.0.10"}})
	for i, ip := range []string{"10.0.0.10", "10.0.0.200", "10.0.0.30"} {
		if o, ok := m.OwnerOf("sn", addr(t, ip)); !ok || o != owner(i) {
			t.Fatalf("%s lost its owner after the update: %q", ip, o)
		}
	}
	if a, ok := m.Lookup("ns/dyn"); !ok || ipsString(a.IPs) != ipsString(dyn.IPs) {
		t.Fatalf("dynamic allocation changed: %+v", a)
	}
	mis, err := m.Misplaced("sn")
	wantErr(t, err, nil, "")
	want := []Misplaced{
		{Owner: owner(0), IP: addr(t, "10.0.0.10"), Reason: "in the subnet's excluded ranges"},
		{Owner: owner(1), IP: addr(t, "10.0.0.200"), Reason: "outside the subnet's CIDRs"},
	}
	if len(mis) != len(want) || mis[0] != want[0] || mis[1] != want[1] {
		t.Fatalf("Misplaced = %+v, want %+v", mis, want)
	}
	u, _ := m.Usage("sn")
	// /25: .1 gateway, .2..126 = 125, minus excludes .5-.10 (6) = 119 usable; held inside: .2, .30.
	if u.V4Used != 4 || u.V4Available != 117 {
		t.Fatalf("usage after update: %+v", u)
	}
	// The cursor survived the update (next after .2 is .3), held addresses are skipped.
	if a := mustAlloc(t, m, Request{Owner: "ns/next", Subnet: "sn"}); a.IPs[0] != addr(t, "10.0.0.3") {
		t.Fatalf("next dynamic after update: %v", a.IPs)
	}
	// Released misplaced addresses are not handed out again.
	m.Release(owner(0))
	m.Release(owner(1))
	for i := 0; ; i++ {
		a, err := m.Allocate(Request{Owner: owner(100 + i), Subnet: "sn"})
		if err != nil {
			wantErr(t, err, ErrExhausted, "")
			break
		}
		if ip := a.IPs[0]; ip == addr(t, "10.0.0.10") || ip == addr(t, "10.0.0.200") {
			t.Fatalf("released misplaced %s handed out", ip)
		}
	}
	if mis, _ := m.Misplaced("sn"); len(mis) != 0 {
		t.Fatalf("misplaced after release: %+v", mis)
	}
}

func TestSubnetUpdateGatewayConflict(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn", IPs: addrs(t, "10.0.0.254")})
	err := m.AddOrUpdateSubnet("sn", prefixes(t, "10.0.0.0/24"), addrs(t, "10.0.0.254"), nil)
	wantErr(t, err, ErrConflict, "held by ns/a")
	// Unchanged: the old gateway is still reserved.
	_, err = m.Allocate(Request{Owner: "ns/b", Subnet: "sn", IPs: addrs(t, "10.0.0.1")})
	wantErr(t, err, ErrConflict, "gateway")
}

// TestSubnetBecomesDualStack: adding a family keeps the existing single-family allocation.
func TestSubnetBecomesDualStack(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	a := mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn"})
	addSpec(t, m, "sn", v1alpha1.SubnetSpec{CIDRBlock: "10.0.0.0/24,fd00::/120"})
	if got := mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn"}); ipsString(got.IPs) != ipsString(a.IPs) {
		t.Fatalf("existing owner changed: %v", got.IPs)
	}
	if b := mustAlloc(t, m, Request{Owner: "ns/b", Subnet: "sn"}); ipsString(b.IPs) != "10.0.0.3,fd00::2" {
		t.Fatalf("new owner after adding IPv6: %v", b.IPs)
	}
}

func TestDeleteSubnet(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn"})
	wantErr(t, m.DeleteSubnet("sn"), ErrInUse, "1 allocated")
	if _, err := m.Usage("sn"); err != nil {
		t.Fatalf("subnet gone after refused delete: %v", err)
	}
	m.Release("ns/a")
	wantErr(t, m.DeleteSubnet("sn"), nil, "")
	wantErr(t, m.DeleteSubnet("sn"), nil, "") // idempotent
	_, err := m.Allocate(Request{Owner: "ns/a", Subnet: "sn"})
	wantErr(t, err, ErrNoSubnet, "")
	_, err = m.Usage("sn")
	wantErr(t, err, ErrNoSubnet, "")
	_, err = m.Misplaced("sn")
	wantErr(t, err, ErrNoSubnet, "")
}

func TestPools(t *testing.T) {
	m := newWith(t, "10.0.0.0/24", "10.0.0.11") // .11 excluded inside the pool
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.10..10.0.0.13")), nil, "")
	inPool := func(a netip.Addr) bool {
		return a.Compare(addr(t, "10.0.0.10")) >= 0 && a.Compare(addr(t, "10.0.0.13")) <= 0
	}

	// Pool members get pool addresses (not the excluded .11) until the pool is exhausted; the
	// pool never spills into the subnet.
	var got []netip.Addr
	for i := 0; i < 3; i++ {
		got = append(got, mustAlloc(t, m, Request{Owner: owner(i), Subnet: "sn", Pool: "p"}).IPs[0])
	}
	if ipsString(got) != "10.0.0.10,10.0.0.12,10.0.0.13" {
		t.Fatalf("pool allocations: %v", got)
	}
	_, err := m.Allocate(Request{Owner: owner(3), Subnet: "sn", Pool: "p"})
	wantErr(t, err, ErrExhausted, "pool p of subnet sn has no free IPv4")
	pu, _ := m.PoolUsage("sn", "p")
	if pu.V4Used != 3 || pu.V4Available != 0 {
		t.Fatalf("pool usage: %+v", pu)
	}
	m.Release(owner(1))

	// Non-members never get pool addresses, even when the subnet runs dry.
	n := 0
	for ; ; n++ {
		a, err := m.Allocate(Request{Owner: owner(100 + n), Subnet: "sn"})
		if err != nil {
			wantErr(t, err, ErrExhausted, "subnet sn has no free IPv4")
			break
		}
		if inPool(a.IPs[0]) {
			t.Fatalf("non-member got pool address %s", a.IPs[0])
		}
	}
	if n != 253-1-3 { // .2-.254 minus excluded .11 minus the 3 other pool addresses
		t.Fatalf("non-member allocations: %d", n)
	}
	u, _ := m.Usage("sn")
	if u.V4Available != 1 { // the released pool address, for members only
		t.Fatalf("subnet usage: %+v", u)
	}
	if a := mustAlloc(t, m, Request{Owner: owner(1), Subnet: "sn", Pool: "p"}); a.IPs[0] != addr(t, "10.0.0.12") {
		t.Fatalf("pool member after release: %v", a.IPs)
	}
}

func TestPoolStaticIPs(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.16/28")), nil, "")
	wantErr(t, m.AddOrUpdatePool("sn", "q", ranges(t, "10.0.0.40")), nil, "")
	for _, tc := range []struct {
		pool, ip string
		sentinel error
		frag     string
	}{
		{"p", "10.0.0.20", nil, ""},
		{"", "10.0.0.21", ErrOutOfRange, "reserved for IP pool p"},
		{"p", "10.0.0.50", ErrOutOfRange, "outside pool p"},
		{"q", "10.0.0.22", ErrOutOfRange, "outside pool q"},
		{"p", "10.0.0.40", ErrOutOfRange, "outside pool p"},
	} {
		_, err := m.Allocate(Request{Owner: "ns/" + tc.pool + tc.ip, Subnet: "sn", Pool: tc.pool, IPs: addrs(t, tc.ip)})
		wantErr(t, err, tc.sentinel, tc.frag)
	}
}

func TestPoolConfig(t *testing.T) {
	m := newWith(t, "10.0.0.0/24,fd00::/120")
	wantErr(t, m.AddOrUpdatePool("nope", "p", ranges(t, "10.0.0.10")), ErrNoSubnet, "nope")
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.1.10")), ErrOutOfRange, "outside subnet sn")
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.250..10.0.1.2")), ErrOutOfRange, "outside subnet sn")
	wantErr(t, m.AddOrUpdatePool("sn", "p", nil), ErrInvalid, "at least one range")
	wantErr(t, m.AddOrUpdatePool("sn", "", ranges(t, "10.0.0.10")), ErrInvalid, "a name")
	wantErr(t, m.AddOrUpdatePool("sn", "p", []Range{{}}), ErrInvalid, "malformed")
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.10..10.0.0.20")), nil, "")
	wantErr(t, m.AddOrUpdatePool("sn", "q", ranges(t, "10.0.0.20..10.0.0.30")), ErrConflict, "overlaps pool p")
	// Updating a pool with its own ranges is not an overlap.
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.10..10.0.0.25")), nil, "")

	// A v4-only pool in a dual-stack subnet: IPv6 comes from the subnet.
	a := mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn", Pool: "p"})
	if ipsString(a.IPs) != "10.0.0.10,fd00::2" || a.Pool != "p" {
		t.Fatalf("dual-stack pool allocation: %+v", a)
	}
	if pu, _ := m.PoolUsage("sn", "p"); pu.V4Used != 1 || pu.V4Available != 15 || pu.V6Used != 0 {
		t.Fatalf("pool usage: %+v", pu)
	}
	_, err := m.PoolUsage("sn", "nope")
	wantErr(t, err, ErrNoPool, "nope")

	// Shrinking the pool away from a member's address keeps it and reports it.
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.20..10.0.0.25")), nil, "")
	mis, _ := m.Misplaced("sn")
	if len(mis) != 1 || mis[0].Reason != "outside its IP pool p" {
		t.Fatalf("Misplaced after pool shrink: %+v", mis)
	}

	wantErr(t, m.DeletePool("sn", "p"), ErrInUse, "used by ns/a")
	m.Release("ns/a")
	wantErr(t, m.DeletePool("sn", "p"), nil, "")
	wantErr(t, m.DeletePool("sn", "p"), nil, "")
	wantErr(t, m.DeletePool("nope", "p"), nil, "")
	// Former pool addresses are ordinary dynamic space now.
	_, err = m.Allocate(Request{Owner: "ns/b", Subnet: "sn", IPs: addrs(t, "10.0.0.21")})
	wantErr(t, err, nil, "")
}

// TestPoolOverHeldAddress: a pool created over an address a non-member holds keeps the holder.
func TestPoolOverHeldAddress(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn"}) // .2
	wantErr(t, m.AddOrUpdatePool("sn", "p", ranges(t, "10.0.0.2..10.0.0.3")), nil, "")
	mis, _ := m.Misplaced("sn")
	if len(mis) != 1 || mis[0].Owner != "ns/a" || mis[0].Reason != "reserved for IP pool p" {
		t.Fatalf("Misplaced: %+v", mis)
	}
	if pu, _ := m.PoolUsage("sn", "p"); pu.V4Used != 1 || pu.V4Available != 1 {
		t.Fatalf("pool usage: %+v", pu)
	}
	b := mustAlloc(t, m, Request{Owner: "ns/b", Subnet: "sn", Pool: "p"})
	if b.IPs[0] != addr(t, "10.0.0.3") {
		t.Fatalf("pool member got %v", b.IPs)
	}
	// Once released, .2 goes back to the pool, not to the dynamic space.
	m.Release("ns/a")
	if pu, _ := m.PoolUsage("sn", "p"); pu.V4Used != 1 || pu.V4Available != 1 {
		t.Fatalf("pool usage after release: %+v", pu)
	}
	if c := mustAlloc(t, m, Request{Owner: "ns/c", Subnet: "sn"}); c.IPs[0] == addr(t, "10.0.0.2") {
		t.Fatal("released pool address went to a non-member")
	}
}
