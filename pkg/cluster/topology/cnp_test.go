package topology

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/kovn/kovn/api/v1alpha1/match"
)

func cnpPod(port string, ips ...string) PolicyPodIn {
	p := PolicyPodIn{Port: port}
	for _, s := range ips {
		p.IPs = append(p.IPs, netip.MustParseAddr(s))
	}
	return p
}

func cnpPeers(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		if !strings.Contains(s, "/") {
			a := netip.MustParseAddr(s)
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

var v4Join = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}

func aclsByKey(sh Shard) map[string]ACL {
	out := map[string]ACL{}
	for _, a := range sh.ACLs {
		out[a.ExternalIDs[PolicyRuleKey]+"/"+a.ExternalIDs[IPFamilyKey]] = a
	}
	return out
}

func setOf(sh Shard, name string) []string {
	for _, as := range sh.AddressSets {
		if as.Name == name {
			return as.Addresses
		}
	}
	return nil
}

// Admin policies take priorities from the top of their band in (priority, name) order, one
// per rule index; Baseline ones from the top of theirs; Accept is allow-related, Deny a drop
// (silent, as the API's blocked means a timeout); egress ACLs run after load balancing.
func TestClusterPolicyPriorities(t *testing.T) {
	subj := []PolicyPodIn{cnpPod("a.ns1", "10.16.0.5")}
	in := ClusterPoliciesIn{JoinCIDRs: v4Join, Policies: []ClusterPolicyIn{
		{Name: "later", Admin: true, Priority: 10, Subject: subj, Ingress: []ClusterRuleIn{
			{Action: "Accept", PeerPrefixes: cnpPeers("10.16.0.6")}, {Action: "Deny", PeerPrefixes: cnpPeers("10.16.0.0/16")}}},
		{Name: "first", Admin: true, Priority: 5, Subject: subj, Egress: []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("0.0.0.0/0")}}},
		{Name: "same-prio-b", Admin: true, Priority: 10, Subject: subj, Ingress: []ClusterRuleIn{{Action: "Accept"}}},
		{Name: "base", Priority: 0, Subject: subj, Ingress: []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("10.16.0.7")}}},
	}}
	shards, errs := ForClusterNetworkPolicies(in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]map[string]struct {
		prio   int
		action string
	}{
		"first":       {"egress/0/ip4": {28999, "drop"}, "egress/neighbours/": {PriorityAdminNeighbours, "allow"}},
		"later":       {"ingress/0/ip4": {28998, "allow-related"}, "ingress/1/ip4": {28997, "drop"}, "ingress/neighbours/": {PriorityAdminNeighbours, "allow"}},
		"same-prio-b": {"ingress/0/ip4": {28996, "allow-related"}, "ingress/neighbours/": {PriorityAdminNeighbours, "allow"}},
		"base":        {"ingress/0/ip4": {998, "drop"}, "ingress/neighbours/": {PriorityBaselineNeighbours, "allow"}},
	}
	for name, acls := range want {
		got := aclsByKey(shards[name])
		if len(got) != len(acls) {
			t.Errorf("%s: ACLs %v, want %d", name, got, len(acls))
		}
		for k, w := range acls {
			a := got[k]
			if a.Priority != w.prio || a.Action != w.action {
				t.Errorf("%s %s: priority %d action %q, want %d %q", name, k, a.Priority, a.Action, w.prio, w.action)
			}
			if egress := strings.HasPrefix(k, "egress"); egress != (a.Options["apply-after-lb"] == "true") || egress != (a.Direction == "from-lport") {
				t.Errorf("%s %s: direction %s options %v", name, k, a.Direction, a.Options)
			}
		}
	}
	pg := ClusterPolicyPortGroup("later", "")
	if m := aclsByKey(shards["later"])["ingress/0/ip4"].Match; m != fmt.Sprintf("outport == @%s && ip4.src == $%s", pg, cnpAddressSet("later", "ingress/0", "ip4")) {
		t.Errorf("match %q", m)
	}
	if got := setOf(shards["later"], cnpAddressSet("later", "ingress/1", "ip4")); !reflect.DeepEqual(got, []string{"10.16.0.0/16"}) {
		t.Errorf("set %v", got)
	}
	if len(shards["later"].PortGroups) != 1 || !reflect.DeepEqual(shards["later"].PortGroups[0].Ports, []string{"a.ns1"}) {
		t.Errorf("port groups %+v", shards["later"].PortGroups)
	}
}

