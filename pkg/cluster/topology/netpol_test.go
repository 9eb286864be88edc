package topology

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func ppod(port string, ips ...string) PolicyPodIn {
	return PolicyPodIn{Port: port, IPs: addrs(ips...)}
}

func named(p PolicyPodIn, ports map[string]NamedPortIn) PolicyPodIn {
	p.NamedPorts = ports
	return p
}

var joinV4 = prefixes("100.64.0.0/16")

// aclByRule returns the policy's ACLs by their rule key ("ingress/0/ip4", "egress/deny").
func aclByRule(t *testing.T, sh Shard) map[string]ACL {
	t.Helper()
	out := map[string]ACL{}
	for _, a := range sh.ACLs {
		k := a.ExternalIDs[PolicyRuleKey]
		if f := a.ExternalIDs[IPFamilyKey]; f != "" {
			k += "/" + f
		}
		if _, dup := out[k]; dup {
			t.Fatalf("two ACLs for %s", k)
		}
		out[k] = a
	}
	return out
}

func matchOf(t *testing.T, sh Shard, rule string) string {
	t.Helper()
	a, ok := aclByRule(t, sh)[rule]
	if !ok {
		t.Fatalf("no ACL %s in %+v", rule, sh.ACLs)
	}
	return a.Match
}

// TestForNetworkPolicyGroupDenyNeighboursNodes: the group holds the selected pods' ports
// (sorted, once); each policy type gets a drop at 1000 on the group, an ARP/ND allow at 1001;
// no allow of the join subnet (a node's own join address passes by its node's ACL, ForNode);
// egress ACLs are from-lport on inport, after load balancing.
func TestForNetworkPolicyGroupDenyNeighboursNodes(t *testing.T) {
	in := NetworkPolicyIn{Namespace: "default", Name: "web", Ingress: true, Egress: true, JoinCIDRs: prefixes("100.64.0.0/16", "fd00:100:64::/64"),
		Pods: []PolicyPodIn{ppod("b.default", "10.16.0.6"), ppod("a.default", "10.16.0.5"), ppod("b.default", "10.16.0.6"), ppod("")}}
	sh := ForNetworkPolicy(in)
	pg := "kovn_np_default_web"
	if sh.OwnerType != OwnerNetworkPolicy || sh.Owner != "default/web" ||
		!reflect.DeepEqual(sh.PortGroups, []PortGroup{{Name: pg, Owned: true, Ports: []string{"a.default", "b.default"}}}) {
		t.Fatalf("shard %+v", sh)
	}
	egressOpts := map[string]string{"apply-after-lb": "true"}
	want := map[string]ACL{
		"ingress/deny": {PortGroup: pg, Name: "default/web:ingress/deny", Direction: "to-lport", Priority: 1000,
			Match: "outport == @" + pg, Action: "drop"},
		"ingress/neighbours": {PortGroup: pg, Name: "default/web:ingress/neighbours", Direction: "to-lport", Priority: 1001,
			Match: "outport == @" + pg + " && (arp || nd || nd_rs || nd_ra)", Action: "allow"},
		"egress/deny": {PortGroup: pg, Name: "default/web:egress/deny", Direction: "from-lport", Priority: 1000,
			Match: "inport == @" + pg, Action: "drop", Options: egressOpts},
		"egress/neighbours": {PortGroup: pg, Name: "default/web:egress/neighbours", Direction: "from-lport", Priority: 1001,
			Match: "inport == @" + pg + " && (arp || nd || nd_rs || nd_ra)", Action: "allow", Options: egressOpts},
	}
	got := aclByRule(t, sh)
	if len(got) != len(want) || len(sh.AddressSets) != 0 {
		t.Fatalf("ACLs %+v, address sets %+v", sh.ACLs, sh.AddressSets)
	}
	for k, w := range want {
		g := got[k]
		if g.ExternalIDs[PolicyKey] != "default/web" {
			t.Errorf("%s: external_ids %v", k, g.ExternalIDs)
		}
		g.ExternalIDs = nil
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", k, g, w)
		}
	}
}

