// Package cluster holds kovn-controller's single-cluster reconcilers, one per resource. Each
// reconciler that owns northbound rows computes its object's shard with a pure topology
// function (ForVpc, ForSubnet, ForNode, ForPod) and applies it with nbsync in one
// transaction, so the cost of one event does not grow with the cluster.
package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ipam"
)

// Options configure the controller.
type Options struct {
	DefaultVpc        string // "ovn-cluster"
	DefaultSubnet     string // "ovn-default"
	DefaultSubnetCIDR string // "10.16.0.0/16"
	JoinSubnet        string // "join"
	JoinCIDR          string // "100.64.0.0/16"
	NodeNATOutgoing   bool   // default subnet natOutgoing
	// AttachmentNetworks: kovn serves the pods' k8s.v1.cni.cncf.io/networks (allocation and
	// records); false when a meta-plugin (Multus) does and kovn is the default network only.
	AttachmentNetworks bool
	// ExternalIPCIDRs are the admin's ranges for Services' spec.externalIPs; empty: none.
	ExternalIPCIDRs []netip.Prefix
	// AttachmentHostInterfaces are the node interfaces attachment delegates may name.
	AttachmentHostInterfaces []string
	// ACLLogRate is each ACL log meter's lines per second and node (--acl-log-rate): the
	// admin's Subnet ACLs' meter, and each namespace's for its policies.
	ACLLogRate int
}

// DefaultOptions match Kube-OVN's defaults, so users moving over keep their addressing.
func DefaultOptions() Options {
	return Options{DefaultVpc: "ovn-cluster", DefaultSubnet: "ovn-default", DefaultSubnetCIDR: "10.16.0.0/16",
		JoinSubnet: "join", JoinCIDR: "100.64.0.0/16", NodeNATOutgoing: true, AttachmentNetworks: true, ACLLogRate: 20}
}

// State is what the reconcilers share: the IPAM and the last valid form of every Subnet (an
// update that turns a Subnet invalid keeps the last good one programmed).
type State struct {
	Opts Options
	IPAM *ipam.IPAM

	mu       sync.Mutex
	subnets  map[string]topology.SubnetIn
	restored chan struct{}
	// podBandwidth names each subnet whose pod bandwidth default changed: its pods' limits
	// are recomputed (PodPortReconciler).
	podBandwidth chan event.TypedGenericEvent[string]
}

// MarkRestored opens the gate the reconcilers wait on (see WaitRestored).
func (s *State) MarkRestored() { close(s.restored) }

// WaitRestored blocks until the IPAM was rebuilt from the API by the elected leader: no
// reconciler may allocate before that, or it could hand out an address already in use.
func (s *State) WaitRestored(ctx context.Context) error {
	select {
	case <-s.restored:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// NewState returns an empty state.
func NewState(opts Options) *State {
	return &State{Opts: opts, IPAM: ipam.New(), subnets: map[string]topology.SubnetIn{}, restored: make(chan struct{}),
		podBandwidth: make(chan event.TypedGenericEvent[string], 256)}
}

func (s *State) setSubnet(sn topology.SubnetIn) {
	s.mu.Lock()
	old := s.subnets[sn.Name]
	s.subnets[sn.Name] = sn
	s.mu.Unlock()
	if old.PodBandwidth != sn.PodBandwidth {
		ev := event.TypedGenericEvent[string]{Object: sn.Name}
		select {
		case s.podBandwidth <- ev:
		default: // never block a subnet's reconcile on the pods' queue
			go func() { s.podBandwidth <- ev }()
		}
	}
}

func (s *State) deleteSubnet(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subnets, name)
}

// Join returns the join subnet, if it is valid.
func (s *State) Join() *topology.SubnetIn {
	if sn, ok := s.Subnet(s.Opts.JoinSubnet); ok {
		return &sn
	}
	return nil
}

// Subnet returns the last valid form of a subnet.
func (s *State) Subnet(name string) (topology.SubnetIn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.subnets[name]
	return sn, ok
}

// SubnetForNetwork returns the valid subnet whose provider is the NetworkAttachmentDefinition
// key ("namespace/name"); none, or more than one, is an error naming them.
func (s *State) SubnetForNetwork(key string) (topology.SubnetIn, error) {
	var found []topology.SubnetIn
	for _, sn := range s.Subnets() {
		if sn.Provider == key {
			found = append(found, sn)
		}
	}
	switch len(found) {
	case 0:
		return topology.SubnetIn{}, fmt.Errorf("network %s: no valid Subnet has provider %s", key, key)
	case 1:
		return found[0], nil
	}
	return topology.SubnetIn{}, fmt.Errorf("network %s: Subnets %s and %s both have provider %s; keep one", key, found[0].Name, found[1].Name, key)
}

// Subnets returns every valid subnet, sorted by name.
func (s *State) Subnets() []topology.SubnetIn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]topology.SubnetIn, 0, len(s.subnets))
	for _, sn := range s.subnets {
		out = append(out, sn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// addressing returns, for each address, the CIDR of sn holding it and that CIDR's gateway,
// formatted for the cidr/gateway annotations.
func addressing(sn topology.SubnetIn, ips []netip.Addr) (cidrs, gateways string) {
	var cs, gs []string
	for _, ip := range ips {
		c, gw, _ := cidrOf(sn, ip)
		cs, gs = append(cs, c.String()), append(gs, gw.String())
	}
	return strings.Join(cs, ","), strings.Join(gs, ",")
}

// cidrOf returns the subnet CIDR holding ip.
func cidrOf(sn topology.SubnetIn, ip netip.Addr) (netip.Prefix, netip.Addr, bool) {
	for i, c := range sn.CIDRs {
		if c.Contains(ip) {
			return c, sn.Gateways[i], true
		}
	}
	return netip.Prefix{}, netip.Addr{}, false
}
