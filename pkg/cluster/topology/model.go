// Package topology computes, as a pure function of the Kubernetes objects, the OVN northbound
// topology kovn wants: one logical router per VPC, one logical switch per Subnet, a switch port
// per pod and per node (ovn0), router policies for the gateways and a port group per node.
// Nothing here talks to OVN or Kubernetes; nbsync applies the result in one transaction.
package topology

import "net/netip"

// Desired is the whole northbound state kovn owns.
type Desired struct {
	Routers    []Router
	Switches   []Switch
	PortGroups []PortGroup
	// Frozen names switches whose Subnet exists but is currently invalid and has never been
	// valid in this controller's life: they are left exactly as they are in the database.
	Frozen []string
}

// Router is a Logical_Router with the children kovn manages.
type Router struct {
	Name     string
	Owner    string // VPC name
	Ports    []RouterPort
	Policies []Policy
	Routes   []StaticRoute
}

// RouterPort is a Logical_Router_Port.
type RouterPort struct {
	Name     string
	MAC      string
	Networks []string // "10.16.0.1/16"
}

// Policy is a Logical_Router_Policy.
type Policy struct {
	Priority int
	Match    string
	Action   string // allow | drop | reroute
	Nexthops []string
}

// StaticRoute is a Logical_Router_Static_Route.
type StaticRoute struct {
	Prefix  string
	Nexthop string
}

// Switch is a Logical_Switch with its ports.
type Switch struct {
	Name        string
	Owner       string // Subnet name
	OtherConfig map[string]string
	Ports       []SwitchPort
}

// SwitchPort is a Logical_Switch_Port.
type SwitchPort struct {
	Name         string
	Type         string // "" for VIFs, "router" for the switch side of a router port
	Addresses    []string
	PortSecurity []string
	Options      map[string]string
	ExternalIDs  map[string]string // beyond ownership: pod, node
}

// PortGroup is a Port_Group whose ports are switch ports named here.
type PortGroup struct {
	Name  string
	Owner string
	Ports []string // switch port names
}

// Policy priorities (higher wins). Traffic between cluster subnets is routed normally; traffic
// to a node address enters that node through its ovn0; traffic of centralized subnets leaves
// through their active gateway node; every other pod's traffic leaves through its own node.
const (
	PriorityAllowCluster   = 31000
	PriorityNodeReroute    = 30000
	PriorityCentralGateway = 29500
	PriorityDistributedGW  = 29000
)

// Input is everything the topology depends on, already validated and resolved.
type Input struct {
	Vpcs    []VpcIn
	Subnets []SubnetIn
	// InvalidSubnets exist as objects but are not programmed (kept as they are: see Frozen).
	InvalidSubnets []string
	Nodes          []NodeIn
	Pods           []PodIn
	JoinSubnet     string // name of the join subnet among Subnets
}

// VpcIn is one VPC (router).
type VpcIn struct{ Name string }

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
}

// NodeIn is a node with its ovn0 addressing.
type NodeIn struct {
	Name    string
	Ready   bool
	NodeIPs []netip.Addr // InternalIP addresses
	JoinIPs []netip.Addr
	JoinMAC string
}

// PodIn is a pod with its allocation.
type PodIn struct {
	Namespace, Name string
	Node            string
	Subnet          string
	IPs             []netip.Addr
	MAC             string
}
