// Package topology computes, as pure functions of Kubernetes state, the OVN northbound rows
// kovn wants. The state is cut into shards, one per Kubernetes object: a Vpc owns its logical
// router and its static routes, a Subnet its logical switch, router port and policies, a Node
// its ovn0 port, port group and reroute policies, a pod its switch port. Each shard is computed
// from that object (and the few facts it depends on) alone, so one event costs the same in a
// cluster of ten pods as in one of ten thousand. Nothing here talks to OVN or Kubernetes;
// nbsync applies a shard in one transaction.
package topology

import "net/netip"

// Shard is every northbound row one Kubernetes object owns, each naming the parent row (switch
// or router) that references it.
type Shard struct {
	OwnerType string // "Vpc", "Subnet", "Node", "Pod"
	Owner     string // the object's key: name, or namespace/name

	Routers     []Router
	Switches    []Switch
	SwitchPorts []SwitchPort
	RouterPorts []RouterPort
	Policies    []Policy
	Routes      []StaticRoute
	PortGroups  []PortGroup
	// Memberships adds switch ports to port groups another shard owns (a pod to its node's
	// group). Membership is only ever added or removed by mutation, never written whole.
	Memberships []Membership
	// LoadBalancers are a Service's OVN load balancers, one per protocol.
	LoadBalancers []LoadBalancer
	// LoadBalancerGroups are groups this shard owns; switches and routers (LBGroups) and
	// load balancers (Groups) of any shard join them by mutation.
	LoadBalancerGroups []LoadBalancerGroup
	// ACLs hang off port groups of this shard whose columns it owns (PortGroup.Owned), or off
	// switches (a private subnet's).
	ACLs []ACL
	// AddressSets are owned whole: name, addresses and external_ids.
	AddressSets []AddressSet
	// QoS are bandwidth meters on switches (a pod's limits); Logical_Switch.qos_rules is
	// shared, so they join and leave it by mutation, as a switch's ACLs do.
	QoS []QoS
	// Meters are rate limits the shard owns (the ACL log meter).
	Meters []Meter
	// NATs are NAT rows on routers (a FloatingIP's).
	NATs []NAT
	// StaticMACBindings are neighbours of the shard's router ports.
	StaticMACBindings []StaticMACBinding
	// TemplateVars are this shard's Chassis_Template_Var variables, by chassis then name.
	// Rows are shared by every shard; a shard owns the variables named with its
	// TemplateVarPrefix (computed from the owner alone, so an empty shard removes them).
	TemplateVars map[string]map[string]string
}

// ACL is an ACL of the Owned port group PortGroup or, when Switch is set instead, of that
// logical switch. A group's acls column is its shard's alone and written whole; a switch's is
// shared (an admin's or another writer's ACLs may hang there too), so a switch ACL joins and
// leaves it by mutation. Name is unique within the shard (nbsync keys rows on it, so a changed
// match updates the row in place) and at most 63 bytes (the schema's limit); it is what ACL
// logs print.
type ACL struct {
	PortGroup   string
	Switch      string
	Name        string
	Direction   string // to-lport | from-lport
	Priority    int
	Match       string
	Action      string // allow | allow-related | drop | reject
	Options     map[string]string
	ExternalIDs map[string]string
	// LogSeverity, when set, logs each packet the ACL hits (a connection's first, for
	// allow-related) at that severity, rate-limited by Meter (ACLLogMeter when empty).
	LogSeverity string
	Meter       string
}

// Meter is a packet-rate meter the shard owns, by Name (unique in NB): packets above
// RatePPS, after a burst of BurstPackets, are dropped (for ACL logging: not logged).
type Meter struct {
	Name         string
	RatePPS      int
	BurstPackets int
}

// QoS is a QoS row of Switch limiting the traffic its match selects to RateKbps, with a
// bucket of BurstKbits. Name is unique within the shard (nbsync keys rows on it).
type QoS struct {
	Switch     string
	Name       string
	Direction  string // from-lport: traffic from a port; to-lport: traffic to it
	Priority   int
	Match      string
	RateKbps   int
	BurstKbits int
}

// Bandwidth is a limit each way in kbit/s; 0 is none. Ingress is traffic to the pod.
type Bandwidth struct {
	IngressKbps, EgressKbps int
}

// AddressSet is an Address_Set, referenced from matches as $Name.
type AddressSet struct {
	Name      string
	Addresses []string // sorted
	// Shared sets may be wanted by several shards with the same content: nbsync records each
	// shard using one and deletes it with the last (owner type OwnerPolicyPeer).
	Shared      bool
	ExternalIDs map[string]string
}

