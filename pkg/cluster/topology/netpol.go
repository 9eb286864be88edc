package topology

import (
	"crypto/sha256"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// OwnerNetworkPolicy owns a NetworkPolicy's port group, ACLs and address sets.
const OwnerNetworkPolicy = "NetworkPolicy"

// OwnerMultiNetworkPolicy owns a MultiNetworkPolicy's port group and ACLs (on attachment ports).
const OwnerMultiNetworkPolicy = "MultiNetworkPolicy"

// Priority bands of NetworkPolicy ACLs. OVN 23.03 has no ACL tiers, so the bands are
// priorities: every policy denies its pods at PriorityPolicyDeny and allows above it, so an
// allow of any policy selecting a pod beats the deny of every other one (policies are a union).
const (
	PriorityPolicyDeny  = 1000
	PriorityPolicyAllow = 1001
)

// Keys of policy ACLs' and address sets' external_ids, for ACL logging and debugging: the
// ACL name is cut to OVN's 63 bytes, these never are.
const (
	PolicyKey     = "kovn.io/policy"      // namespace/name
	PolicyRuleKey = "kovn.io/policy-rule" // ingress/0, egress/deny, ingress/neighbours, ingress/nodes
	IPFamilyKey   = "kovn.io/ip-family"   // ip4 | ip6, on rows of one family
	// PeerSelectorKey is a shared peer address set's PolicyPeerIn.Selector.
	PeerSelectorKey = "kovn.io/peer-selector"
)

// OwnerPolicyPeer is the owner type of shared peer address sets: the owner is the set's
// selector hash, and each policy using the set is recorded in its external_ids (nbsync), so
// the set lives as long as one policy refers to it.
const OwnerPolicyPeer = "NetworkPolicyPeer"

// NetworkPolicyIn is a NetworkPolicy with its selectors resolved by the reconciler. The shard
// depends on nothing else, so the reconciler recomputes it whenever any of this changes.
type NetworkPolicyIn struct {
	Namespace, Name string
	// Ingress and Egress are the policy types (spec.policyTypes, defaulted as the API does).
	Ingress, Egress bool
	// Pods are the pods spec.podSelector selects that have a switch port.
	Pods         []PolicyPodIn
	IngressRules []PolicyRuleIn
	EgressRules  []PolicyRuleIn
	// JoinCIDRs are the join subnet's CIDRs. Their families are the cluster's: rules get ACLs
	// and address sets for these families only (both when JoinCIDRs is empty).
	JoinCIDRs []netip.Prefix
	// Logging is the namespace's ACL logging: its deny ACLs log at Deny, its rules' allow ACLs
	// at Allow (the neighbour allowances never log: they are no policy's verdict).
	Logging ACLLogging
	// Multi: a MultiNetworkPolicy. Pods' ports are attachment ports, peers' addresses their
	// addresses on the policy's networks; its port group and ownership are its own.
	Multi bool
}

// PolicyPodIn is a pod a policy selects or a peer pod of a rule.
type PolicyPodIn struct {
	Port       string // logical switch port (PodPortName); only for selected pods
	IPs        []netip.Addr
	NamedPorts map[string]NamedPortIn // container port name -> protocol and number
}

// NamedPortIn is a named container port.
type NamedPortIn struct {
	Protocol string // TCP | UDP | SCTP ("" = TCP)
	Port     int32
}

// PolicyRuleIn is one ingress or egress rule.
type PolicyRuleIn struct {
	// AllPeers: the rule's from/to is empty, every source (ingress) or destination (egress).
	AllPeers bool
	// Peers are the rule's pod/namespace selector peers, each with the pods it matches now
	// (none: the rule admits only its IPBlocks).
	Peers []PolicyPeerIn
	// Pods resolve an egress rule's named ports when AllPeers: every pod carrying the names.
	// (With peers, the peers' pods resolve them.)
	Pods     []PolicyPodIn
	IPBlocks []IPBlockIn
	Ports    []PolicyPortIn // empty: every port
}

// PolicyPeerIn is one pod/namespace selector peer of a rule and the pods it matches.
type PolicyPeerIn struct {
	// Selector says what the peer selects, canonically (PeerSelector): peers of any policy
	// with the same Selector share one address set per family.
	Selector string
	Pods     []PolicyPodIn
}

// PeerSelector is the canonical text of a peer: the namespace a bare podSelector applies to,
// or the namespaceSelector, and the podSelector, each in labels.Selector's sorted form.
func PeerSelector(namespace, namespaceSelector, podSelector string, bareNamespace bool) string {
	if bareNamespace {
		return "namespace=" + namespace + ";pods=" + podSelector
	}
	return "namespaces=" + namespaceSelector + ";pods=" + podSelector
}

// IPBlockIn is an ipBlock peer.
type IPBlockIn struct {
	CIDR   netip.Prefix
	Except []netip.Prefix
}

// PolicyPortIn is one entry of a rule's ports.
type PolicyPortIn struct {
	Protocol string // TCP | UDP | SCTP ("" = TCP)
	Port     int32  // 0 with no Name: every port of Protocol
	Name     string // named port, resolved against the destination pods
	EndPort  int32  // range Port..EndPort when above Port
}

// policyDir is what differs between ingress and egress ACLs. Named ports are resolved against
// the destination pods in both (selected pods for ingress, peers for egress), hence ".dst".
type policyDir struct {
	name   string // ingress | egress
	acl    string // ACL direction
	port   string // the logical port field naming the selected pods
	peer   string // the address field naming the peer: src | dst
	egress bool
}

var (
	ingressDir = policyDir{name: "ingress", acl: "to-lport", port: "outport", peer: "src"}
	egressDir  = policyDir{name: "egress", acl: "from-lport", port: "inport", peer: "dst", egress: true}
)

// ForNetworkPolicy is a NetworkPolicy's shard: a port group of the selected pods and, per
// policy type, a default deny for the group, an allow for neighbour discovery (a denied pod
// must still resolve its gateway and answer ARP) and one allow-related ACL per rule and
// family. Each pod/namespace selector peer is an address set per family holding the addresses
// of the pods it selects, shared by every policy with a peer selecting the same (nbsync counts
// the references), so pods coming and going change only that set, once.
// Egress ACLs are applied after load balancing, so allowing pod B allows B's ClusterIP too.
func ForNetworkPolicy(in NetworkPolicyIn) Shard {
	owner := in.Namespace + "/" + in.Name
	ownerType, pg := OwnerNetworkPolicy, PolicyPortGroup(in.Namespace, in.Name)
	if in.Multi {
		ownerType, pg = OwnerMultiNetworkPolicy, "kovn_mnp_"+strings.TrimPrefix(pg, "kovn_np_")
	}
	b := &policyBuilder{in: in, owner: owner, pg: pg, families: clusterFamilies(in.JoinCIDRs),
		sh: Shard{OwnerType: ownerType, Owner: owner}}
	group := PortGroup{Name: b.pg, Owned: true}
	for _, p := range in.Pods {
		if p.Port != "" {
			group.Ports = append(group.Ports, p.Port)
		}
	}
	sort.Strings(group.Ports)
	group.Ports = slices.Compact(group.Ports)
	b.sh.PortGroups = []PortGroup{group}
	if in.Ingress {
		b.direction(ingressDir, in.IngressRules)
	}
	if in.Egress {
		b.direction(egressDir, in.EgressRules)
	}
	for i := range b.sh.ACLs {
		if b.sh.ACLs[i].LogSeverity != "" { // the namespace's own budget of log lines
			b.sh.ACLs[i].Meter = NamespaceLogMeter(in.Namespace)
		}
	}
	sort.Slice(b.sh.ACLs, func(i, j int) bool { return b.sh.ACLs[i].Name < b.sh.ACLs[j].Name })
	sort.Slice(b.sh.AddressSets, func(i, j int) bool { return b.sh.AddressSets[i].Name < b.sh.AddressSets[j].Name })
	return b.sh
}

type policyBuilder struct {
	in        NetworkPolicyIn
	owner, pg string
	families  []string
	sh        Shard
}

func (b *policyBuilder) direction(d policyDir, rules []PolicyRuleIn) {
	base := fmt.Sprintf("%s == @%s", d.port, b.pg)
	b.acl(d, "deny", "", PriorityPolicyDeny, base, "drop").LogSeverity = b.in.Logging.Deny
	// ARP and IPv6 neighbour/router discovery are not connections: allow-related would not
	// let the answers back through the other direction's deny.
	b.acl(d, "neighbours", "", PriorityPolicyAllow, base+" && "+neighbourDiscovery, "allow")
	// No allow of the join CIDRs: a pod's own node reaches it by ownJoinACLs (above every
	// policy); other nodes' join addresses are sources like any other.
	for i, r := range rules {
		for _, f := range b.families {
			b.rule(d, i, r, f, base)
		}
	}
}

// rule adds the allow ACL (and address set) of rule i for family f: the peers OR'ed, AND the
// ports OR'ed. A rule whose ports are all named and resolve to no pod admits nothing: no ACL.
func (b *policyBuilder) rule(d policyDir, i int, r PolicyRuleIn, f, base string) {
	id := strconv.Itoa(i)
	clauses := []string{base, f}
	if !r.AllPeers {
		var peers []string
		for _, p := range r.Peers {
			set := b.peerSet(p, f)
			peers = append(peers, fmt.Sprintf("%s.%s == $%s", f, d.peer, set))
		}
		for _, blk := range r.IPBlocks {
			if family(blk.CIDR.Addr()) != f {
				continue
			}
			if c, ok := blockClause(f+"."+d.peer, blk); ok {
				peers = append(peers, c)
			}
		}
		if len(peers) == 0 {
			// Every peer is an ipBlock of the other family, or one its exceptions empty:
			// nothing of f is admitted.
			return
		}
		clauses = append(clauses, anyOf(peers))
	}
	if len(r.Ports) > 0 {
		named := b.in.Pods
		if d.egress {
			named = r.Pods
			for _, p := range r.Peers {
				named = append(slices.Clip(named), p.Pods...)
			}
		}
		ports := portClauses(r.Ports, named, f)
		if len(ports) == 0 {
			return
		}
		clauses = append(clauses, anyOf(ports))
	}
	b.acl(d, id, f, PriorityPolicyAllow, strings.Join(clauses, " && "), "allow-related").LogSeverity = b.in.Logging.Allow
}

// acl adds one ACL of the policy's group and returns it. Egress ACLs run after load balancing
// (apply-after-lb), so they see the backend a ClusterIP was translated to.
func (b *policyBuilder) acl(d policyDir, rule, f string, prio int, match, action string) *ACL {
	key := d.name + "/" + rule
	ids := b.ids(d, rule, f)
	if f != "" {
		key += "/" + f
	}
	a := ACL{PortGroup: b.pg, Name: PolicyACLName(b.owner, key), Direction: d.acl, Priority: prio, Match: match, Action: action,
		ExternalIDs: ids}
	if d.egress {
		a.Options = map[string]string{"apply-after-lb": "true"}
	}
	b.sh.ACLs = append(b.sh.ACLs, a)
	return &b.sh.ACLs[len(b.sh.ACLs)-1]
}

// peerSet adds (once per shard) the shared address set of peer p for family f and names it.
func (b *policyBuilder) peerSet(p PolicyPeerIn, f string) string {
	name := PeerAddressSet(p.Selector, f)
	for _, as := range b.sh.AddressSets {
		if as.Name == name {
			return name
		}
	}
	b.sh.AddressSets = append(b.sh.AddressSets, AddressSet{Name: name, Addresses: podAddrs(p.Pods, f), Shared: true,
		ExternalIDs: map[string]string{PeerSelectorKey: p.Selector, IPFamilyKey: f}})
	return name
}

func (b *policyBuilder) ids(d policyDir, rule, f string) map[string]string {
	ids := map[string]string{PolicyKey: b.owner, PolicyRuleKey: d.name + "/" + rule}
	if f != "" {
		ids[IPFamilyKey] = f
	}
	return ids
}

// portClauses renders a rule's ports for family f. A named port matches, per port number the
// destination pods give the name, those pods' addresses and that number; a pod that does not
// name it (or names it for another protocol) is not admitted by it.
func portClauses(ports []PolicyPortIn, pods []PolicyPodIn, f string) []string {
	var out []string
	for _, p := range ports {
		proto := protocolOf(p.Protocol)
		switch {
		case p.Name != "":
			byNum := map[int32][]string{}
			for _, pod := range pods {
				if np, ok := pod.NamedPorts[p.Name]; ok && protocolOf(np.Protocol) == proto {
					byNum[np.Port] = append(byNum[np.Port], podAddrs([]PolicyPodIn{pod}, f)...)
				}
			}
			for num, addrs := range byNum {
				if len(addrs) > 0 {
					sort.Strings(addrs)
					out = append(out, fmt.Sprintf("(%s.dst == %s && %s.dst == %d)", f, valueSet(slices.Compact(addrs)), proto, num))
				}
			}
		case p.Port == 0:
			out = append(out, proto)
		case p.EndPort > p.Port:
			out = append(out, fmt.Sprintf("(%s.dst >= %d && %s.dst <= %d)", proto, p.Port, proto, p.EndPort))
		default:
			out = append(out, fmt.Sprintf("%s.dst == %d", proto, p.Port))
		}
	}
	return out
}

// blockClause matches an ipBlock on field (e.g. ip4.src): its CIDR minus its exceptions,
// written as the positive prefixes left (prefixesLeft). ok is false when the exceptions leave
// no address: the ipBlock admits nothing.
//
// Never "field == CIDR && field != {excepts}": ovn-controller (23.03) expands a negated set
// into the product of its members' bits, so the OpenFlow flows of one port's ACL multiply
// with each exception (/24s in a /8: 5 gave 27,404 to 237,668 flows, 8 gave 472,847 and 1.1 GB
// of ovn-controller), while positive prefixes cost two flows each (100 exceptions: 830
// prefixes, 1,734 flows). test/bench TestIPBlockExceptFlows measures both.
func blockClause(field string, blk IPBlockIn) (string, bool) {
	left := prefixesLeft(blk.CIDR, blk.Except)
	if len(left) == 0 {
		return "", false
	}
	vals := make([]string, 0, len(left))
	for _, p := range left {
		vals = append(vals, p.String())
	}
	return fmt.Sprintf("%s == %s", field, valueSet(vals)), true
}

// anyOf ORs alternatives, sorted so an unchanged rule renders the same match whatever order
// the reconciler listed pods and peers in.
func anyOf(alts []string) string {
	alts = slices.Clone(alts)
	sort.Strings(alts)
	alts = slices.Compact(alts)
	if len(alts) == 1 {
		return alts[0]
	}
	return "(" + strings.Join(alts, " || ") + ")"
}

func valueSet(vals []string) string {
	if len(vals) == 1 {
		return vals[0]
	}
	return "{" + strings.Join(vals, ", ") + "}"
}

func podAddrs(pods []PolicyPodIn, f string) []string {
	out := []string{}
	for _, p := range pods {
		for _, ip := range p.IPs {
			if family(ip) == f {
				out = append(out, ip.String())
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func protocolOf(p string) string {
	if p == "" {
		return "tcp"
	}
	return strings.ToLower(p)
}

// clusterFamilies are the families of the join CIDRs, both when there are none.
func clusterFamilies(join []netip.Prefix) []string {
	var v4, v6 bool
	for _, c := range join {
		v4, v6 = v4 || c.Addr().Is4(), v6 || !c.Addr().Is4()
	}
	switch {
	case v4 && !v6:
		return []string{"ip4"}
	case v6 && !v4:
		return []string{"ip6"}
	}
	return []string{"ip4", "ip6"}
}

// PolicyPortGroup names a policy's port group: letters, digits and underscores only (it is
// referenced as @name and OVN derives $name_ip4 from it); a policy name with other characters
// gets a hash of namespace/name appended so "a-b" and "a.b" never share a group. Kubernetes
// names hold no underscore, so the "_" between namespace and name cannot be ambiguous.
func PolicyPortGroup(namespace, name string) string {
	ns, r1 := ovnIdent(namespace)
	n, r2 := ovnIdent(name)
	s := "kovn_np_" + ns + "_" + n
	if r1 || r2 {
		s += "_" + shortHash(namespace+"/"+name)
	}
	return s
}

// PeerAddressSet names the shared address set of family f of the peers selecting selector.
func PeerAddressSet(selector, f string) string {
	h := sha256.Sum256([]byte(selector))
	return fmt.Sprintf("kovn_peer_%x_%s", h[:8], f)
}

// PolicyACLName is "<namespace>/<name>:<key>", cut to the schema's 63 bytes with a hash of
// the whole keeping names unique within the policy.
func PolicyACLName(owner, key string) string { return ACLName(owner, key) }

// ACLName is "<owner>:<key>", cut to the schema's 63 bytes with a hash of the whole keeping
// names unique within the owner's shard.
func ACLName(owner, key string) string {
	full := owner + ":" + key
	if len(full) <= 63 {
		return full
	}
	h := shortHash(full)
	return full[:63-len(h)-1] + "_" + h
}

// ovnIdent replaces every character but letters and digits with '_', reporting whether any was.
func ovnIdent(s string) (string, bool) {
	var b strings.Builder
	replaced := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
			replaced = true
		}
	}
	return b.String(), replaced
}

// neighbourDiscovery is ARP and IPv6 neighbour and router discovery: a pod a policy denies
// must still resolve its gateway and answer its neighbours.
const neighbourDiscovery = "(arp || nd || nd_rs || nd_ra)"

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", h[:4])
}