// TestForNetworkPolicyDenyAll: ingress with no rules (from: [] and nothing else) is the deny,
// and ARP/ND alone; an egress-only policy leaves ingress open (no ingress ACLs).
func TestForNetworkPolicyDenyAll(t *testing.T) {
	sh := ForNetworkPolicy(NetworkPolicyIn{Namespace: "ns", Name: "deny", Ingress: true, JoinCIDRs: joinV4})
	if got := aclByRule(t, sh); len(got) != 2 || got["ingress/deny"].Action != "drop" {
		t.Fatalf("ACLs %+v", sh.ACLs)
	}
	sh = ForNetworkPolicy(NetworkPolicyIn{Namespace: "ns", Name: "deny", Egress: true, JoinCIDRs: joinV4})
	for _, a := range sh.ACLs {
		if a.Direction != "from-lport" {
			t.Errorf("egress-only policy has %+v", a)
		}
	}
}

// TestForNetworkPolicyPeers: each selector peer is a shared address set per family, named by
// its selector, listing its pods' addresses; a rule ORs its peers' sets and its ipBlocks (the
// CIDR minus the exceptions, as positive prefixes); a peer matching no pod still references
// its (empty) set, so the rule admits nothing but its ipBlocks; two rules with the same peer
// use one set.
func TestForNetworkPolicyPeers(t *testing.T) {
	web := PolicyPeerIn{Selector: PeerSelector("ns", "", "app=web", true), Pods: []PolicyPodIn{ppod("", "10.16.0.9", "fd00:10:16::9"), ppod("", "10.16.0.10")}}
	other := PolicyPeerIn{Selector: PeerSelector("", "team=z", "", false), Pods: []PolicyPodIn{ppod("", "10.16.0.11")}}
	none := PolicyPeerIn{Selector: PeerSelector("ns", "", "app=none", true)}
	in := NetworkPolicyIn{Namespace: "ns", Name: "db", Ingress: true, JoinCIDRs: prefixes("100.64.0.0/16", "fd00:100:64::/64"),
		IngressRules: []PolicyRuleIn{
			{Peers: []PolicyPeerIn{web, other},
				IPBlocks: []IPBlockIn{{CIDR: netip.MustParsePrefix("10.0.0.0/8"), Except: prefixes("10.2.0.0/16", "10.1.0.0/16", "fd00::/8")},
					{CIDR: netip.MustParsePrefix("fd00:1::/64")}}},
			{Peers: []PolicyPeerIn{none}},
			{Peers: []PolicyPeerIn{web}},
		}}
	sh := ForNetworkPolicy(in)
	pg := "@kovn_np_ns_db"
	s := func(p PolicyPeerIn, f string) string { return "$" + PeerAddressSet(p.Selector, f) }
	for rule, want := range map[string]string{
		"ingress/0/ip4": "outport == " + pg + " && ip4 && " + anyOf([]string{"ip4.src == {10.0.0.0/16, 10.3.0.0/16, 10.4.0.0/14, " +
			"10.8.0.0/13, 10.16.0.0/12, 10.32.0.0/11, 10.64.0.0/10, 10.128.0.0/9}",
			"ip4.src == " + s(web, "ip4"), "ip4.src == " + s(other, "ip4")}),
		"ingress/0/ip6": "outport == " + pg + " && ip6 && " + anyOf([]string{"ip6.src == " + s(web, "ip6"), "ip6.src == " + s(other, "ip6"),
			"ip6.src == fd00:1::/64"}),
		"ingress/1/ip4": "outport == " + pg + " && ip4 && ip4.src == " + s(none, "ip4"),
		"ingress/2/ip4": "outport == " + pg + " && ip4 && ip4.src == " + s(web, "ip4"),
	} {
		if got := matchOf(t, sh, rule); got != want {
			t.Errorf("%s:\n got %s\nwant %s", rule, got, want)
		}
	}
	wantSets := map[string][]string{
		PeerAddressSet(web.Selector, "ip4"): {"10.16.0.10", "10.16.0.9"}, PeerAddressSet(web.Selector, "ip6"): {"fd00:10:16::9"},
		PeerAddressSet(other.Selector, "ip4"): {"10.16.0.11"}, PeerAddressSet(other.Selector, "ip6"): {},
		PeerAddressSet(none.Selector, "ip4"): {}, PeerAddressSet(none.Selector, "ip6"): {}}
	if len(sh.AddressSets) != len(wantSets) {
		t.Fatalf("address sets %+v", sh.AddressSets)
	}
	for _, as := range sh.AddressSets {
		if w, ok := wantSets[as.Name]; !ok || !reflect.DeepEqual(as.Addresses, w) || !as.Shared || as.ExternalIDs[PeerSelectorKey] == "" {
			t.Errorf("address set %+v, want addresses %v", as, w)
		}
	}
	// Another policy with the web peer names the same set.
	sh2 := ForNetworkPolicy(NetworkPolicyIn{Namespace: "ns", Name: "cache", Ingress: true, JoinCIDRs: joinV4,
		IngressRules: []PolicyRuleIn{{Peers: []PolicyPeerIn{web}}}})
	if len(sh2.AddressSets) != 1 || sh2.AddressSets[0].Name != PeerAddressSet(web.Selector, "ip4") {
		t.Errorf("second policy's sets %+v", sh2.AddressSets)
	}
}

