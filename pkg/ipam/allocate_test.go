package ipam

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/kovn/kovn/api/v1alpha1"
)

func TestAllocationOrderAndCursor(t *testing.T) {
	m := newWith(t, "10.0.0.0/28") // gateway 10.0.0.1, broadcast .15: usable .2-.14
	var got []string
	alloc := func(i int) string {
		a := mustAlloc(t, m, Request{Owner: owner(i), Subnet: "sn"})
		return a.IPs[0].String()
	}
	for i := 0; i < 3; i++ {
		got = append(got, alloc(i))
	}
	if ipsString(addrs(t, got...)) != "10.0.0.2,10.0.0.3,10.0.0.4" {
		t.Fatalf("first three: %v", got)
	}
	if _, ok := m.Release(owner(1)); !ok {
		t.Fatal("release failed")
	}
	// The released .3 is not reused at once: the cursor moves on.
	if a := alloc(10); a != "10.0.0.5" {
		t.Fatalf("after release got %s, want 10.0.0.5", a)
	}
	for i := 11; i <= 19; i++ { // .6 .. .14
		alloc(i)
	}
	// Only now, at the end of the range, the cursor wraps around to the freed .3.
	if a := alloc(20); a != "10.0.0.3" {
		t.Fatalf("after wrap got %s, want 10.0.0.3", a)
	}
	_, err := m.Allocate(Request{Owner: owner(21), Subnet: "sn"})
	wantErr(t, err, ErrExhausted, "no free IPv4 address")
}

func TestExhaustionCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     v1alpha1.SubnetSpec
		want     int
		reserved []string // must never be handed out
	}{
		{"v4 /29", v1alpha1.SubnetSpec{CIDRBlock: "10.0.0.0/29"}, 5, []string{"10.0.0.0", "10.0.0.1", "10.0.0.7"}},
		{"v4 /29 with excludes", v1alpha1.SubnetSpec{CIDRBlock: "10.0.0.0/29", ExcludeIPs: []string{"10.0.0.3..10.0.0.4", "10.0.0.6"}}, 2,
			[]string{"10.0.0.0", "10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.6", "10.0.0.7"}},
		{"v4 /29 gateway at the top", v1alpha1.SubnetSpec{CIDRBlock: "10.0.0.0/29", Gateway: "10.0.0.6"}, 5, []string{"10.0.0.0", "10.0.0.6", "10.0.0.7"}},
		{"v6 /125 has no broadcast", v1alpha1.SubnetSpec{CIDRBlock: "fd00::/125"}, 6, []string{"fd00::", "fd00::1"}},
		{"v4 /16", v1alpha1.SubnetSpec{CIDRBlock: "10.16.0.0/16", ExcludeIPs: []string{"10.16.255.0..10.16.255.255"}}, 65536 - 256 - 2, []string{"10.16.0.0", "10.16.0.1", "10.16.255.255"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			addSpec(t, m, "sn", tc.spec)
			u, err := m.Usage("sn")
			wantErr(t, err, nil, "")
			if avail := u.V4Available + u.V6Available; avail != int64(tc.want) {
				t.Fatalf("available before = %d, want %d", avail, tc.want)
			}
			seen := map[netip.Addr]bool{}
			for i := 0; ; i++ {
				a, err := m.Allocate(Request{Owner: owner(i), Subnet: "sn"})
				if err != nil {
					wantErr(t, err, ErrExhausted, "no free")
					break
				}
				if seen[a.IPs[0]] {
					t.Fatalf("%s handed out twice", a.IPs[0])
				}
				seen[a.IPs[0]] = true
			}
			if len(seen) != tc.want {
				t.Fatalf("allocated %d addresses, want %d", len(seen), tc.want)
			}
			for _, r := range tc.reserved {
				if seen[addr(t, r)] {
					t.Errorf("reserved %s was handed out", r)
				}
			}
			u, _ = m.Usage("sn")
			if u.V4Available+u.V6Available != 0 || u.V4Used+u.V6Used != int64(tc.want) {
				t.Errorf("usage after exhaustion: %+v", u)
			}
		})
	}
}