// An Admin Pass rule has no ACL: the Admin rules after it lose what it matches, by subject
// pods, peer addresses and ports, so that traffic falls through to NetworkPolicy's band.
func TestClusterPolicyAdminPass(t *testing.T) {
	p1, p2, p3 := cnpPod("p1.ns", "10.16.0.1"), cnpPod("p2.ns", "10.16.0.2"), cnpPod("p3.ns", "10.16.0.3")
	pass := ClusterPolicyIn{Name: "pass", Admin: true, Priority: 1, Subject: []PolicyPodIn{p1, p2},
		Ingress: []ClusterRuleIn{{Action: "Pass", PeerPrefixes: cnpPeers("10.17.0.1"), Protocols: []ClusterProtocolIn{{Protocol: "TCP", Start: 80, End: 80}}}}}
	deny := ClusterPolicyIn{Name: "deny", Admin: true, Priority: 2, Subject: []PolicyPodIn{p1, p3},
		Ingress: []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("10.17.0.1", "10.17.0.2")}}}
	shards, _ := ForClusterNetworkPolicies(ClusterPoliciesIn{JoinCIDRs: v4Join, Policies: []ClusterPolicyIn{pass, deny}})
	if n := len(shards["pass"].ACLs); n != 1 { // its neighbour allow only
		t.Errorf("pass policy has %d ACLs, want the neighbour allow alone: %+v", n, shards["pass"].ACLs)
	}
	got := map[string]string{} // ports of the cell's group + peers -> match's L4 part
	groups := map[string][]string{}
	for _, g := range shards["deny"].PortGroups {
		groups[g.Name] = g.Ports
	}
	for _, a := range shards["deny"].ACLs {
		if a.Action != "drop" {
			continue
		}
		pg := strings.TrimPrefix(strings.Fields(a.Match)[2], "@")
		set := strings.TrimPrefix(strings.Fields(a.Match)[6], "$")
		l4 := ""
		if _, rest, ok := strings.Cut(a.Match, "$"+set+" && "); ok {
			l4 = rest
		}
		got[strings.Join(groups[pg], ",")+" from "+strings.Join(setOf(shards["deny"], set), ",")] = l4
	}
	want := map[string]string{
		"p3.ns from 10.17.0.1,10.17.0.2": "", // p3 is not the Pass rule's subject
		"p1.ns from 10.17.0.2":           "", // not the Pass rule's peer
		"p1.ns from 10.17.0.1":           "(tcp.dst >= 0 && tcp.dst <= 79) || (tcp.dst >= 81 && tcp.dst <= 65535) || udp || sctp || " + otherProtocols,
	}
	want["p1.ns from 10.17.0.1"] = "(" + want["p1.ns from 10.17.0.1"] + ")"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deny cells:\n got %v\nwant %v", got, want)
	}
	// Baseline Pass ends the Baseline tier: an allow, not a cut.
	base := ClusterPolicyIn{Name: "base", Priority: 1, Subject: []PolicyPodIn{p1}, Ingress: []ClusterRuleIn{{Action: "Pass"}}}
	shards, _ = ForClusterNetworkPolicies(ClusterPoliciesIn{JoinCIDRs: v4Join, Policies: []ClusterPolicyIn{base}})
	if a := aclsByKey(shards["base"])["ingress/0/ip4"]; a.Action != "allow-related" || a.Priority != PriorityBaselineTop {
		t.Errorf("baseline pass: %+v", a)
	}
}

// Named ports resolve on the destination pods: the subject's for ingress (a cell per port
// number, with the pods naming it that way), the peer pods' for egress.
func TestClusterPolicyNamedPorts(t *testing.T) {
	web80, web8080 := cnpPod("a.ns", "10.16.0.1"), cnpPod("b.ns", "10.16.0.2")
	web80.NamedPorts = map[string]NamedPortIn{"web": {Protocol: "TCP", Port: 80}}
	web8080.NamedPorts = map[string]NamedPortIn{"web": {Protocol: "TCP", Port: 8080}}
	other := cnpPod("c.ns", "10.16.0.3")
	in := ClusterPoliciesIn{JoinCIDRs: v4Join, Policies: []ClusterPolicyIn{
		{Name: "in", Admin: true, Subject: []PolicyPodIn{web80, web8080, other},
			Ingress: []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("10.17.0.0/16"), Protocols: []ClusterProtocolIn{{NamedPort: "web"}}}}},
		{Name: "out", Admin: true, Subject: []PolicyPodIn{other},
			Egress: []ClusterRuleIn{{Action: "Accept", PeerPrefixes: cnpPeers("10.16.0.1", "10.16.0.2"), PeerPods: []PolicyPodIn{web80, web8080},
				Protocols: []ClusterProtocolIn{{NamedPort: "web"}, {Protocol: "UDP", Start: 53, End: 53}}}}},
	}}
	shards, _ := ForClusterNetworkPolicies(in)
	acls := aclsByKey(shards["in"])
	if len(acls) != 3 {
		t.Fatalf("ingress ACLs %v", acls)
	}
	for cell, port := range map[string]string{"ingress/0/tcp/80": "a.ns", "ingress/0/tcp/8080": "b.ns"} {
		a := acls[cell+"/ip4"]
		if !strings.HasSuffix(a.Match, "tcp.dst == "+strings.Split(cell, "/")[3]) {
			t.Errorf("%s: match %q", cell, a.Match)
		}
		for _, g := range shards["in"].PortGroups {
			if g.Name == a.PortGroup && !reflect.DeepEqual(g.Ports, []string{port}) {
				t.Errorf("%s: group ports %v, want %s", cell, g.Ports, port)
			}
		}
	}
	out := aclsByKey(shards["out"])
	if a := out["egress/0/ip4"]; !strings.HasSuffix(a.Match, "udp.dst == 53") {
		t.Errorf("numbered egress cell: %q", a.Match)
	}
	if got := setOf(shards["out"], cnpAddressSet("out", "egress/0/tcp/8080", "ip4")); !reflect.DeepEqual(got, []string{"10.16.0.2"}) {
		t.Errorf("egress named port 8080 peers %v", got)
	}
}