// TestForNetworkPolicyAllPeersAndPorts: a rule with no peers admits every source, with no
// address set; its ports are OR'ed: numbers, ranges (endPort), protocol-only, SCTP/UDP.
func TestForNetworkPolicyAllPeersAndPorts(t *testing.T) {
	in := NetworkPolicyIn{Namespace: "ns", Name: "p", Ingress: true, JoinCIDRs: joinV4, IngressRules: []PolicyRuleIn{
		{AllPeers: true, Ports: []PolicyPortIn{{Port: 80}, {Protocol: "UDP", Port: 53}, {Protocol: "TCP", Port: 8000, EndPort: 8010},
			{Protocol: "SCTP", Port: 7}}},
		{AllPeers: true, Ports: []PolicyPortIn{{Protocol: "UDP"}}},
		{AllPeers: true},
	}}
	sh := ForNetworkPolicy(in)
	if len(sh.AddressSets) != 0 {
		t.Fatalf("address sets for rules without peers: %+v", sh.AddressSets)
	}
	pg := "outport == @kovn_np_ns_p && ip4"
	for rule, want := range map[string]string{
		"ingress/0/ip4": pg + " && ((tcp.dst >= 8000 && tcp.dst <= 8010) || sctp.dst == 7 || tcp.dst == 80 || udp.dst == 53)",
		"ingress/1/ip4": pg + " && udp",
		"ingress/2/ip4": pg,
	} {
		if got := matchOf(t, sh, rule); got != want {
			t.Errorf("%s:\n got %s\nwant %s", rule, got, want)
		}
	}
}

// TestForNetworkPolicyNamedPortsIngress: a named port resolves against the selected pods:
// pods naming it with the same number share a clause on their addresses, pods naming another
// number get their own, pods without the name (or with it for another protocol) none. A rule
// whose only port resolves nowhere admits nothing: no ACL.
func TestForNetworkPolicyNamedPortsIngress(t *testing.T) {
	http := func(n int32) map[string]NamedPortIn {
		return map[string]NamedPortIn{"http": {Protocol: "TCP", Port: n}}
	}
	in := NetworkPolicyIn{Namespace: "ns", Name: "np", Ingress: true, JoinCIDRs: joinV4, Pods: []PolicyPodIn{
		named(ppod("a.ns", "10.16.0.5"), http(8080)), named(ppod("b.ns", "10.16.0.6"), http(8080)),
		named(ppod("c.ns", "10.16.0.7"), http(9090)), ppod("d.ns", "10.16.0.8"),
		named(ppod("e.ns", "10.16.0.9"), map[string]NamedPortIn{"http": {Protocol: "UDP", Port: 8080}}),
	}, IngressRules: []PolicyRuleIn{
		{AllPeers: true, Ports: []PolicyPortIn{{Name: "http"}, {Port: 443}}},
		{AllPeers: true, Ports: []PolicyPortIn{{Name: "metrics"}}},
	}}
	sh := ForNetworkPolicy(in)
	want := "outport == @kovn_np_ns_np && ip4 && ((ip4.dst == 10.16.0.7 && tcp.dst == 9090) || " +
		"(ip4.dst == {10.16.0.5, 10.16.0.6} && tcp.dst == 8080) || tcp.dst == 443)"
	if got := matchOf(t, sh, "ingress/0/ip4"); got != want {
		t.Errorf("named ingress:\n got %s\nwant %s", got, want)
	}
	if _, ok := aclByRule(t, sh)["ingress/1/ip4"]; ok {
		t.Errorf("a named port no pod has produced an ACL")
	}
}