// LoadBalancer is a Load_Balancer. nbsync owns the whole row; its membership in load balancer
// groups (owned by another shard) is added and removed by mutation.
type LoadBalancer struct {
	Name            string
	Protocol        string            // tcp | udp | sctp
	VIPs            map[string]string // "10.96.0.10:53" -> "10.16.0.5:53,10.16.0.6:53" ("" = no backend)
	Options         map[string]string
	SelectionFields []string // e.g. ip_src, ip_dst
	ExternalIDs     map[string]string
	Groups          []string // Load_Balancer_Group names it belongs to
}

// LoadBalancerGroup is a Load_Balancer_Group.
type LoadBalancerGroup struct {
	Name string
}

// Router is a Logical_Router.
type Router struct {
	Name string
	// LBGroups are load balancer groups the router references (mutation, so groups others
	// attach stay).
	LBGroups []string
}

// RouterPort is a Logical_Router_Port of Router.
type RouterPort struct {
	Router   string
	Name     string
	MAC      string
	Networks []string // "10.16.0.1/16"
	// IPv6RAConfigs is the port's ipv6_ra_configs: set when it has an IPv6 network, so OVN
	// answers router solicitations; empty otherwise.
	IPv6RAConfigs map[string]string
	// GatewayChassis make the port a distributed gateway port bound to the highest-priority
	// live chassis (BFD decides liveness); empty: an ordinary port.
	GatewayChassis []GatewayChassis
	// ExternalIDs are written beside kovn's ownership keys; OVN copies a router port's
	// external_ids to its Port_Binding.
	ExternalIDs map[string]string
}

// GatewayChassis is one chassis a gateway port may be bound to.
type GatewayChassis struct {
	Chassis  string // Chassis name (the node's OVS system-id)
	Priority int    // 0..32767, higher preferred
}

// Policy is a Logical_Router_Policy of Router.
type Policy struct {
	Router   string
	Priority int
	Match    string
	Action   string // allow | drop | reroute
	Nexthops []string
	// ExternalIDs are extra keys on the row (GatewayHopsKey).
	ExternalIDs map[string]string
}

// StaticRoute is a Logical_Router_Static_Route of Router.
type StaticRoute struct {
	Router  string
	Prefix  string
	Nexthop string
	Policy  string // "" (dst-ip) or "src-ip"
}

// Switch is a Logical_Switch. OtherConfig holds only the keys kovn owns; keys others set on
// the same row are left alone.
type Switch struct {
	Name        string
	OtherConfig map[string]string
	LBGroups    []string // load balancer groups the switch references (mutation, as for routers)
}

// SwitchPort is a Logical_Switch_Port of Switch.
type SwitchPort struct {
	Switch       string
	Name         string
	Type         string // "" for VIFs, "router" for the switch side of a router port
	Addresses    []string
	PortSecurity []string
	Options      map[string]string
	Tag          *int              // a localnet port's VLAN ID; nil: untagged
	ExternalIDs  map[string]string // beyond ownership: pod, node
}

// PortGroup is a Port_Group. Unless Owned, its members join it through Memberships of their
// own shards and its ACLs are left alone. An Owned group (a NetworkPolicy's) is the shard's
// alone: its ports column is written whole from Ports (switch port names; ports are weak
// references, so a deleted pod leaves by itself) and its acls column whole from the shard's
// ACLs naming it.
type PortGroup struct {
	Name  string
	Owned bool
	Ports []string // sorted; only for Owned groups
	// OwnsACLs: the group's acls column is written whole from the shard's ACLs naming it,
	// while its ports still join by Memberships (a node's group: its pods' shards add them).
	OwnsACLs bool
}

// Membership puts switch port Port into port group PortGroup.
type Membership struct {
	PortGroup string
	Port      string
}

// Policy priorities (higher wins). Traffic between cluster subnets is routed normally; traffic
// to a node address enters that node through its ovn0; traffic of centralized subnets leaves
// through their active gateway node; every other pod's traffic leaves through its own node.
const (
	PriorityAllowCluster = 31000
	// A foreign AZ's learned prefixes go to its peering router (below the cluster's and
	// clusterset's own prefixes, above every way out through a node).
	PriorityForeignAZ      = 30900
	PriorityNodeReroute    = 30000
	PriorityFloatingIP     = 29800 // a pod with a floating IP leaves through its external network
	PriorityEgressIP       = 29700 // a pod an EgressIP selects leaves through its external network
	PriorityCentralGateway = 29500
	PriorityDistributedGW  = 29000
)