func TestDualStack(t *testing.T) {
	m := newWith(t, "10.0.0.0/24,fd00:10::/64")
	a := mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn"})
	if ipsString(a.IPs) != "10.0.0.2,fd00:10::2" || a.MAC != "0a:58:0a:00:00:02" {
		t.Fatalf("dual stack allocation: %+v", a)
	}
	u, _ := m.Usage("sn")
	if u.V4Used != 1 || u.V6Used != 1 || u.V4Available != 252 || u.V6Available != 1<<63-1 {
		t.Fatalf("usage: %+v", u)
	}
	// A static address for one family still gets a dynamic one for the other.
	b := mustAlloc(t, m, Request{Owner: "ns/b", Subnet: "sn", IPs: addrs(t, "fd00:10::99")})
	if ipsString(b.IPs) != "10.0.0.3,fd00:10::99" {
		t.Fatalf("static v6 in dual stack: %v", b.IPs)
	}
}

// TestDualStackAtomic: when one family is exhausted, the other keeps its address free.
func TestDualStackAtomic(t *testing.T) {
	m := newWith(t, "10.0.0.0/24,fd00::/126") // v6 usable: fd00::2, fd00::3
	mustAlloc(t, m, Request{Owner: "a", Subnet: "sn"})
	mustAlloc(t, m, Request{Owner: "b", Subnet: "sn"})
	_, err := m.Allocate(Request{Owner: "c", Subnet: "sn"})
	wantErr(t, err, ErrExhausted, "no free IPv6 address")
	u, _ := m.Usage("sn")
	if u.V4Used != 2 || u.V6Used != 2 {
		t.Fatalf("failed allocation consumed addresses: %+v", u)
	}
	if _, ok := m.Lookup("c"); ok {
		t.Fatal("failed owner holds an allocation")
	}
}

func TestStaticIP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ips      []string
		sentinel error
		fragment string
	}{
		{"honoured", []string{"10.0.0.77"}, nil, ""},
		{"outside CIDR", []string{"10.0.1.5"}, ErrOutOfRange, "outside the subnet's CIDRs"},
		{"other family", []string{"fd00::5"}, ErrOutOfRange, "outside the subnet's CIDRs"},
		{"excluded", []string{"10.0.0.12"}, ErrOutOfRange, "excluded"},
		{"gateway", []string{"10.0.0.1"}, ErrConflict, "gateway"},
		{"network", []string{"10.0.0.0"}, ErrOutOfRange, "network or broadcast"},
		{"broadcast", []string{"10.0.0.255"}, ErrOutOfRange, "network or broadcast"},
		{"two of a family", []string{"10.0.0.5", "10.0.0.6"}, ErrInvalid, "at most one per family"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newWith(t, "10.0.0.0/24", "10.0.0.10..10.0.0.20")
			a, err := m.Allocate(Request{Owner: "ns/s", Subnet: "sn", IPs: addrs(t, tc.ips...)})
			wantErr(t, err, tc.sentinel, tc.fragment)
			if err == nil && ipsString(a.IPs) != tc.ips[0] {
				t.Fatalf("static IP not honoured: %v", a.IPs)
			}
			if err != nil {
				if _, held := m.Lookup("ns/s"); held {
					t.Fatal("failed request holds an allocation")
				}
			}
		})
	}
	_, err := New().Allocate(Request{Owner: "x", Subnet: "sn", IPs: []netip.Addr{{}}})
	wantErr(t, err, ErrInvalid, "not a plain")
}