// TestForNetworkPolicyEgress: egress rules are from-lport on inport, match destinations, run
// after load balancing; named ports resolve against the peer pods.
func TestForNetworkPolicyEgress(t *testing.T) {
	dns := map[string]NamedPortIn{"dns": {Protocol: "UDP", Port: 53}}
	in := NetworkPolicyIn{Namespace: "ns", Name: "eg", Egress: true, JoinCIDRs: joinV4, Pods: []PolicyPodIn{ppod("a.ns", "10.16.0.5")},
		EgressRules: []PolicyRuleIn{{Peers: []PolicyPeerIn{{Selector: "namespace=ns;pods=", Pods: []PolicyPodIn{named(ppod("", "10.16.0.20"), dns),
			named(ppod("", "10.16.0.21"), dns), ppod("", "10.16.0.22")}}},
			IPBlocks: []IPBlockIn{{CIDR: netip.MustParsePrefix("192.168.0.0/24")}},
			Ports:    []PolicyPortIn{{Protocol: "UDP", Name: "dns"}}}}}
	sh := ForNetworkPolicy(in)
	a := aclByRule(t, sh)["egress/0/ip4"]
	want := "inport == @kovn_np_ns_eg && ip4 && (ip4.dst == $" + PeerAddressSet("namespace=ns;pods=", "ip4") + " || ip4.dst == 192.168.0.0/24) && " +
		"(ip4.dst == {10.16.0.20, 10.16.0.21} && udp.dst == 53)"
	if a.Match != want || a.Direction != "from-lport" || a.Action != "allow-related" || a.Priority != PriorityPolicyAllow ||
		a.Options["apply-after-lb"] != "true" {
		t.Errorf("egress ACL %+v\nwant match %s", a, want)
	}
	if _, ok := aclByRule(t, sh)["ingress/nodes/ip4"]; ok {
		t.Error("egress-only policy allows nodes in")
	}
}

// TestForNetworkPolicyDeterministic: the same policy listed in another order (pods, peers,
// IPs, ports) yields an identical shard.
func TestForNetworkPolicyDeterministic(t *testing.T) {
	mk := func(rev bool) NetworkPolicyIn {
		pods := []PolicyPodIn{ppod("a.ns", "10.16.0.5"), ppod("b.ns", "10.16.0.6")}
		peers := []PolicyPeerIn{{Selector: "a"}, {Selector: "b", Pods: []PolicyPodIn{ppod("", "10.16.0.9"), ppod("", "10.16.0.10")}}}
		ports := []PolicyPortIn{{Port: 80}, {Port: 443}}
		blocks := []IPBlockIn{{CIDR: netip.MustParsePrefix("10.0.0.0/8")}, {CIDR: netip.MustParsePrefix("172.16.0.0/12")}}
		if rev {
			pods[0], pods[1], peers[0], peers[1], ports[0], ports[1], blocks[0], blocks[1] = pods[1], pods[0], peers[1], peers[0], ports[1], ports[0], blocks[1], blocks[0]
		}
		if rev {
			p := peers[0].Pods // "b" after the swap
			p[0], p[1] = p[1], p[0]
		}
		r := PolicyRuleIn{Peers: peers, IPBlocks: blocks, Ports: ports}
		return NetworkPolicyIn{Namespace: "ns", Name: "d", Ingress: true, Egress: true, JoinCIDRs: joinV4, Pods: pods,
			IngressRules: []PolicyRuleIn{r}, EgressRules: []PolicyRuleIn{r}}
	}
	if a, b := ForNetworkPolicy(mk(false)), ForNetworkPolicy(mk(true)); !reflect.DeepEqual(a, b) {
		t.Errorf("order changed the shard:\n%+v\n%+v", a, b)
	}
}

