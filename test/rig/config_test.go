package rig

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestAddressPlanIsDisjoint(t *testing.T) {
	seen := map[string]string{}
	add := func(what, ip string) {
		if other, dup := seen[ip]; dup {
			t.Fatalf("%s and %s share %s", what, other, ip)
		}
		seen[ip] = what
	}
	add("ic", ICDBIP().String())
	add("ext", ExternalHostIP().String())
	add("tor", ToRIP().String())
	add("foreign AZ", ForeignAZIP().String())
	if !fabricPrefix.Contains(ForeignAZIP()) {
		t.Fatalf("foreign AZ at %s is off the fabric", ForeignAZIP())
	}
	if fabricPrefix.Overlaps(outsideNet) || !outsideNet.Contains(OutsideHostIP()) {
		t.Fatalf("outside network %s overlaps the fabric or misses the outside host", outsideNet)
	}
	for c := 1; c <= 9; c++ {
		if PodCIDR(c).Overlaps(outsideNet) || ServiceCIDR(c).Overlaps(outsideNet) {
			t.Fatalf("cluster %d overlaps the outside network", c)
		}
		add("cp", ControlPlaneIP(c).String())
		for n := 1; n <= 50; n++ {
			ip := NodeIP(c, n)
			if !fabricPrefix.Contains(ip) {
				t.Fatalf("node %d/%d at %s is off the fabric", c, n, ip)
			}
			add(NodeName(c, n), ip.String())
		}
		for d := c + 1; d <= 9; d++ {
			if PodCIDR(c).Overlaps(PodCIDR(d)) || ServiceCIDR(c).Overlaps(ServiceCIDR(d)) || PodCIDR(c).Overlaps(ServiceCIDR(d)) {
				t.Fatalf("clusters %d and %d overlap", c, d)
			}
		}
		if PodCIDR(c).Overlaps(JoinCIDR) || fabricPrefix.Overlaps(PodCIDR(c)) {
			t.Fatalf("cluster %d pod CIDR overlaps join or fabric", c)
		}
	}
	if PodCIDR(1).String() != "10.16.0.0/16" {
		t.Fatalf("cluster 1 pod CIDR %s, want kovn's default 10.16.0.0/16", PodCIDR(1))
	}
}

// The foreign AZ's networks are routed to and from the clusters' (over the transit switch), so
// they must overlap nothing a cluster uses or reaches.
func TestForeignAZPlanIsDisjoint(t *testing.T) {
	others := []netip.Prefix{fabricPrefix, fabricPrefix6, outsideNet, providerNet, underlayNet, JoinCIDR, JoinCIDR6, SpeakerExternalIPCIDR}
	for c := 1; c <= 9; c++ {
		others = append(others, PodCIDR(c), ServiceCIDR(c), PodCIDR6(c), ServiceCIDR6(c))
	}
	mine := []netip.Prefix{ForeignTransitCIDR, ForeignAgreedCIDR, ForeignPrivateCIDR, ForeignTransitCIDR6, ForeignAgreedCIDR6, ForeignPrivateCIDR6}
	for i, p := range mine {
		for _, o := range append(others, mine[i+1:]...) {
			if p.Overlaps(o) {
				t.Errorf("foreign AZ network %s overlaps %s", p, o)
			}
		}
	}
	if !ForeignTransitCIDR.Contains(ForeignRouterTransitIP) || !ForeignAgreedCIDR.Contains(ForeignVM1IP) ||
		!ForeignPrivateCIDR.Contains(ForeignVM2IP) || len(foreignNets) != 2 {
		t.Fatal("a foreign AZ address is outside its network")
	}
	for i, n := range foreignNets {
		if n.routerIP() == n.vmIP || n.routerIP().String() != fmt.Sprintf("10.250.%d.1", i+1) {
			t.Errorf("%s: router %s, VM %s", n.sw, n.routerIP(), n.vmIP)
		}
		if !n.cidr6.Contains(n.vmIP6) || n.routerIP6().String() != fmt.Sprintf("fd00:250:%d::1", i+1) {
			t.Errorf("%s: router %s, VM %s (IPv6)", n.sw, n.routerIP6(), n.vmIP6)
		}
	}
	if got := ForeignAZIP6().String(); got != "fd00:30::200:1" {
		t.Errorf("foreign AZ IPv6 address %s, want fd00:30::200:1", got)
	}
}