func TestStaticIPConflict(t *testing.T) {
	m := newWith(t, "10.0.0.0/29")
	first := mustAlloc(t, m, Request{Owner: "ns/first", Subnet: "sn", IPs: addrs(t, "10.0.0.4")})
	_, err := m.Allocate(Request{Owner: "ns/second", Subnet: "sn", IPs: addrs(t, "10.0.0.4")})
	wantErr(t, err, ErrConflict, "held by ns/first")
	if o, _ := m.OwnerOf("sn", addr(t, "10.0.0.4")); o != "ns/first" {
		t.Fatalf("owner of 10.0.0.4 is %q after the conflict", o)
	}
	if a, _ := m.Lookup("ns/first"); ipsString(a.IPs) != ipsString(first.IPs) {
		t.Fatalf("first lost its address: %v", a.IPs)
	}
	if _, held := m.Lookup("ns/second"); held {
		t.Fatal("second holds an allocation")
	}
	// Dynamic allocation steps around the static address.
	var got []netip.Addr
	for i := 0; i < 4; i++ {
		got = append(got, mustAlloc(t, m, Request{Owner: owner(i), Subnet: "sn"}).IPs[0])
	}
	if ipsString(got) != "10.0.0.2,10.0.0.3,10.0.0.5,10.0.0.6" {
		t.Fatalf("dynamic around static: %v", got)
	}
}

func TestMAC(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	a := mustAlloc(t, m, Request{Owner: "ns/a", Subnet: "sn", MAC: "02:00:00:00:00:aa"})
	if a.MAC != "02:00:00:00:00:aa" {
		t.Fatalf("static MAC not honoured: %s", a.MAC)
	}
	_, err := m.Allocate(Request{Owner: "ns/b", Subnet: "sn", MAC: "02:00:00:00:00:aa"})
	wantErr(t, err, ErrConflict, "held by ns/a")
	if u, _ := m.Usage("sn"); u.V4Used != 1 {
		t.Fatalf("MAC conflict consumed an address: %+v", u)
	}
	for _, tc := range []struct{ mac, frag string }{
		{"03:00:00:00:00:01", "multicast"},
		{"ff:ff:ff:ff:ff:ff", "multicast"},
		{"00:00:00:00:00:00", "all-zero"},
		{"02:00:00:00:00:00:00:01", "not a 48-bit"},
		{"nope", "not a 48-bit"},
	} {
		_, err := m.Allocate(Request{Owner: "ns/bad", Subnet: "sn", MAC: tc.mac})
		wantErr(t, err, ErrInvalid, tc.frag)
	}
	// Other spellings are accepted and canonicalized; a retry in either spelling fits.
	up := mustAlloc(t, m, Request{Owner: "ns/up", Subnet: "sn", IPs: addrs(t, "10.0.0.101"), MAC: "02-00-00-00-00-BB"})
	if up.MAC != "02:00:00:00:00:bb" {
		t.Fatalf("MAC not canonicalized: %s", up.MAC)
	}
	mustAlloc(t, m, Request{Owner: "ns/up", Subnet: "sn", MAC: "02:00:00:00:00:BB"})
	_, err = m.Allocate(Request{Owner: "ns/up2", Subnet: "sn", MAC: "02:00:00:00:00:bb"})
	wantErr(t, err, ErrConflict, "held by ns/up")
	// The derived MAC of the next address (.3) is taken statically: the allocation gets a
	// random one instead of a duplicate.
	mustAlloc(t, m, Request{Owner: "ns/c", Subnet: "sn", IPs: addrs(t, "10.0.0.100"), MAC: "0a:58:0a:00:00:03"})
	d := mustAlloc(t, m, Request{Owner: "ns/d", Subnet: "sn"})
	if d.IPs[0] != addr(t, "10.0.0.3") || d.MAC == "0a:58:0a:00:00:03" {
		t.Fatalf("derived MAC collision not avoided: %+v", d)
	}
	checkRandomMAC(t, d.MAC)
	// After release the MAC is free again.
	m.Release("ns/a")
	mustAlloc(t, m, Request{Owner: "ns/b", Subnet: "sn", MAC: "02:00:00:00:00:aa"})
	// The same MAC in another subnet (another logical switch) is fine.
	addSpec(t, m, "other", v1alpha1.SubnetSpec{CIDRBlock: "10.1.0.0/24"})
	mustAlloc(t, m, Request{Owner: "ns/e", Subnet: "other", MAC: "02:00:00:00:00:aa"})
}