// TestPolicyNames: group and set names are OVN identifiers, unique for names differing only
// in punctuation; ACL names fit the schema's 63 bytes and stay unique when cut.
func TestPolicyNames(t *testing.T) {
	ident := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	a, b := PolicyPortGroup("ns", "a-b"), PolicyPortGroup("ns", "a.b")
	if a == b || !ident.MatchString(a) || !ident.MatchString(PeerAddressSet("namespace=n-s;pods=a.b/c in (x,y)", "ip6")) {
		t.Errorf("names %q %q", a, b)
	}
	long := strings.Repeat("x", 60)
	n1, n2 := PolicyACLName("ns/"+long, "ingress/1/ip4"), PolicyACLName("ns/"+long, "ingress/1/ip6")
	if len(n1) > 63 || len(n2) > 63 || n1 == n2 || !strings.HasPrefix(n1, "ns/xxx") {
		t.Errorf("ACL names %q %q", n1, n2)
	}
}

// TestForNetworkPolicyLogging: the namespace's deny severity goes on the deny ACLs, its allow
// severity on the rules' ACLs; the neighbour allowances never log.
func TestForNetworkPolicyLogging(t *testing.T) {
	in := NetworkPolicyIn{Namespace: "default", Name: "web", Ingress: true, Egress: true, JoinCIDRs: prefixes("100.64.0.0/16"),
		Pods: []PolicyPodIn{ppod("a.default", "10.16.0.5")}, IngressRules: []PolicyRuleIn{{AllPeers: true}},
		Logging: ACLLogging{Deny: "alert", Allow: "notice"}}
	want := map[string]string{"ingress/deny": "alert", "egress/deny": "alert", "ingress/0/ip4": "notice",
		"ingress/neighbours": "", "egress/neighbours": ""}
	got := aclByRule(t, ForNetworkPolicy(in))
	if len(got) != len(want) {
		t.Fatalf("ACLs %+v", got)
	}
	for k, sev := range want {
		if got[k].LogSeverity != sev {
			t.Errorf("%s logs at %q, want %q", k, got[k].LogSeverity, sev)
		}
	}
	in.Logging = ACLLogging{}
	for k, a := range aclByRule(t, ForNetworkPolicy(in)) {
		if a.LogSeverity != "" {
			t.Errorf("logging off: %s logs at %q", k, a.LogSeverity)
		}
	}
}

// TestForNetworkPolicyIPBlockExcept: an ipBlock's exceptions are never a "!=" (its flows
// multiply in ovn-controller) but the prefixes left; an ipBlock its exceptions empty admits
// nothing, so a rule with only that peer gets no ACL, and beside other peers it drops out.
func TestForNetworkPolicyIPBlockExcept(t *testing.T) {
	whole := IPBlockIn{CIDR: netip.MustParsePrefix("10.1.0.0/16"), Except: prefixes("10.0.0.0/8")}
	in := NetworkPolicyIn{Namespace: "ns", Name: "x", Ingress: true, JoinCIDRs: prefixes("100.64.0.0/16", "fd00:100:64::/64"),
		IngressRules: []PolicyRuleIn{
			{IPBlocks: []IPBlockIn{whole}},
			{IPBlocks: []IPBlockIn{whole, {CIDR: netip.MustParsePrefix("192.168.0.0/24"), Except: prefixes("192.168.0.128/25")}}},
			{IPBlocks: []IPBlockIn{{CIDR: netip.MustParsePrefix("fd00::/62"), Except: prefixes("fd00::/64", "fd00:0:0:3::/64")}}},
		}}
	sh := ForNetworkPolicy(in)
	acls := aclByRule(t, sh)
	for _, rule := range []string{"ingress/0/ip4", "ingress/0/ip6", "ingress/1/ip6", "ingress/2/ip4"} {
		if a, ok := acls[rule]; ok {
			t.Errorf("%s admits nothing but has ACL %s", rule, a.Match)
		}
	}
	pg := "outport == @kovn_np_ns_x"
	for rule, want := range map[string]string{
		"ingress/1/ip4": pg + " && ip4 && ip4.src == 192.168.0.0/25",
		"ingress/2/ip6": pg + " && ip6 && ip6.src == {fd00:0:0:1::/64, fd00:0:0:2::/64}",
	} {
		if got := matchOf(t, sh, rule); got != want {
			t.Errorf("%s:\n got %s\nwant %s", rule, got, want)
		}
	}
	for _, a := range sh.ACLs {
		if strings.Contains(a.Match, "!=") {
			t.Errorf("%s has a negated match: %s", a.Name, a.Match)
		}
	}
}