func TestIPv6AddressPlanMirrorsIPv4(t *testing.T) {
	seen := map[netip.Addr]string{}
	add := func(what string, ip netip.Addr) {
		if other, dup := seen[ip]; dup {
			t.Fatalf("%s and %s share %s", what, other, ip)
		}
		if !fabricPrefix6.Contains(ip) {
			t.Fatalf("%s at %s is off the IPv6 fabric", what, ip)
		}
		seen[ip] = what
	}
	add("ic", ICDBIP6())
	add("ext", ExternalHostIP6())
	add("tor", ToRIP6())
	add("foreign AZ", ForeignAZIP6())
	if fabricPrefix6.Overlaps(outsideNet6) || !outsideNet6.Contains(OutsideHostIP6()) {
		t.Fatalf("outside network %s overlaps the fabric or misses the outside host", outsideNet6)
	}
	for c := 1; c <= 9; c++ {
		if PodCIDR6(c).Overlaps(outsideNet6) || ServiceCIDR6(c).Overlaps(outsideNet6) {
			t.Fatalf("cluster %d overlaps the outside network", c)
		}
		add("cp", ControlPlaneIP6(c))
		for n := 1; n <= 50; n++ {
			add(NodeName(c, n), NodeIP6(c, n))
		}
		for d := c + 1; d <= 9; d++ {
			if PodCIDR6(c).Overlaps(PodCIDR6(d)) || ServiceCIDR6(c).Overlaps(ServiceCIDR6(d)) || PodCIDR6(c).Overlaps(ServiceCIDR6(d)) {
				t.Fatalf("clusters %d and %d overlap", c, d)
			}
		}
		if PodCIDR6(c).Overlaps(JoinCIDR6) || fabricPrefix6.Overlaps(PodCIDR6(c)) || ServiceCIDR6(c).Bits() < 108 {
			t.Fatalf("cluster %d: pod CIDR overlaps join or fabric, or service range %s wider than /108", c, ServiceCIDR6(c))
		}
	}
	for got, want := range map[string]string{NodeIP6(1, 1).String(): "fd00:30::1:11", ControlPlaneIP6(9).String(): "fd00:30::9:1",
		NodeIP6(9, 50).String(): "fd00:30::9:60", PodCIDR6(1).String(): "fd00:10:16::/64", ServiceCIDR6(9).String(): "fd00:10:104::/112",
		ExternalHostIP6().String(): "fd00:30::100"} {
		if got != want {
			t.Errorf("IPv6 plan gives %s, want %s", got, want)
		}
	}
}

func TestFamiliesOrderPrimaryFirst(t *testing.T) {
	for fam, want := range map[string][]string{IPv4: {"172.30.1.11/16"}, IPv6: {"fd00:30::1:11/64"},
		Dual: {"172.30.1.11/16", "fd00:30::1:11/64"}} {
		cfg, err := Config{Dir: t.TempDir(), IPFamily: fam}.Defaults()
		if err != nil {
			t.Fatal(err)
		}
		if got := FabricAddrs(cfg.NodeIPs(1, 1)); !slices.Equal(got, want) {
			t.Errorf("%s: node addresses %v, want %v", fam, got, want)
		}
		if got := len(cfg.PodCIDRs(1)); got != len(want) {
			t.Errorf("%s: %d pod CIDRs, want %d", fam, got, len(want))
		}
	}
	if cfg, _ := (Config{Dir: t.TempDir()}).Defaults(); cfg.IPFamily != Dual {
		t.Fatalf("default family %q, want dual", cfg.IPFamily)
	}
	if _, err := (Config{Dir: t.TempDir(), IPFamily: "ipv5"}).Defaults(); err == nil {
		t.Fatal("ip family ipv5 accepted")
	}
	if got := strings.Join(addrAddArgs("fd00::1/64", "eth0"), " "); got != "addr add fd00::1/64 dev eth0 nodad" {
		t.Fatalf("IPv6 address without nodad: %s", got)
	}
}

func TestPrefixAndNames(t *testing.T) {
	a, b := PrefixFor("/a/rig"), PrefixFor("/b/rig")
	if a == b || a != PrefixFor("/a/rig") {
		t.Fatalf("prefixes not stable and distinct: %s %s", a, b)
	}
	cfg := Config{Prefix: a}
	for _, ns := range []string{cfg.FabricNS(), cfg.ICNS(), cfg.ExtNS(), cfg.ControlPlaneNS(9), cfg.NodeNS(9, 50)} {
		if !strings.HasPrefix(ns, a+"-") {
			t.Fatalf("namespace %s lacks the rig prefix", ns)
		}
	}
	if _, err := (Config{Dir: t.TempDir(), Clusters: 10}).Defaults(); err == nil {
		t.Fatal("10 clusters accepted")
	}
}