// TestNoMAC: an allocation of addresses only (a node's masquerade address, on a port with a MAC
// of its own) holds no MAC: two of them never conflict, the derived MAC of their address stays
// free for the next owner, and release and restore need none.
func TestNoMAC(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	a := mustAlloc(t, m, Request{Owner: "node-masq/a", Subnet: "sn", NoMAC: true})
	b := mustAlloc(t, m, Request{Owner: "node-masq/b", Subnet: "sn", NoMAC: true})
	if a.MAC != "" || b.MAC != "" {
		t.Fatalf("no MAC requested, got %q and %q", a.MAC, b.MAC)
	}
	if again := mustAlloc(t, m, Request{Owner: "node-masq/a", Subnet: "sn", IPs: a.IPs, NoMAC: true}); again.MAC != "" || again.IPs[0] != a.IPs[0] {
		t.Fatalf("retry: %+v, want %+v", again, a)
	}
	_, err := m.Allocate(Request{Owner: "ns/both", Subnet: "sn", MAC: "02:00:00:00:00:aa", NoMAC: true})
	wantErr(t, err, ErrInvalid, "no MAC")
	// a's address's derived MAC was not taken: an owner may ask for it.
	derived := mustAlloc(t, m, Request{Owner: "ns/p", Subnet: "sn"}).MAC
	mustAlloc(t, m, Request{Owner: "ns/static", Subnet: "sn", MAC: "0a:58:0a:00:00:02"})
	if derived == "" {
		t.Fatal("an ordinary allocation got no MAC")
	}
	m.Release("node-masq/a")
	if err := m.Restore("node-masq/a", Allocation{Subnet: "sn", IPs: a.IPs}); err != nil {
		t.Fatalf("restore without a MAC: %v", err)
	}
	if got := mustAlloc(t, m, Request{Owner: "node-masq/a", Subnet: "sn", NoMAC: true}); got.MAC != "" || got.IPs[0] != a.IPs[0] {
		t.Fatalf("after restore: %+v, want %v and no MAC", got, a.IPs)
	}
}

// checkRandomMAC asserts a generated random MAC: valid unicast, locally administered, outside
// the derived 0a:58 prefix.
func checkRandomMAC(t *testing.T, mac string) {
	t.Helper()
	if err := v1alpha1.ValidateMAC(mac); err != nil {
		t.Fatalf("generated MAC %s: %v", mac, err)
	}
	hw := parseMAC(t, mac)
	if hw[0]&0x02 == 0 || (hw[0] == 0x0a && hw[1] == 0x58) {
		t.Fatalf("random MAC %s is not locally administered or uses the derived prefix", mac)
	}
}

func TestRandomMACv6Only(t *testing.T) {
	m := newWith(t, "fd00::/64")
	seen := map[string]bool{}
	for i := 0; i < 500; i++ {
		a := mustAlloc(t, m, Request{Owner: owner(i), Subnet: "sn"})
		checkRandomMAC(t, a.MAC)
		if seen[a.MAC] {
			t.Fatalf("MAC %s twice", a.MAC)
		}
		seen[a.MAC] = true
	}
	// Draws that are taken or in the derived prefix are skipped.
	s := m.subnets["sn"]
	taken := parseMAC(t, mustAlloc(t, m, Request{Owner: "x", Subnet: "sn"}).MAC)
	draws := [][]byte{taken, {0x0a, 0x58, 1, 2, 3, 4}, {0xff, 1, 2, 3, 4, 5}}
	read := func(b []byte) (int, error) {
		copy(b, draws[0])
		draws = draws[1:]
		return len(b), nil
	}
	got, err := s.randomMAC(read)
	if err != nil || got != "fe:01:02:03:04:05" {
		t.Fatalf("randomMAC = %s, %v; want fe:01:02:03:04:05", got, err)
	}
	fail := func([]byte) (int, error) { return 0, errors.New("no entropy") }
	if _, err := s.randomMAC(fail); err == nil {
		t.Fatal("randomMAC ignored a read error")
	}
}