// TestCidrMinus: the CIDR minus its exceptions, as the fewest positive prefixes in address
// order, in both families, whatever the exceptions (nested, overlapping, repeated, outside
// the CIDR, of the other family, covering it whole).
func TestCidrMinus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cidr   string
		except []string
		want   []string
	}{
		{name: "no exceptions", cidr: "10.0.0.0/8", want: []string{"10.0.0.0/8"}},
		{name: "unmasked cidr", cidr: "10.1.2.3/8", want: []string{"10.0.0.0/8"}},
		{name: "one /16", cidr: "10.0.0.0/8", except: []string{"10.1.0.0/16"},
			want: []string{"10.0.0.0/16", "10.2.0.0/15", "10.4.0.0/14", "10.8.0.0/13", "10.16.0.0/12", "10.32.0.0/11", "10.64.0.0/10", "10.128.0.0/9"}},
		{name: "except == cidr", cidr: "10.0.0.0/8", except: []string{"10.0.0.0/8"}, want: nil},
		{name: "except covers cidr", cidr: "10.1.0.0/16", except: []string{"10.0.0.0/8"}, want: nil},
		{name: "except outside", cidr: "10.0.0.0/8", except: []string{"11.0.0.0/8", "192.168.0.0/16"}, want: []string{"10.0.0.0/8"}},
		{name: "other family ignored", cidr: "10.0.0.0/8", except: []string{"::/0", "::ffff:10.0.0.0/104"}, want: []string{"10.0.0.0/8"}},
		{name: "nested", cidr: "10.0.0.0/14", except: []string{"10.1.0.0/16", "10.1.2.0/24"},
			want: []string{"10.0.0.0/16", "10.2.0.0/15"}},
		{name: "overlapping and repeated", cidr: "192.168.0.0/24", except: []string{"192.168.0.0/26", "192.168.0.32/27", "192.168.0.0/26", "192.168.0.64/26"},
			want: []string{"192.168.0.128/25"}},
		{name: "halves excepted", cidr: "192.168.0.0/24", except: []string{"192.168.0.0/25", "192.168.0.128/25"}, want: nil},
		{name: "unmasked except", cidr: "192.168.0.0/24", except: []string{"192.168.0.200/25"}, want: []string{"192.168.0.0/25"}},
		{name: "/0 with exceptions", cidr: "0.0.0.0/0", except: []string{"10.0.0.0/8", "192.168.0.0/16"},
			want: []string{"0.0.0.0/5", "8.0.0.0/7", "11.0.0.0/8", "12.0.0.0/6", "16.0.0.0/4", "32.0.0.0/3", "64.0.0.0/2", "128.0.0.0/2",
				"192.0.0.0/9", "192.128.0.0/11", "192.160.0.0/13", "192.169.0.0/16", "192.170.0.0/15", "192.172.0.0/14",
				"192.176.0.0/12", "192.192.0.0/10", "193.0.0.0/8", "194.0.0.0/7", "196.0.0.0/6", "200.0.0.0/5", "208.0.0.0/4", "224.0.0.0/3"}},
		{name: "/32", cidr: "10.0.0.1/32", except: []string{"10.0.0.2/32"}, want: []string{"10.0.0.1/32"}},
		{name: "/32 excepted", cidr: "10.0.0.1/32", except: []string{"10.0.0.1/32"}, want: nil},
		{name: "/32 out of a /30", cidr: "10.0.0.0/30", except: []string{"10.0.0.2/32"}, want: []string{"10.0.0.0/31", "10.0.0.3/32"}},
		{name: "IPv6", cidr: "fd00::/48", except: []string{"fd00:0:0:8000::/49"}, want: []string{"fd00::/49"}},
		{name: "IPv6 /128 out of a /126", cidr: "fd00::/126", except: []string{"fd00::1/128"}, want: []string{"fd00::/128", "fd00::2/127"}},
		{name: "IPv6 /128 excepted", cidr: "fd00::5/128", except: []string{"fd00::5/128"}, want: nil},
		{name: "IPv6 /0", cidr: "::/0", except: []string{"8000::/1", "4000::/2"}, want: []string{"::/2"}},
		{name: "IPv6 except outside, v4 ignored", cidr: "fd00::/64", except: []string{"fd01::/64", "10.0.0.0/8"}, want: []string{"fd00::/64"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := prefixStrings(prefixesLeft(netip.MustParsePrefix(tc.cidr), prefixes(tc.except...)))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("prefixesLeft(%s, %v)\n got %v\nwant %v", tc.cidr, tc.except, got, tc.want)
			}
		})
	}
}

