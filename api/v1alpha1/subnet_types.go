package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultVpcName is the VPC (OVN logical router) a Subnet belongs to when spec.vpc is not set.
const DefaultVpcName = "ovn-cluster"

// Protocol is the IP family set of a Subnet.
// +kubebuilder:validation:Enum=IPv4;IPv6;Dual
type Protocol string

const (
	ProtocolIPv4 Protocol = "IPv4"
	ProtocolIPv6 Protocol = "IPv6"
	ProtocolDual Protocol = "Dual"
)

// GatewayType is how traffic from a Subnet leaves the cluster.
// +kubebuilder:validation:Enum=distributed;centralized
type GatewayType string

const (
	// GatewayDistributed: every node routes its own pods' egress traffic (via ovn0).
	GatewayDistributed GatewayType = "distributed"
	// GatewayCentralized: egress goes through one of spec.gatewayNodes, failing over in list order.
	GatewayCentralized GatewayType = "centralized"
)

// SubnetSpec is the desired state of a Subnet.
//
// Cross-field rules live here because CEL can only see sibling fields from the parent. Each rule
// first checks that the fields it reads are well-formed, so a malformed value yields only the
// field rule's message and never an evaluation error.
//
// +kubebuilder:validation:XValidation:rule="!has(self.gatewayType) || self.gatewayType != 'centralized' || (has(self.gatewayNodes) && size(self.gatewayNodes) > 0)",message="gatewayNodes is required when gatewayType is centralized"
// +kubebuilder:validation:XValidation:rule="!has(self.protocol) || !self.cidrBlock.split(',').all(c, isCIDR(c)) || self.protocol == (size(self.cidrBlock.split(',')) == 2 ? 'Dual' : (cidr(self.cidrBlock).ip().family() == 6 ? 'IPv6' : 'IPv4'))",message="protocol does not match the IP families of cidrBlock"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || size(self.gateway) == 0 || !self.cidrBlock.split(',').all(c, isCIDR(c)) || (size(self.gateway.split(',')) == size(self.cidrBlock.split(',')) && self.gateway.split(',').all(g, isIP(g) && self.cidrBlock.split(',').exists(c, cidr(c).containsIP(g))) && (size(self.gateway.split(',')) == 1 || ip(self.gateway.split(',')[0]).family() != ip(self.gateway.split(',')[1]).family()))",message="gateway must hold one address per CIDR of cidrBlock, each inside its CIDR"
// +kubebuilder:validation:XValidation:rule="has(self.logicalSwitch) == has(oldSelf.logicalSwitch) && (!has(self.logicalSwitch) || self.logicalSwitch == oldSelf.logicalSwitch)",message="logicalSwitch is immutable: the controller would orphan the old OVN logical switch and its ports"
type SubnetSpec struct {
	// Vpc is the Vpc whose router this subnet attaches to. Immutable: moving a subnet between
	// routers would require re-addressing every pod on it.
	// +kubebuilder:default=ovn-cluster
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="vpc is immutable"
	// +optional
	Vpc string `json:"vpc,omitempty"`

	// CIDRBlock is one CIDR, or an IPv4 and an IPv6 CIDR separated by a comma (dual stack), in
	// canonical form without spaces, e.g. "10.16.0.0/16" or "10.16.0.0/16,fd00:10:16::/64".
	//
	// Immutable. Addresses already handed out to pods, the logical switch's subnet and the router
	// port's networks are all derived from it; changing it under running pods would leave them
	// with addresses and routes the switch no longer serves (and a shrink could hand a live address
	// to a second pod). To renumber, create a new Subnet and move the workloads.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.split(',').all(c, isCIDR(c) && string(cidr(c).masked()) == c)",message="cidrBlock must be comma-separated CIDRs in canonical form without spaces, e.g. 10.16.0.0/16,fd00:10:16::/64"
	// +kubebuilder:validation:XValidation:rule="size(self.split(',')) == 1 || (size(self.split(',')) == 2 && (!self.split(',').all(c, isCIDR(c)) || cidr(self.split(',')[0]).ip().family() != cidr(self.split(',')[1]).ip().family()))",message="cidrBlock holds at most one IPv4 and one IPv6 CIDR"
	// +kubebuilder:validation:XValidation:rule="self.split(',').all(c, !isCIDR(c) || cidr(c).prefixLength() <= (cidr(c).ip().family() == 4 ? 30 : 126))",message="cidrBlock is too small: an IPv4 CIDR must be /30 or larger, an IPv6 CIDR /126 or larger"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cidrBlock is immutable: create a new Subnet to renumber"
	CIDRBlock string `json:"cidrBlock"`

	// Gateway is the router address of the subnet, one per CIDR in the same order style
	// ("10.16.0.1" or "10.16.0.1,fd00:10:16::1"). Empty means the first address of each CIDR.
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.split(',').all(g, isIP(g))",message="gateway must be comma-separated IP addresses without spaces"
	// +optional
	Gateway string `json:"gateway,omitempty"`

	// ExcludeIPs are addresses IPAM never hands out: single addresses or inclusive ranges
	// "first..last", all inside cidrBlock. The gateway is always excluded implicitly.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, x.contains('..') ? (size(x.split('..')) == 2 && isIP(x.split('..')[0]) && isIP(x.split('..')[1]) && ip(x.split('..')[0]).family() == ip(x.split('..')[1]).family()) : isIP(x))",message="each excludeIps entry must be an IP address or a range first..last of one family"
	// +listType=atomic
	// +optional
	ExcludeIPs []string `json:"excludeIps,omitempty"`

	// Protocol is derived from cidrBlock (IPv4, IPv6 or Dual). It may be left empty; if set it
	// must agree with cidrBlock.
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`

	// Namespaces whose pods get their addresses from this subnet by default. A namespace may be
	// bound to only one subnet (checked by the controller).
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// Vlan names a Vlan object; when set the subnet is an underlay (localnet) network on that
	// VLAN instead of a Geneve overlay.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Vlan string `json:"vlan,omitempty"`

	// NATOutgoing SNATs traffic leaving the cluster to the address of the egress node.
	// +optional
	NATOutgoing bool `json:"natOutgoing,omitempty"`

	// GatewayType selects distributed (every node) or centralized (spec.gatewayNodes) egress.
	// +kubebuilder:default=distributed
	// +optional
	GatewayType GatewayType `json:"gatewayType,omitempty"`

	// GatewayNodes are the nodes that carry egress traffic for a centralized gateway, in order of
	// preference: when one is gone the next takes over. Required when gatewayType is centralized.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	GatewayNodes []string `json:"gatewayNodes,omitempty"`

	// Private isolates the subnet: only traffic from its own CIDR and from allowSubnets may reach
	// its pods.
	// +optional
	Private bool `json:"private,omitempty"`

	// AllowSubnets are CIDRs allowed to reach a private subnet.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, isCIDR(c) && string(cidr(c).masked()) == c)",message="each allowSubnets entry must be a CIDR in canonical form"
	// +listType=set
	// +optional
	AllowSubnets []string `json:"allowSubnets,omitempty"`

	// Default marks the cluster's default subnet, used by pods whose namespace is bound to no
	// subnet. At most one subnet may be default (checked by the controller).
	// +optional
	Default bool `json:"default,omitempty"`

	// Provider makes this an attachment network's subnet: it names the
	// NetworkAttachmentDefinition ("namespace/name") whose attachments take their addresses
	// from it (type kovn: a port on this subnet's switch; a delegate plugin with ipam
	// {type: kovn}: the addresses only). Such a subnet is no pod's default network: it binds no
	// namespace and is not the default, and a pod cannot ask for it as its logical_switch.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provider is immutable: addresses allocated for one network must not move to another"
	// +optional
	Provider string `json:"provider,omitempty"`

	// BGPAdvertise lets kovn-speaker announce this subnet's addresses to the cluster's BGP peers
	// (subnets of the default VPC only: nodes route nothing else). How is bgpPolicy's choice.
	// Pods may also ask for a host route of their own (the kovn.io/bgp annotation) only in a
	// subnet that has it.
	// +optional
	BGPAdvertise bool `json:"bgpAdvertise,omitempty"`

	// BGPPolicy says who announces what when bgpAdvertise is on. Cluster: every speaker node
	// announces cidrBlock, so outside traffic enters at any of them; entering at a node other
	// than the pod's, it is masqueraded to that node's join address (the reply must come back
	// the same way). Local: no cidrBlock route; each pod's address is announced by the node
	// that hosts it, where traffic enters and the pod sees the client's own address.
	// +kubebuilder:validation:Enum=Cluster;Local
	// +kubebuilder:default=Cluster
	// +optional
	BGPPolicy BGPPolicy `json:"bgpPolicy,omitempty"`

	// ACLs are the admin's rules on the subnet's logical switch, in OVN's own terms: a direction
	// (to-lport: traffic to the subnet's pods; from-lport: from them), a priority, an OVN match
	// (ovn-sb(5)) and an action. They sit above every NetworkPolicy and the private-subnet
	// isolation (OVN priority 2000 + priority), so a namespace user cannot open what they close.
	// A match OVN would refuse makes the Subnet Validated=False (InvalidACL) and leaves the
	// last valid ACLs programmed.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	ACLs []SubnetACL `json:"acls,omitempty"`

	// PodBandwidth is the default limit of each pod's traffic, both ways, enforced by OVN QoS
	// meters on the pod's port. A pod's kubernetes.io/ingress-bandwidth and
	// kubernetes.io/egress-bandwidth annotations may lower it, never raise it. An invalid value
	// makes the Subnet Validated=False (InvalidBandwidth) and leaves the last valid one in force.
	// +optional
	PodBandwidth *PodBandwidth `json:"podBandwidth,omitempty"`

	// ExternalGateway makes an underlay Subnet (spec.vlan) an external network of the default
	// VPC: its router gets a port on this network, hosted by one of its gateway nodes at a time
	// (OVN moves it when that node is lost), through which FloatingIPs taken from this Subnet
	// reach their pods and EgressIPs' pods leave.
	// +optional
	ExternalGateway *ExternalGateway `json:"externalGateway,omitempty"`

	// LogicalSwitch is the name of the OVN logical switch; empty means the Subnet's name.
	// Immutable once set (including set/unset).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	LogicalSwitch string `json:"logicalSwitch,omitempty"`
}

// ExternalGateway is the default VPC router's port on an underlay Subnet.
// +kubebuilder:validation:XValidation:rule="(has(self.nodes) && size(self.nodes) > 0) || has(self.nodeSelector)",message="name nodes or a nodeSelector"
type ExternalGateway struct {
	// Addresses are the router port's addresses on this network, at most one per family of
	// the Subnet, inside its cidrBlock; the Subnet's IPAM never hands them out.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	Addresses []string `json:"addresses"`
	// Nodes may host the port, in order of preference; each needs the Subnet's provider
	// network.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	Nodes []string `json:"nodes,omitempty"`
	// NodeSelector picks the nodes that may host the port by label when Nodes is empty
	// (e.g. kovn.io/external-gateway: "true"); they are preferred in the order of their names,
	// and a node labelled or unlabelled joins or leaves at once.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// GatewayMAC is the MAC address of the Subnet's gateway (the physical router, e.g. its
	// VRRP MAC). With it the router port knows the gateway's MAC from the start (a static
	// MAC binding) instead of resolving it. IPv6 needs it with OVN 23.03: OVN's neighbour
	// solicitation for a next hop goes to the solicited-node group of the packet's
	// destination, not of the next hop, so the physical router never answers it.
	// +kubebuilder:validation:Pattern=`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`
	// +optional
	GatewayMAC string `json:"gatewayMAC,omitempty"`
}

// SubnetACL is one admin rule on a Subnet's logical switch.
type SubnetACL struct {
	// Direction: to-lport matches traffic on its way to the subnet's pods, from-lport traffic
	// leaving them.
	// +kubebuilder:validation:Enum=to-lport;from-lport
	Direction string `json:"direction"`
	// Priority orders the subnet's ACLs, higher first: 0 to 999, written as OVN priority
	// 2000 + priority.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999
	Priority int `json:"priority"`
	// Match is an OVN match expression, e.g. `ip4.src == 10.17.0.0/16 && tcp.dst == 8080`.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Match string `json:"match"`
	// Action: allow, allow-related (replies pass too), drop, or reject (a TCP reset or an ICMP
	// unreachable goes back).
	// +kubebuilder:validation:Enum=allow;allow-related;drop;reject
	Action string `json:"action"`
	// Log writes a line to the ovn-controller log of the node that applies the rule for each
	// packet it drops or rejects, or for each connection it allows, named
	// "<subnet>:acl/<index>" (see kubectl kovn acl-log). The cluster's ACL log meter caps the
	// lines per node (kovn-controller --acl-log-rate, default 20 per second).
	// +optional
	Log bool `json:"log,omitempty"`
	// Severity of the logged lines: alert, warning, notice, info (default) or debug.
	// +kubebuilder:validation:Enum=alert;warning;notice;info;debug
	// +optional
	Severity string `json:"severity,omitempty"`
}

// BGPPolicy is who announces a subnet's addresses over BGP.
type BGPPolicy string

const (
	BGPPolicyCluster BGPPolicy = "Cluster"
	BGPPolicyLocal   BGPPolicy = "Local"
)

// SubnetStatus is the observed state of a Subnet.
//
// Address counts exclude the network, broadcast (IPv4), gateway and excludeIps addresses. They
// saturate at 2^63-1: an IPv6 /64 holds more addresses than int64 counts, and nobody allocates
// them all.
type SubnetStatus struct {
	// ObservedGeneration is the metadata.generation the conditions and counts refer to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Protocol is the IP family set the subnet serves (IPv4, IPv6 or Dual), from cidrBlock.
	// +optional
	Protocol Protocol `json:"protocol,omitempty"`
	// Gateway is the router address per CIDR in effect (spec.gateway, or the first address of
	// each CIDR when it is empty).
	// +optional
	Gateway string `json:"gateway,omitempty"`
	// LogicalSwitch is the OVN logical switch programmed for the subnet.
	// +optional
	LogicalSwitch string `json:"logicalSwitch,omitempty"`

	V4AvailableIPs int64 `json:"v4AvailableIPs"`
	V4UsedIPs      int64 `json:"v4UsedIPs"`
	V6AvailableIPs int64 `json:"v6AvailableIPs"`
	V6UsedIPs      int64 `json:"v6UsedIPs"`

	// Conditions: Validated (the spec is valid and accepted), Ready (the logical switch, its
	// router port and policies are programmed in OVN) and Supported (False while the spec
	// asks for a feature kovn does not implement yet; the rest is programmed).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Subnet is one L2 segment (an OVN logical switch) with an IPv4 and/or IPv6 CIDR, attached to
// the router of a Vpc.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:printcolumn:name="VPC",type=string,JSONPath=`.spec.vpc`
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.status.protocol`
// +kubebuilder:printcolumn:name="CIDR",type=string,JSONPath=`.spec.cidrBlock`
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.status.gateway`
// +kubebuilder:printcolumn:name="GatewayType",type=string,JSONPath=`.spec.gatewayType`,priority=1
// +kubebuilder:printcolumn:name="NAT",type=boolean,JSONPath=`.spec.natOutgoing`,priority=1
// +kubebuilder:printcolumn:name="Default",type=boolean,JSONPath=`.spec.default`,priority=1
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`,priority=1
// +kubebuilder:printcolumn:name="V4Used",type=integer,JSONPath=`.status.v4UsedIPs`
// +kubebuilder:printcolumn:name="V4Available",type=integer,JSONPath=`.status.v4AvailableIPs`
// +kubebuilder:printcolumn:name="V6Used",type=integer,JSONPath=`.status.v6UsedIPs`
// +kubebuilder:printcolumn:name="V6Available",type=integer,JSONPath=`.status.v6AvailableIPs`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Subnet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SubnetSpec   `json:"spec"`
	Status SubnetStatus `json:"status,omitempty"`
}

// VpcName is spec.vpc, defaulted as the apiserver does, for objects built in Go.
func (s *Subnet) VpcName() string {
	if s.Spec.Vpc == "" {
		return DefaultVpcName
	}
	return s.Spec.Vpc
}

// LogicalSwitchName is the OVN logical switch realising this subnet.
func (s *Subnet) LogicalSwitchName() string {
	if s.Spec.LogicalSwitch != "" {
		return s.Spec.LogicalSwitch
	}
	return s.Name
}

// EffectiveGatewayType is spec.gatewayType, defaulted to distributed.
func (s *SubnetSpec) EffectiveGatewayType() GatewayType {
	if s.GatewayType == "" {
		return GatewayDistributed
	}
	return s.GatewayType
}

// SubnetList is a list of Subnets.
// +kubebuilder:object:root=true
type SubnetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Subnet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Subnet{}, &SubnetList{})
}