func parseMAC(t *testing.T, s string) net.HardwareAddr {
	t.Helper()
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		t.Fatalf("bad MAC %q", s)
	}
	return hw
}

func TestIdempotentAllocate(t *testing.T) {
	m := newWith(t, "10.0.0.0/24,fd00::/64")
	addSpec(t, m, "other", v1alpha1.SubnetSpec{CIDRBlock: "10.1.0.0/24"})
	req := Request{Owner: "ns/sts-0", Subnet: "sn", IPs: addrs(t, "10.0.0.50"), MAC: "02:00:00:00:00:50"}
	first := mustAlloc(t, m, req)
	again := mustAlloc(t, m, req)
	if ipsString(first.IPs) != ipsString(again.IPs) || first.MAC != again.MAC {
		t.Fatalf("second Allocate differs: %+v vs %+v", first, again)
	}
	// Asking without the statics (e.g. a retry that lost them) returns the same allocation too.
	if a := mustAlloc(t, m, Request{Owner: "ns/sts-0", Subnet: "sn"}); ipsString(a.IPs) != ipsString(first.IPs) {
		t.Fatalf("plain retry differs: %v", a.IPs)
	}
	for _, tc := range []struct {
		name string
		req  Request
		frag string
	}{
		{"other subnet", Request{Owner: "ns/sts-0", Subnet: "other"}, "subnet other"},
		{"other static IP", Request{Owner: "ns/sts-0", Subnet: "sn", IPs: addrs(t, "10.0.0.51")}, "static IP 10.0.0.51"},
		{"other MAC", Request{Owner: "ns/sts-0", Subnet: "sn", MAC: "02:00:00:00:00:51"}, "static MAC"},
		{"other pool", Request{Owner: "ns/sts-0", Subnet: "sn", Pool: "p"}, "pool p"},
	} {
		_, err := m.Allocate(tc.req)
		wantErr(t, err, ErrOwnerMismatch, tc.frag)
	}
	if u, _ := m.Usage("sn"); u.V4Used != 1 || u.V6Used != 1 {
		t.Fatalf("repeated Allocate changed usage: %+v", u)
	}
	// After Release the address is free for others; the owner starts over.
	if rel, ok := m.Release("ns/sts-0"); !ok || ipsString(rel.IPs) != ipsString(first.IPs) {
		t.Fatalf("Release = %+v, %v", rel, ok)
	}
	if _, ok := m.Release("ns/sts-0"); ok {
		t.Fatal("second Release reported success")
	}
	if _, ok := m.OwnerOf("sn", addr(t, "10.0.0.50")); ok {
		t.Fatal("released address still owned")
	}
	mustAlloc(t, m, Request{Owner: "ns/other", Subnet: "sn", IPs: addrs(t, "10.0.0.50")})
}

func TestAllocateInvalid(t *testing.T) {
	m := newWith(t, "10.0.0.0/24")
	_, err := m.Allocate(Request{Subnet: "sn"})
	wantErr(t, err, ErrInvalid, "without owner")
	_, err = m.Allocate(Request{Owner: "a", Subnet: "nope"})
	wantErr(t, err, ErrNoSubnet, `"nope"`)
	_, err = m.Allocate(Request{Owner: "a", Subnet: "sn", Pool: "nope"})
	wantErr(t, err, ErrNoPool, `"nope"`)
	_, err = m.Allocate(Request{Owner: "a", Subnet: "sn", IPs: []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.5")}})
	wantErr(t, err, ErrInvalid, "not a plain")
}