// VpcIn is one VPC (router) with the routes of its spec (Router is filled in by ForVpc).
type VpcIn struct {
	Name     string
	Routes   []StaticRoute
	Policies []Policy
}

// SubnetIn is a valid Subnet with its addressing resolved.
type SubnetIn struct {
	Name         string
	Vpc          string
	Switch       string // logical switch name
	CIDRs        []netip.Prefix
	Gateways     []netip.Addr // one per CIDR, same order
	ExcludeIPs   []string     // as in the spec, for other_config
	Centralized  bool
	GatewayNodes []string // in preference order
	// Private: only the subnet itself, AllowSubnets and the nodes may open connections to it.
	Private      bool
	AllowSubnets []netip.Prefix
	// Underlay, when set, puts the subnet on a physical network (a Vlan of a ProviderNetwork)
	// instead of the overlay: no router port, the gateway is the physical router.
	Underlay *UnderlayIn
	// ACLs are the admin's rules (spec.acls), validated.
	ACLs []SubnetACLIn
	// PodBandwidth is the default (and ceiling) of each pod's limits (spec.podBandwidth).
	PodBandwidth Bandwidth
	// Provider, when set, makes the subnet an attachment network's (spec.provider names its
	// NetworkAttachmentDefinition): no pod's eth0 takes an address from it.
	Provider string
}

// SubnetACLIn is one of a subnet's admin ACLs; Priority is the spec's, 0..999.
type SubnetACLIn struct {
	Direction, Match, Action string
	Priority                 int
	LogSeverity              string // "": not logged
}

// UnderlayIn is an underlay subnet's physical network.
type UnderlayIn struct {
	Provider string // OVN network name (ovn-bridge-mappings), the ProviderNetwork's name
	VlanID   int    // 0: untagged
	// External, when set, gives the default VPC's router a port on this network: the way
	// FloatingIPs of the subnet reach their pods.
	External *ExternalGatewayIn
}

// ExternalGatewayIn is the default VPC router's port on an underlay subnet.
type ExternalGatewayIn struct {
	Addrs []netip.Addr // the port's addresses, one per family
	Nodes []string     // gateway chassis, in preference order
	// GatewayMAC, when set, is the physical router's MAC: a static MAC binding of each of the
	// subnet's gateways on the port.
	GatewayMAC string
}

// StaticMACBinding tells a router port the MAC of a neighbour. The row has no external_ids:
// it is owned through its port, which the shard owns.
type StaticMACBinding struct {
	Port string
	IP   netip.Addr
	MAC  string
}

// NAT is a Logical_Router NAT row of Router. GatewayPort names the distributed gateway port
// it is done on (a router with several needs it).
type NAT struct {
	Router      string
	Type        string // dnat_and_snat (FloatingIP) or snat (EgressIP)
	ExternalIP  netip.Addr
	LogicalIP   netip.Addr
	GatewayPort string
	// LogicalPort and ExternalMAC, when set, make the NAT distributed: done on the chassis
	// of that port, which answers for ExternalIP with ExternalMAC on the external network.
	LogicalPort, ExternalMAC string
}

// NodeIn is a node with its ovn0 addressing.
type NodeIn struct {
	Name    string
	Ready   bool
	NodeIPs []netip.Addr // InternalIP addresses
	JoinIPs []netip.Addr
	JoinMAC string
	// MasqIPs are the node's masquerade addresses (see contract.NodeMasqIPName), also on
	// its ovn0 port so that OVN delivers replies to them there.
	MasqIPs []netip.Addr
	// HoldsHealthPort: OVN bound the centralized subnet's health port (HealthPortName) to this
	// node's chassis, i.e. BFD finds it the live gateway of highest priority. Set per subnet.
	HoldsHealthPort bool
}

// PodIn is a pod with its allocation, as the controller recorded it in the pod's IP object.
type PodIn struct {
	Namespace, Name string
	Node            string
	Switch          string // logical switch of the pod's subnet
	IPs             []netip.Addr
	MAC             string
	Bandwidth       Bandwidth // resolved from the pod's annotations and its Subnet's default
	// Attachments are the pod's ports on attachment networks' subnets (type kovn), by interface.
	Attachments []AttachmentIn
}

// AttachmentIn is one attachment interface of a pod on a kovn Subnet.
type AttachmentIn struct {
	Interface string // in the pod: net1, ...
	Switch    string // logical switch of the attachment network's subnet
	IPs       []netip.Addr
	MAC       string
}
