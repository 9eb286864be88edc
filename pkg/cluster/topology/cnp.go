package topology

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
)

// OwnerClusterNetworkPolicy owns a ClusterNetworkPolicy's port groups, address sets and ACLs.
const OwnerClusterNetworkPolicy = "ClusterNetworkPolicy"

// ClusterPolicyKey is the policy's name in its rows' external_ids.
const ClusterPolicyKey = "kovn.io/cluster-policy"

// ACL priorities of ClusterNetworkPolicy. OVN 23.03 has no ACL tiers, so the tiers are bands:
// Admin above every other policy ACL (NetworkPolicy at PriorityPolicyDeny/Allow, a Subnet's
// ACLs from PrioritySubnetACLBase, private isolation, the node's own join address), Baseline
// below NetworkPolicy and above the switches' stateful ACL (PrioritySubnetStateful). Within a
// band each policy takes one priority per rule index, in the order the API judges them
// (priority, then name), from the top down; a tier's policies together may hold at most the
// band's width of rule indices. To-lport and from-lport ACLs never meet, so a rule index's
// ingress and egress share a priority.
const (
	PriorityAdminNeighbours    = 29000
	PriorityAdminTop           = 28999
	PriorityAdminBottom        = 3000
	PriorityBaselineNeighbours = 999
	PriorityBaselineTop        = 998
	PriorityBaselineBottom     = 2
)

// ClusterPolicyIn is a ClusterNetworkPolicy with its selectors resolved.
type ClusterPolicyIn struct {
	Name     string
	Admin    bool // tier Admin (else Baseline)
	Priority int32
	// Subject are the selected pods that have a switch port (Port set).
	Subject []PolicyPodIn
	Ingress []ClusterRuleIn
	Egress  []ClusterRuleIn
	// Keep: the policy did not resolve; it gets no shard (its rows stay as they are), takes
	// Width rule indices in its tier, and holds every policy after it in its tier as it is
	// (HeldError): their priorities and Pass cuts depend on it.
	Keep  bool
	Width int
}

// ClusterRuleIn is one rule with its peers resolved.
type ClusterRuleIn struct {
	Action string // Accept | Deny | Pass
	// PeerPods are the pods the rule's pod and namespace peers select (their addresses are
	// peers; they also resolve an egress rule's named ports).
	PeerPods []PolicyPodIn
	// PeerPrefixes are the rest: the peer nodes' addresses and the networks.
	PeerPrefixes []netip.Prefix
	Protocols    []ClusterProtocolIn // empty: all traffic
}

// ClusterProtocolIn is one protocol entry: a protocol with a port range (0..0: every port),
// or a destination named port.
type ClusterProtocolIn struct {
	Protocol   string // TCP | UDP | SCTP
	Start, End int32
	NamedPort  string
}

// ClusterPoliciesIn is every ClusterNetworkPolicy, for ForClusterNetworkPolicies.
type ClusterPoliciesIn struct {
	Policies  []ClusterPolicyIn
	JoinCIDRs []netip.Prefix
}

// cnpCell is the traffic one ACL (per family) of a rule matches: from or to the subject
// ports, to or from the peer prefixes, on svc. A rule is one cell, or several once named
// ports are resolved and higher Pass rules are cut out.
type cnpCell struct {
	key   string   // rule key and how the cell was derived, for names
	ports []string // subject switch ports, sorted
	peers []netip.Prefix
	svc   svcSet
}