// A tier holds as many rule indices as its band: the policy that does not fit gets an error
// and no shard; one kept (unresolved) still takes its place, so the next one does not fit.
func TestClusterPolicyNoRoom(t *testing.T) {
	var in ClusterPoliciesIn
	width := PriorityBaselineTop - PriorityBaselineBottom + 1
	for i := 0; i < width; i++ {
		in.Policies = append(in.Policies, ClusterPolicyIn{Name: fmt.Sprintf("p%04d", i), Priority: 1, Ingress: []ClusterRuleIn{{Action: "Deny"}}})
	}
	last := fmt.Sprintf("p%04d", width-1)
	in.Policies[width-1] = ClusterPolicyIn{Name: last, Priority: 1, Keep: true, Width: 1} // takes the band's last index
	in.Policies = append(in.Policies, ClusterPolicyIn{Name: "z", Priority: 1, Ingress: []ClusterRuleIn{{Action: "Deny"}}})
	shards, errs := ForClusterNetworkPolicies(in)
	if len(errs) != 1 || errs["z"] == nil {
		t.Fatalf("errors %v, want one for z", errs)
	}
	if _, ok := shards[last]; ok || len(shards) != width-1 {
		t.Errorf("%d shards (kept policy's: %t)", len(shards), ok)
	}
	if p := aclsByKey(shards["p0004"])["ingress/0/ip6"].Priority; p != PriorityBaselineTop-4 {
		t.Errorf("p0004 at %d, want %d", p, PriorityBaselineTop-4)
	}
}

func TestCNPSets(t *testing.T) {
	if got := rangesMinus([]portRange{{0, 100}}, []portRange{{10, 20}, {50, 50}, {90, 200}}); !reflect.DeepEqual(got, []portRange{{0, 9}, {21, 49}, {51, 89}}) {
		t.Errorf("rangesMinus %v", got)
	}
	if got := prefixesMinus(cnpPeers("10.0.0.0/30", "fd00::1"), cnpPeers("10.0.0.1", "fd00::/64")); !reflect.DeepEqual(got, cnpPeers("10.0.0.0", "10.0.0.2/31")) {
		t.Errorf("prefixesMinus %v", got)
	}
	if got := prefixesAnd(cnpPeers("10.0.0.0/8", "10.1.2.3"), cnpPeers("10.1.0.0/16", "192.168.0.1")); !reflect.DeepEqual(got, cnpPeers("10.1.0.0/16")) {
		t.Errorf("prefixesAnd %v", got)
	}
	if got := allTraffic().minus(allTraffic()); !got.empty() {
		t.Errorf("all minus all: %+v", got)
	}
	var s svcSet
	s.add("udp", portRange{53, 53})
	s.add("tcp", portRange{1000, 2000})
	if m := s.match(); m != "((tcp.dst >= 1000 && tcp.dst <= 2000) || udp.dst == 53)" {
		t.Errorf("match %q", m)
	}
}