func TestDockerArchive(t *testing.T) {
	b, err := dockerArchive(imageSpec{Ref: "x.io/y:z", Entrypoint: []string{"/y"}}, []byte("binary"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if m.RepoTags[0] != "x.io/y:z" || files[m.Config] == nil || len(m.Layers) != 1 || files[m.Layers[0]] == nil {
		t.Fatalf("archive does not hold what the manifest names: %+v (files %d)", m, len(files))
	}
	if !strings.Contains(string(files[m.Config]), sha(files[m.Layers[0]])) {
		t.Fatal("config diff_id is not the layer's digest")
	}
	lr := tar.NewReader(bytes.NewReader(files[m.Layers[0]]))
	found := false
	for h, err := lr.Next(); err == nil; h, err = lr.Next() {
		if h.Name == "y" && h.Mode&0o111 != 0 {
			found = true
		}
	}
	if !found {
		t.Fatal("layer lacks the executable entrypoint")
	}
}

func TestCgroupHierarchies(t *testing.T) {
	hs, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	joined := "," + strings.Join(hs, ",") + ","
	for _, c := range []string{"cpu", "memory", "pids"} {
		if !strings.Contains(joined, ","+c+",") {
			t.Fatalf("hierarchies %v lack %s (kubelet needs it)", hs, c)
		}
	}
}

func TestICEndpointsNameEveryRaftMember(t *testing.T) {
	c := Config{IPFamily: Dual}
	if got := c.ICSBEndpoint(); got != "ssl:172.30.0.2:6646" {
		t.Fatalf("standalone IC-SB endpoint %q", got)
	}
	c.ICRaft = true
	want := []string{"ssl:172.30.0.2:6646", "ssl:172.30.0.2:6656", "ssl:172.30.0.2:6666"}
	if got := c.ICSBEndpoints(); !slices.Equal(got, want) {
		t.Fatalf("raft IC-SB endpoints %v, want %v", got, want)
	}
	if got := c.ICNBEndpoint(); got != "ssl:172.30.0.2:6645,ssl:172.30.0.2:6655,ssl:172.30.0.2:6665" {
		t.Fatalf("raft IC-NB endpoint list %q", got)
	}
	if got := (Config{IPFamily: Dual, InsecurePlainTCP: true}).ICNBEndpoint(); got != "tcp:172.30.0.2:6645" {
		t.Fatalf("insecure IC-NB endpoint %q", got)
	}
	// Client and raft ports of every member of both servers are distinct (the IC-SB server's
	// second database, OVN_ClusterSet, has its raft on + 3).
	seen := map[int]bool{}
	for _, base := range []int{PortICNB, PortICSB} {
		for m := 0; m < ICRaftMembers; m++ {
			ports := []int{icMemberPort(base, m), icMemberPort(base, m) + 2}
			if base == PortICSB {
				ports = append(ports, icMemberPort(base, m)+3)
			}
			for _, p := range ports {
				if seen[p] {
					t.Fatalf("port %d used twice", p)
				}
				seen[p] = true
			}
		}
	}
}

// The foreign AZ's topology is written by plain OVN tools, never by kovn's binaries, and a
// 1-cluster rig with it has the IC databases.
func TestForeignAZIsNotKovn(t *testing.T) {
	c := Config{Clusters: 1, Prefix: "krtest", IPFamily: Dual, KovnBinDir: "/kovn/bin", ForeignAZ: true}
	if !c.Interconnected() || (Config{Clusters: 1}).Interconnected() || !(Config{Clusters: 2}).Interconnected() {
		t.Fatal("Interconnected: want true with a foreign AZ or 2 clusters, false for 1 cluster alone")
	}
	cmds := strings.Join(append(c.foreignTopologyCmds(), c.foreignVMCmds(ovsHost{ovsRun: "/run/x"})...), "\n")
	if strings.Contains(cmds, c.KovnBinDir) {
		t.Fatalf("foreign AZ set-up runs a kovn binary:\n%s", cmds)
	}
	for _, want := range []string{"ovn-ic-nbctl --db=ssl:172.30.0.2:6645 --private-key=" + c.ForeignAZTLS().Key(),
		"--ca-cert=" + c.ForeignAZTLS().CA() + " --timeout=30 --may-exist ts-add ts-openstack",
		"lrp-add neutron-router neutron-router-ts 0a:fa:3c:00:00:02 169.254.60.2/24 fd00:a9fe:3c::2/64",
		"lrp-set-gateway-chassis neutron-router-ts openstack-gw 1", "lsp-set-addresses vm2 '0a:fa:02:00:00:0a 10.250.2.10 fd00:250:2::a'",
		"ip -n krtest-fazvm2 -6 route add default via fd00:250:2::1",
		"lsp-add ts-openstack ts-openstack-openstack", "ip -n krtest-fazvm1 route add default via 10.250.1.1",
		"external_ids:iface-id=vm2"} {
		if !strings.Contains(cmds, want) {
			t.Errorf("foreign AZ set-up lacks %q", want)
		}
	}
}