// ForClusterNetworkPolicies compiles every ClusterNetworkPolicy into one shard per policy,
// keyed by name. A policy that does not fit its tier's band gets an error instead of a shard
// (its rows stay as they are). Admin Pass rules have no ACL: each is subtracted from the
// Admin rules judged after it, so the traffic it passes reaches NetworkPolicy's band.
func ForClusterNetworkPolicies(in ClusterPoliciesIn) (map[string]Shard, map[string]error) {
	pols := slices.Clone(in.Policies)
	sort.SliceStable(pols, func(i, j int) bool {
		a, b := pols[i], pols[j]
		if a.Admin != b.Admin {
			return a.Admin
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		return a.Name < b.Name
	})
	families := clusterFamilies(in.JoinCIDRs)
	shards, errs := map[string]Shard{}, map[string]error{}
	passes := map[string][]cnpCell{"ingress": nil, "egress": nil} // Admin Pass cells so far
	adminSlot, baselineSlot := 0, 0
	heldBy := map[bool]string{} // tier (Admin?) -> its first policy kept as it is
	for _, p := range pols {
		width := max(len(p.Ingress), len(p.Egress))
		if p.Keep {
			width = p.Width
		}
		slot, top, bottom := &baselineSlot, PriorityBaselineTop, PriorityBaselineBottom
		if p.Admin {
			slot, top, bottom = &adminSlot, PriorityAdminTop, PriorityAdminBottom
		}
		first := top - *slot
		*slot += width
		if width > 0 && first-width+1 < bottom {
			errs[p.Name] = fmt.Errorf("no room in the %s tier's ACL priorities %d-%d for %d more rules (the tier holds %d rule indices)",
				tierName(p.Admin), bottom, top, width, top-bottom+1)
			continue
		}
		if p.Keep {
			if heldBy[p.Admin] == "" {
				heldBy[p.Admin] = p.Name
			}
			continue
		}
		if by := heldBy[p.Admin]; by != "" {
			errs[p.Name] = &HeldError{By: by}
			continue
		}
		b := &cnpBuilder{p: p, families: families, first: first, sh: Shard{OwnerType: OwnerClusterNetworkPolicy, Owner: p.Name}}
		b.compile(ingressDir, p.Ingress, passes)
		b.compile(egressDir, p.Egress, passes)
		if b.err != nil {
			errs[p.Name] = b.err
			continue
		}
		shards[p.Name] = b.finish()
	}
	return shards, errs
}

// HeldError is the verdict on a policy judged after one that is kept as it is (Keep): its
// rows stay as they are too, since the kept policy's priorities and Pass rules shape them.
type HeldError struct{ By string }

func (e *HeldError) Error() string {
	return fmt.Sprintf("kept as programmed: policy %s, judged before it in its tier, does not resolve, and its rule priorities and Pass rules shape this policy's ACLs", e.By)
}

// maxCellsPerRule bounds how many parts Pass rules may cut one rule into (each part costs an
// ACL, an address set and maybe a port group per family).
const maxCellsPerRule = 64

func tierName(admin bool) string {
	if admin {
		return "Admin"
	}
	return "Baseline"
}

type cnpBuilder struct {
	p        ClusterPolicyIn
	families []string
	first    int // the ACL priority of rule index 0
	subject  []string
	sh       Shard
	groups   map[string]bool
	err      error
}

func (b *cnpBuilder) compile(d policyDir, rules []ClusterRuleIn, passes map[string][]cnpCell) {
	if len(rules) == 0 {
		return
	}
	if b.subject == nil {
		b.subject = []string{}
		for _, pod := range b.p.Subject {
			if pod.Port != "" {
				b.subject = append(b.subject, pod.Port)
			}
		}
		sort.Strings(b.subject)
		b.subject = slices.Compact(b.subject)
	}
	prio := PriorityBaselineNeighbours
	if b.p.Admin {
		prio = PriorityAdminNeighbours
	}
	// A denied pod must still resolve its neighbours (IPv6 neighbour discovery is IP traffic
	// a Deny of ::/0 would match).
	pg := b.group(cnpCell{ports: b.subject})
	b.acl(d, pg, d.name+"/neighbours", "", prio, fmt.Sprintf("%s == @%s && %s", d.port, pg, neighbourDiscovery), "allow")
	for i, r := range rules {
		cells := b.ruleCells(d, i, r)
		if !b.p.Admin {
			b.emit(d, cells, b.first-i, r.Action)
			continue
		}
		if r.Action == "Pass" {
			passes[d.name] = append(passes[d.name], cells...)
			continue
		}
		for k, pass := range passes[d.name] {
			var left []cnpCell
			for _, c := range cells {
				left = append(left, cellMinus(c, pass, k)...)
			}
			cells = left
		}
		if len(cells) > maxCellsPerRule {
			b.err = fmt.Errorf("the Pass rules judged before %s rule %d cut it into %d parts; kovn programs at most %d (OVN 23.03 has no pass verb: docs/policy.md)",
				d.name, i, len(cells), maxCellsPerRule)
			return
		}
		b.emit(d, cells, b.first-i, r.Action)
	}
}

// ruleCells is rule i as cells: one for its numbered protocols (or all traffic), one per port
// number its named ports resolve to on the destination pods (the subject's for ingress, the
// peer pods' for egress).
func (b *cnpBuilder) ruleCells(d policyDir, i int, r ClusterRuleIn) []cnpCell {
	key := fmt.Sprintf("%s/%d", d.name, i)
	peers := slices.Clone(r.PeerPrefixes)
	for _, pod := range r.PeerPods {
		peers = append(peers, hostPrefixes(pod.IPs)...)
	}
	base := cnpCell{key: key, ports: b.subject, peers: normPrefixes(peers)}
	if len(r.Protocols) == 0 {
		base.svc = allTraffic()
		return []cnpCell{base}
	}
	named := map[string]*cnpCell{} // proto/number -> cell
	for _, pr := range r.Protocols {
		if pr.NamedPort != "" {
			b.addNamedPort(named, d, key, pr.NamedPort, r.PeerPods, base.peers)
			continue
		}
		rg := portRange{pr.Start, pr.End}
		if pr.Start == 0 {
			rg = portRange{0, 65535}
		} else if pr.End < pr.Start {
			rg.hi = pr.Start
		}
		base.svc.add(protocolOf(pr.Protocol), rg)
	}
	var out []cnpCell
	if !base.svc.empty() {
		out = append(out, base)
	}
	for _, k := range slices.Sorted(maps.Keys(named)) {
		c := named[k]
		if d.egress {
			c.peers = normPrefixes(c.peers)
		} else {
			sort.Strings(c.ports)
			c.ports = slices.Compact(c.ports)
		}
		out = append(out, *c)
	}
	return out
}

// addNamedPort adds to named (by protocol/number) a cell per port number the destination pods
// give name: for ingress the subject pods naming it with the rule's peers, for egress the
// subject with the peer pods naming it.
func (b *cnpBuilder) addNamedPort(named map[string]*cnpCell, d policyDir, key, name string, peerPods []PolicyPodIn, peers []netip.Prefix) {
	pods := b.p.Subject
	if d.egress {
		pods = peerPods
	}
	for _, pod := range pods {
		np, ok := pod.NamedPorts[name]
		if !ok {
			continue
		}
		nk := fmt.Sprintf("%s/%d", protocolOf(np.Protocol), np.Port)
		c := named[nk]
		if c == nil {
			c = &cnpCell{key: key + "/" + nk}
			c.svc.add(protocolOf(np.Protocol), portRange{np.Port, np.Port})
			if d.egress {
				c.ports = b.subject
			} else {
				c.peers = peers
			}
			named[nk] = c
		}
		if d.egress {
			c.peers = append(c.peers, hostPrefixes(pod.IPs)...)
		} else if pod.Port != "" {
			c.ports = append(c.ports, pod.Port)
		}
	}
}

// cellMinus is c without the traffic of Pass cell p (the k-th): (S∖Sp)×A×P ∪ (S∩Sp)×(A∖Ap)×P ∪
// (S∩Sp)×(A∩Ap)×(P∖Pp), the empty parts left out.
func cellMinus(c, p cnpCell, k int) []cnpCell {
	in, both, svcLeft := stringsAnd(c.ports, p.ports), prefixesAnd(c.peers, p.peers), c.svc.minus(p.svc)
	if len(in) == 0 || len(both) == 0 || reflect.DeepEqual(svcLeft, c.svc.minus(svcSet{})) {
		return []cnpCell{c} // nothing in common: the cell stays as it is (and keeps its name)
	}
	var out []cnpCell
	if rest := stringsMinus(c.ports, p.ports); len(rest) > 0 {
		out = append(out, cnpCell{key: fmt.Sprintf("%s~%da", c.key, k), ports: rest, peers: c.peers, svc: c.svc})
	}
	if rest := prefixesMinus(c.peers, p.peers); len(rest) > 0 {
		out = append(out, cnpCell{key: fmt.Sprintf("%s~%db", c.key, k), ports: in, peers: rest, svc: c.svc})
	}
	if !svcLeft.empty() {
		out = append(out, cnpCell{key: fmt.Sprintf("%s~%dc", c.key, k), ports: in, peers: both, svc: svcLeft})
	}
	return out
}

// emit writes the ACLs (one per family) and address sets of cells at priority prio.
func (b *cnpBuilder) emit(d policyDir, cells []cnpCell, prio int, action string) {
	verb := "allow-related"
	if action == "Deny" {
		verb = "drop"
	}
	for _, c := range cells {
		pg := b.group(c)
		svc := c.svc.match()
		for _, f := range b.families {
			set := cnpAddressSet(b.p.Name, c.key, f)
			b.sh.AddressSets = append(b.sh.AddressSets, AddressSet{Name: set, Addresses: addrStrings(c.peers, f),
				ExternalIDs: map[string]string{ClusterPolicyKey: b.p.Name, PolicyRuleKey: c.key, IPFamilyKey: f}})
			match := fmt.Sprintf("%s == @%s && %s.%s == $%s", d.port, pg, f, d.peer, set)
			if svc != "" {
				match += " && " + svc
			}
			b.acl(d, pg, c.key, f, prio, match, verb)
		}
	}
}

// group returns the port group of cell c's subject ports, adding it to the shard once: the
// policy's own group when they are its whole subject, else one of the cell's.
func (b *cnpBuilder) group(c cnpCell) string {
	name, ports := ClusterPolicyPortGroup(b.p.Name, ""), b.subject
	if !slices.Equal(c.ports, b.subject) {
		name, ports = ClusterPolicyPortGroup(b.p.Name, c.key), c.ports
	}
	if b.groups == nil {
		b.groups = map[string]bool{}
	}
	if !b.groups[name] {
		b.groups[name] = true
		b.sh.PortGroups = append(b.sh.PortGroups, PortGroup{Name: name, Owned: true, Ports: slices.Clone(ports)})
	}
	return name
}

func (b *cnpBuilder) acl(d policyDir, pg, key, f string, prio int, match, action string) {
	ids := map[string]string{ClusterPolicyKey: b.p.Name, PolicyRuleKey: key}
	if f != "" {
		ids[IPFamilyKey] = f
		key += "/" + f
	}
	a := ACL{PortGroup: pg, Name: ACLName("cnp/"+b.p.Name, key), Direction: d.acl, Priority: prio, Match: match, Action: action, ExternalIDs: ids}
	if d.egress {
		a.Options = map[string]string{"apply-after-lb": "true"}
	}
	b.sh.ACLs = append(b.sh.ACLs, a)
}

func (b *cnpBuilder) finish() Shard {
	sort.Slice(b.sh.ACLs, func(i, j int) bool { return b.sh.ACLs[i].Name < b.sh.ACLs[j].Name })
	sort.Slice(b.sh.AddressSets, func(i, j int) bool { return b.sh.AddressSets[i].Name < b.sh.AddressSets[j].Name })
	sort.Slice(b.sh.PortGroups, func(i, j int) bool { return b.sh.PortGroups[i].Name < b.sh.PortGroups[j].Name })
	return b.sh
}

// ClusterPolicyPortGroup names the port group of a policy's subject (cell "") or of the part
// of it one cell keeps after a Pass rule was cut out. A name that is an OVN identifier as it
// is (no '-' or '.') holds no '_', so the hashed forms, which start with "__", never meet it.
func ClusterPolicyPortGroup(name, cell string) string {
	if cell == "" {
		if id, replaced := ovnIdent(name); !replaced && len(id) <= 40 {
			return "kovn_cnp_" + id
		}
		return "kovn_cnp__" + longHash(name)
	}
	return "kovn_cnp__" + longHash(name+"\x00"+cell) + "_part"
}

// cnpAddressSet names a cell's address set of family f (apart from the sets OVN derives from
// port groups, <group>_ip4, by its own prefix).
func cnpAddressSet(name, cell, f string) string {
	return "kovn_cnpas__" + longHash(name+"\x00"+cell) + "_" + f
}

func longHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", h[:8])
}

func hostPrefixes(ips []netip.Addr) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	return out
}