// Every match the compiler writes is one northd takes (kovn's checker knows its nominal
// fields: `ip.proto != ...` and `!tcp` are refused, and an ACL northd refuses is no ACL).
func TestClusterPolicyMatchesParse(t *testing.T) {
	p1, p2 := cnpPod("p1.ns", "10.16.0.1", "fd00::1"), cnpPod("p2.ns", "10.16.0.2", "fd00::2")
	in := ClusterPoliciesIn{Policies: []ClusterPolicyIn{
		{Name: "pass", Admin: true, Priority: 1, Subject: []PolicyPodIn{p1},
			Egress: []ClusterRuleIn{{Action: "Pass", PeerPrefixes: cnpPeers("10.0.0.0/8"), Protocols: []ClusterProtocolIn{{Protocol: "UDP", Start: 53, End: 53}}}}},
		{Name: "deny", Admin: true, Priority: 2, Subject: []PolicyPodIn{p1, p2},
			Egress:  []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("0.0.0.0/0", "::/0")}},
			Ingress: []ClusterRuleIn{{Action: "Accept", PeerPrefixes: cnpPeers("10.16.0.2"), Protocols: []ClusterProtocolIn{{Protocol: "SCTP", Start: 9000, End: 9005}}}}},
	}}
	shards, _ := ForClusterNetworkPolicies(in)
	n := 0
	for _, sh := range shards {
		for _, a := range sh.ACLs {
			n++
			if _, err := match.Check(a.Match); err != nil {
				t.Errorf("%s: %q: %v", a.Name, a.Match, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("only %d ACLs", n)
	}
}

// A policy kept as it is (it does not resolve) holds every policy after it in its tier as it
// is too (their priorities and Pass cuts depend on it); the other tier goes on.
func TestClusterPolicyKeepHoldsTheRest(t *testing.T) {
	subj := []PolicyPodIn{cnpPod("a.ns", "10.16.0.5")}
	rule := []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("10.0.0.0/8")}}
	in := ClusterPoliciesIn{JoinCIDRs: v4Join, Policies: []ClusterPolicyIn{
		{Name: "before", Admin: true, Priority: 1, Subject: subj, Ingress: rule},
		{Name: "bad", Admin: true, Priority: 2, Keep: true, Width: 1},
		{Name: "after", Admin: true, Priority: 3, Subject: subj, Ingress: rule},
		{Name: "base", Priority: 3, Subject: subj, Ingress: rule},
	}}
	shards, errs := ForClusterNetworkPolicies(in)
	var held *HeldError
	if !errors.As(errs["after"], &held) || held.By != "bad" {
		t.Errorf("after: %v, want held by bad", errs["after"])
	}
	for _, name := range []string{"before", "base"} {
		if _, ok := shards[name]; !ok {
			t.Errorf("%s has no shard (%v)", name, errs[name])
		}
	}
	if _, ok := shards["bad"]; ok {
		t.Error("the kept policy got a shard")
	}
}

// A Pass cell with nothing in common with a rule's cell (other pods, other peers, or other
// ports) leaves it whole, name included; one rule cut into too many parts is refused.
func TestClusterPolicyPassCuts(t *testing.T) {
	c := cnpCell{key: "ingress/0", ports: []string{"a"}, peers: cnpPeers("10.0.0.0/24"), svc: allTraffic()}
	var tcp80 svcSet
	tcp80.add("tcp", portRange{80, 80})
	for name, p := range map[string]cnpCell{
		"other pods":  {ports: []string{"b"}, peers: cnpPeers("10.0.0.0/24"), svc: allTraffic()},
		"other peers": {ports: []string{"a"}, peers: cnpPeers("10.1.0.0/24"), svc: allTraffic()},
	} {
		if got := cellMinus(c, p, 0); len(got) != 1 || got[0].key != c.key {
			t.Errorf("%s: %+v", name, got)
		}
	}
	udpOnly := cnpCell{key: "ingress/0", ports: []string{"a"}, peers: cnpPeers("10.0.0.0/24")}
	udpOnly.svc.add("udp", portRange{53, 53})
	if got := cellMinus(udpOnly, cnpCell{ports: []string{"a"}, peers: cnpPeers("10.0.0.0/24"), svc: tcp80}, 0); len(got) != 1 || got[0].key != "ingress/0" {
		t.Errorf("other ports: %+v", got)
	}
	// 70 Pass rules, each for one of the Deny's 70 pods and one address of its /24: each cut
	// leaves the other pods whole and that pod without the address, 71 parts.
	var pols []ClusterPolicyIn
	var subj []PolicyPodIn
	for i := 0; i < 70; i++ {
		pod := cnpPod(fmt.Sprintf("p%02d", i), fmt.Sprintf("10.16.0.%d", i+10))
		subj = append(subj, pod)
		pols = append(pols, ClusterPolicyIn{Name: fmt.Sprintf("pass%02d", i), Admin: true, Priority: 1, Subject: []PolicyPodIn{pod},
			Ingress: []ClusterRuleIn{{Action: "Pass", PeerPrefixes: cnpPeers(fmt.Sprintf("10.0.0.%d", 2*i+1))}}})
	}
	pols = append(pols, ClusterPolicyIn{Name: "deny", Admin: true, Priority: 2, Subject: subj,
		Ingress: []ClusterRuleIn{{Action: "Deny", PeerPrefixes: cnpPeers("10.0.0.0/24"), Protocols: []ClusterProtocolIn{{Protocol: "TCP", Start: 80, End: 80}}}}})
	if _, errs := ForClusterNetworkPolicies(ClusterPoliciesIn{JoinCIDRs: v4Join, Policies: pols}); errs["deny"] == nil {
		t.Error("a rule cut into 71 parts was programmed")
	}
}