// TestCidrMinusExhaustive checks cidrMinus against every address of a /20 for random
// exceptions: an address is in the result exactly when it is in the CIDR and in no exception;
// the result is sorted, disjoint, has no two halves of one prefix (so no fewer prefixes could
// hold it), and stays within k*(32-20) prefixes.
func TestCidrMinusExhaustive(t *testing.T) {
	cidr := netip.MustParsePrefix("10.16.0.0/20")
	rng := rand.New(rand.NewPCG(43, 5))
	for round := 0; round < 40; round++ {
		var except []netip.Prefix
		for k := rng.IntN(6); k > 0; k-- {
			a := netip.AddrFrom4([4]byte{10, 16 + byte(rng.IntN(2)), byte(rng.IntN(32)), byte(rng.IntN(256))})
			except = append(except, netip.PrefixFrom(a, 16+rng.IntN(17)).Masked())
		}
		got := prefixesLeft(cidr, except)
		if len(got) > max(1, len(except)*(32-cidr.Bits())) {
			t.Errorf("except %v: %d prefixes", except, len(got))
		}
		for i := 1; i < len(got); i++ {
			if !lastAddr(got[i-1]).Less(got[i].Addr()) {
				t.Errorf("except %v: %s and %s overlap or are out of order", except, got[i-1], got[i])
			}
			if got[i-1].Bits() == got[i].Bits() && netip.PrefixFrom(got[i-1].Addr(), got[i].Bits()-1).Masked().Contains(got[i].Addr()) {
				t.Errorf("except %v: %s and %s are halves of one prefix", except, got[i-1], got[i])
			}
		}
		for a := cidr.Addr(); cidr.Contains(a); a = a.Next() {
			want := !slices.ContainsFunc(except, func(e netip.Prefix) bool { return e.Contains(a) })
			if in := slices.ContainsFunc(got, func(p netip.Prefix) bool { return p.Contains(a) }); in != want {
				t.Fatalf("except %v: %s in result %v, want %v (result %v)", except, a, in, want, got)
			}
		}
	}
}

func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// A namespace's logged policy ACLs name that namespace's meter, so its flood spends its own
// budget; ACLs that do not log name none. Names stay apart however namespaces are spelled.
func TestPolicyACLsLogThroughTheirNamespaceMeter(t *testing.T) {
	in := NetworkPolicyIn{Namespace: "team-a", Name: "web", Ingress: true, JoinCIDRs: prefixes("100.64.0.0/16"),
		Pods: []PolicyPodIn{ppod("a.team-a", "10.16.0.5")}, IngressRules: []PolicyRuleIn{{AllPeers: true}},
		Logging: ACLLogging{Deny: "alert"}}
	for _, a := range ForNetworkPolicy(in).ACLs {
		if want := map[bool]string{true: NamespaceLogMeter("team-a"), false: ""}[a.LogSeverity != ""]; a.Meter != want {
			t.Errorf("%s (log %q): meter %q, want %q", a.Name, a.LogSeverity, a.Meter, want)
		}
	}
	if NamespaceLogMeter("team-a") == NamespaceLogMeter("team_a") || NamespaceLogMeter("a") == ACLLogMeter {
		t.Errorf("meter names collide: %q %q %q", NamespaceLogMeter("team-a"), NamespaceLogMeter("team_a"), NamespaceLogMeter("a"))
	}
	if sh := ForNamespaceLogMeter("team-a", 20); len(sh.Meters) != 1 || sh.Meters[0].Name != NamespaceLogMeter("team-a") || sh.Meters[0].RatePPS != 20 {
		t.Errorf("namespace meter shard %+v", sh)
	}
}
