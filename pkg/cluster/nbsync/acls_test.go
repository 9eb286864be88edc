package nbsync

import (
	"context"
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"testing"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// policyIn selects pods a and b ("default" namespace) and admits c's address on rule 0's ports
// into them; it lets them out to c.
func policyIn(selected []string, peerIPs []string, ports ...int32) topology.NetworkPolicyIn {
	in := topology.NetworkPolicyIn{Namespace: "default", Name: "web", Ingress: true, Egress: true,
		JoinCIDRs: []netip.Prefix{p("100.64.0.0/16")}}
	for _, s := range selected {
		in.Pods = append(in.Pods, topology.PolicyPodIn{Port: contract.PodPortName("default", s)})
	}
	var peers []topology.PolicyPodIn
	for _, ip := range peerIPs {
		peers = append(peers, topology.PolicyPodIn{IPs: []netip.Addr{a(ip)}})
	}
	var pp []topology.PolicyPortIn
	for _, n := range ports {
		pp = append(pp, topology.PolicyPortIn{Port: n})
	}
	peer := topology.PolicyPeerIn{Selector: peerSelector, Pods: peers}
	in.IngressRules = []topology.PolicyRuleIn{{Peers: []topology.PolicyPeerIn{peer}, Ports: pp}}
	in.EgressRules = []topology.PolicyRuleIn{{Peers: []topology.PolicyPeerIn{peer}}}
	return in
}

// peerSelector is policyIn's peer, shared by its ingress and egress rule.
var peerSelector = topology.PeerSelector("default", "", "app=c", true)

// withPeerSelector gives in's rules another peer selector (another shared set).
func withPeerSelector(in topology.NetworkPolicyIn, sel string) topology.NetworkPolicyIn {
	for _, rules := range [][]topology.PolicyRuleIn{in.IngressRules, in.EgressRules} {
		for i := range rules {
			for j := range rules[i].Peers {
				rules[i].Peers[j].Selector = sel
			}
		}
	}
	return in
}

// policyBase is base with pods a and b.
func policyBase(t *testing.T, c client.Client) {
	t.Helper()
	base(t, c)
	apply(t, c, topology.ForPod(pod("a", "n1", "10.16.0.5")))
	apply(t, c, topology.ForPod(pod("b", "n2", "10.16.0.6")))
}

func plan(t *testing.T, c client.Client, sh topology.Shard) []ovsdb.Operation {
	t.Helper()
	ops, _, err := Plan(context.Background(), c, sh)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// settled applies sh, waits until the cache reflects it (planning it again yields nothing:
// the no-op property) and returns the operations the apply sent, as "op table".
func settled(t *testing.T, c client.Client, sh topology.Shard) []string {
	t.Helper()
	ops := plan(t, c, sh)
	apply(t, c, sh)
	waitFor(t, func() bool { return len(plan(t, c, sh)) == 0 })
	var out []string
	for _, o := range ops {
		out = append(out, o.Op+" "+o.Table)
	}
	sort.Strings(out)
	return out
}

func lspUUIDs(t *testing.T, c client.Client, names ...string) []string {
	var out []string
	for _, n := range names {
		out = append(out, named(t, c, contract.PodPortName("default", n), func(r nb.LogicalSwitchPort) string { return r.Name }).UUID)
	}
	return out
}

func ownedACLs(t *testing.T, c client.Client, owner string) map[string]nb.ACL {
	out := map[string]nb.ACL{}
	for _, r := range list[nb.ACL](t, c) {
		if r.ExternalIDs[ovn.OwnerKey] == owner {
			out[ptr.Deref(r.Name, "")] = r
		}
	}
	return out
}

// TestPolicyCreateThenNoOp: the group holds the selected pods' ports and exactly the shard's
// ACLs, rows as modelled; the address sets hold the peers; re-applying sends nothing.
func TestPolicyCreateThenNoOp(t *testing.T) {
	c := connect(t)
	policyBase(t, c)
	sh := topology.ForNetworkPolicy(policyIn([]string{"a", "b"}, []string{"10.16.0.9"}, 80))
	settled(t, c, sh)
	g := pgNamed(t, c, "kovn_np_default_web")
	if !sameSet(g.Ports, lspUUIDs(t, c, "a", "b")) || len(g.ACLs) != len(sh.ACLs) {
		t.Fatalf("group: ports %v, %d ACLs; want a, b and %d", g.Ports, len(g.ACLs), len(sh.ACLs))
	}
	rows := ownedACLs(t, c, "default/web")
	for _, w := range sh.ACLs {
		r, ok := rows[w.Name]
		if !ok || !slices.Contains(g.ACLs, r.UUID) || r.Match != w.Match || r.Direction != w.Direction || r.Priority != w.Priority ||
			r.Action != w.Action || !sameMap(r.Options, w.Options) || r.ExternalIDs[topology.PolicyRuleKey] != w.ExternalIDs[topology.PolicyRuleKey] {
			t.Errorf("ACL %s: row %+v, want %+v", w.Name, r, w)
		}
	}
	set := topology.PeerAddressSet(peerSelector, "ip4")
	as := named(t, c, set, func(r nb.AddressSet) string { return r.Name })
	if !slices.Equal(as.Addresses, []string{"10.16.0.9"}) || !Owned(as.ExternalIDs, topology.OwnerPolicyPeer, set) ||
		!slices.Equal(usersOf(as.ExternalIDs), []Owner{{topology.OwnerNetworkPolicy, "default/web"}}) {
		t.Errorf("address set %+v", as)
	}
	if n := apply(t, c, sh); n != 0 {
		t.Errorf("re-apply sent %d operations", n)
	}
}

// TestPolicyChangeTouchesOnlyWhatChanged: a port added to a rule updates that rule's ACL in
// place; a peer joining mutates its address set; a new rule creates its rows and rewrites
// the group's ACL list; nothing else is written.
func TestPolicyChangeTouchesOnlyWhatChanged(t *testing.T) {
	c := connect(t)
	policyBase(t, c)
	settled(t, c, topology.ForNetworkPolicy(policyIn([]string{"a", "b"}, []string{"10.16.0.9"}, 80)))
	before := ownedACLs(t, c, "default/web")
	in := policyIn([]string{"a", "b"}, []string{"10.16.0.9"}, 80, 443)
	if got := settled(t, c, topology.ForNetworkPolicy(in)); !slices.Equal(got, []string{"update ACL"}) {
		t.Errorf("port added: %v, want one ACL update", got)
	}
	after := ownedACLs(t, c, "default/web")
	if r := after["default/web:ingress/0/ip4"]; r.UUID != before["default/web:ingress/0/ip4"].UUID || r.Match == before["default/web:ingress/0/ip4"].Match {
		t.Errorf("rule ACL not updated in place: %+v", r)
	}
	in = policyIn([]string{"a", "b"}, []string{"10.16.0.9", "10.16.0.10"}, 80, 443)
	if got := settled(t, c, topology.ForNetworkPolicy(in)); !slices.Equal(got, []string{"mutate Address_Set"}) {
		t.Errorf("peer added: %v, want the peer's set (shared by the ingress and egress rule) mutated", got)
	}
	in.IngressRules = append(in.IngressRules, topology.PolicyRuleIn{AllPeers: true, Ports: []topology.PolicyPortIn{{Port: 22}}})
	if got := settled(t, c, topology.ForNetworkPolicy(in)); !slices.Equal(got, []string{"insert ACL", "update Port_Group"}) {
		t.Errorf("rule added: %v, want its ACL inserted and the group's list rewritten", got)
	}
	if got := len(pgNamed(t, c, "kovn_np_default_web").ACLs); got != len(topology.ForNetworkPolicy(in).ACLs) {
		t.Errorf("group lists %d ACLs", got)
	}
}

// TestPolicyPodLeavesGroup: a pod the policy no longer selects leaves the group (one update);
// a deleted pod's port leaves it by itself (weak reference); a selected pod whose port does
// not exist yet is reported missing while the rest is applied.
func TestPolicyPodLeavesGroup(t *testing.T) {
	c := connect(t)
	policyBase(t, c)
	settled(t, c, topology.ForNetworkPolicy(policyIn([]string{"a", "b"}, nil)))
	if got := settled(t, c, topology.ForNetworkPolicy(policyIn([]string{"a"}, nil))); !slices.Equal(got, []string{"update Port_Group"}) {
		t.Errorf("pod b unselected: %v", got)
	}
	if g := pgNamed(t, c, "kovn_np_default_web"); !slices.Equal(g.Ports, lspUUIDs(t, c, "a")) {
		t.Errorf("ports %v, want a's", g.Ports)
	}
	apply(t, c, topology.Shard{OwnerType: topology.OwnerPod, Owner: "default/a"})
	waitFor(t, func() bool { return len(pgNamed(t, c, "kovn_np_default_web").Ports) == 0 })
	sh := topology.ForNetworkPolicy(policyIn([]string{"b", "z"}, nil))
	_, err := Apply(context.Background(), c, sh)
	if !errors.Is(err, ErrParentMissing) || !regexp.MustCompile(`switch port z\.default`).MatchString(err.Error()) {
		t.Fatalf("selecting a pod with no port: %v", err)
	}
	waitFor(t, func() bool { return slices.Equal(pgNamed(t, c, "kovn_np_default_web").Ports, lspUUIDs(t, c, "b")) })
}

// TestPolicyDeleteKeepsOtherWriters: deleting the policy removes its group, ACLs and address
// sets; another writer's group and ACL, and another policy's rows, stay.
func TestPolicyDeleteKeepsOtherWriters(t *testing.T) {
	c := connect(t)
	policyBase(t, c)
	foreignACL := &nb.ACL{UUID: "acl", Direction: "to-lport", Priority: 1000, Match: "outport == @other", Action: "drop",
		ExternalIDs: map[string]string{"owner": "admin"}}
	foreign := &nb.PortGroup{UUID: "pg", Name: "other", ACLs: []string{"acl"}}
	transact(t, c, []model.Model{foreignACL, foreign}, nil, func() bool {
		return slices.ContainsFunc(list[nb.ACL](t, c), func(a nb.ACL) bool { return a.ExternalIDs["owner"] == "admin" })
	})
	other := withPeerSelector(policyIn([]string{"a"}, []string{"10.16.0.7"}), topology.PeerSelector("default", "", "app=other", true))
	other.Name = "other"
	settled(t, c, topology.ForNetworkPolicy(other))
	settled(t, c, topology.ForNetworkPolicy(policyIn([]string{"a", "b"}, []string{"10.16.0.9"}, 80)))
	owners, err := Owners(context.Background(), c)
	if err != nil || !owners[Owner{topology.OwnerNetworkPolicy, "default/web"}] {
		t.Fatalf("owners %v, %v", owners, err)
	}
	settled(t, c, topology.Shard{OwnerType: topology.OwnerNetworkPolicy, Owner: "default/web"})
	if n := len(ownedACLs(t, c, "default/web")); n != 0 {
		t.Errorf("%d ACLs of the deleted policy left", n)
	}
	for _, as := range list[nb.AddressSet](t, c) {
		if as.ExternalIDs[ovn.OwnerKey] == "default/web" || as.ExternalIDs[userPrefix+"NetworkPolicy:default/web"] != "" {
			t.Errorf("address set %s left", as.Name)
		}
	}
	for _, g := range list[nb.PortGroup](t, c) {
		if g.Name == "kovn_np_default_web" {
			t.Error("group left")
		}
	}
	if g := pgNamed(t, c, "other"); len(g.ACLs) != 1 || len(ownedACLs(t, c, "default/other")) == 0 ||
		len(pgNamed(t, c, "kovn_np_default_other").ACLs) != len(topology.ForNetworkPolicy(other).ACLs) {
		t.Errorf("other writer's or other policy's rows touched: %+v", g)
	}
	if owners, _ := Owners(context.Background(), c); owners[Owner{topology.OwnerNetworkPolicy, "default/web"}] {
		t.Error("deleted policy still an owner")
	}
}

// TestSharedPeerSetRefCounted: two policies with the same peer use one set per family, each
// recorded as a user (the second join is a mutation of external_ids alone, its addresses
// being current); deleting one keeps the set for the other; deleting the last removes it. A
// set whose users are all gone shows those users to the garbage collector.
func TestSharedPeerSetRefCounted(t *testing.T) {
	c := connect(t)
	policyBase(t, c)
	web := policyIn([]string{"a"}, []string{"10.16.0.9"})
	db := policyIn([]string{"b"}, []string{"10.16.0.9"})
	db.Name = "db"
	settled(t, c, topology.ForNetworkPolicy(web))
	set := topology.PeerAddressSet(peerSelector, "ip4")
	if got := settled(t, c, topology.ForNetworkPolicy(db)); slices.Contains(got, "insert Address_Set") {
		t.Errorf("second policy created a set: %v", got)
	}
	var sets []string
	for _, as := range list[nb.AddressSet](t, c) {
		sets = append(sets, as.Name)
	}
	as := named(t, c, set, func(r nb.AddressSet) string { return r.Name })
	if len(sets) != 1 || len(usersOf(as.ExternalIDs)) != 2 {
		t.Fatalf("sets %v, users of %s: %v", sets, set, usersOf(as.ExternalIDs))
	}
	settled(t, c, topology.Shard{OwnerType: topology.OwnerNetworkPolicy, Owner: "default/web"})
	as = named(t, c, set, func(r nb.AddressSet) string { return r.Name })
	if !slices.Equal(usersOf(as.ExternalIDs), []Owner{{topology.OwnerNetworkPolicy, "default/db"}}) || !slices.Equal(as.Addresses, []string{"10.16.0.9"}) {
		t.Fatalf("after the first policy went: %+v", as)
	}
	if owners, _ := Owners(context.Background(), c); !owners[Owner{topology.OwnerNetworkPolicy, "default/db"}] {
		t.Errorf("owners %v lack the remaining user", owners)
	}
	settled(t, c, topology.Shard{OwnerType: topology.OwnerNetworkPolicy, Owner: "default/db"})
	if n := len(list[nb.AddressSet](t, c)); n != 0 {
		t.Errorf("%d address sets left after the last user went", n)
	}
}
