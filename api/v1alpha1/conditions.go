package v1alpha1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types shared by all kinds. Every kind reports Ready; kinds whose spec has semantic
// rules beyond CEL (Subnet, IPPool, Vpc) also report Validated, so an operator can tell
// "rejected configuration" from "OVN not converged yet".
const (
	// ConditionReady is True when the object is fully realised in OVN (logical switch, router
	// port, ports, routes ...).
	ConditionReady = "Ready"
	// ConditionValidated is True when the spec passed the controller's semantic validation
	// (Validate, overlap checks, references resolved). When False, Ready is False too and the
	// controller leaves whatever was already programmed in OVN untouched.
	ConditionValidated = "Validated"
	// ConditionSupported is False when the spec sets a field kovn accepts but does not
	// implement yet; the message names the fields. Everything else is programmed.
	ConditionSupported = "Supported"
)

// Condition reasons. They are CamelCase as metav1.Condition requires, and stable: tests and
// tooling match on them, the message carries the detail.
const (
	// ReasonValid: Validated=True.
	ReasonValid = "Valid"
	// ReasonReconciled: Ready=True, OVN matches the spec.
	ReasonReconciled = "Reconciled"
	// ReasonReconciling: Ready=False while the controller is still programming OVN.
	ReasonReconciling = "Reconciling"
	// ReasonReconcileFailed: Ready=False because an OVN/API operation failed; message has the error.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonValidationFailed: Ready=False because Validated is False.
	ReasonValidationFailed = "ValidationFailed"

	// ReasonInvalidCIDR: cidrBlock (or another CIDR field) is malformed, not canonical, too small
	// or has two CIDRs of one family.
	ReasonInvalidCIDR = "InvalidCIDR"
	// ReasonInvalidGateway: gateway malformed, outside its CIDR, the network/broadcast address, or
	// not one per CIDR.
	ReasonInvalidGateway = "InvalidGateway"
	// ReasonInvalidExcludeIPs: an excludeIps entry is malformed, reversed, mixes families or lies
	// outside the subnet.
	ReasonInvalidExcludeIPs = "InvalidExcludeIPs"
	// ReasonProtocolMismatch: spec.protocol disagrees with the families in cidrBlock.
	ReasonProtocolMismatch = "ProtocolMismatch"
	// ReasonInvalidGatewayNodes: centralized gateway without gatewayNodes, or bad node names.
	ReasonInvalidGatewayNodes = "InvalidGatewayNodes"
	// ReasonInvalidAllowSubnets: an allowSubnets entry is not a CIDR.
	ReasonInvalidAllowSubnets = "InvalidAllowSubnets"
	// ReasonInvalidNamespaces: a namespaces entry is not a valid namespace name.
	ReasonInvalidNamespaces = "InvalidNamespaces"
	// ReasonOverlap: the subnet's CIDR overlaps another subnet of the same VPC, or an IPPool
	// overlaps another pool of the same subnet.
	ReasonOverlap = "Overlap"
	// ReasonNamespaceConflict: a namespace is bound to more than one subnet.
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonMultipleDefaults: more than one subnet has default=true.
	ReasonMultipleDefaults = "MultipleDefaults"
	// ReasonVpcNotFound: spec.vpc names a Vpc that does not exist.
	ReasonVpcNotFound = "VpcNotFound"
	// ReasonSubnetNotFound: an IPPool or IP names a Subnet that does not exist.
	ReasonSubnetNotFound = "SubnetNotFound"
	// ReasonInvalidIPs: an IPPool ips entry (or IP address field) is malformed.
	ReasonInvalidIPs = "InvalidIPs"
	// ReasonOutsideSubnet: an IPPool entry is not inside its subnet's CIDRs.
	ReasonOutsideSubnet = "OutsideSubnet"
	// ReasonInvalidMAC: an IP's macAddress is malformed or not unicast.
	ReasonInvalidMAC = "InvalidMAC"
	// ReasonInvalidRoute: a Vpc static or policy route is malformed.
	ReasonInvalidRoute = "InvalidRoute"
	// ReasonNotImplemented: Supported=False, the message names the fields.
	ReasonNotImplemented = "NotImplemented"
	// ReasonImplemented: Supported=True.
	ReasonImplemented = "Implemented"
	// ReasonNamespaceNotAllowed: the subnet binds a namespace its VPC's spec.namespaces does
	// not list.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonMissingField: a required field is empty.
	ReasonMissingField = "MissingField"
	// ReasonInvalidACL: a Subnet ACL's match is one OVN would refuse (the message says where
	// and why), or its direction, priority or action is out of range.
	ReasonInvalidACL = "InvalidACL"
	// ReasonInvalidBandwidth: a Subnet's podBandwidth is not a bandwidth OVN's meters can
	// hold (the message says which and why); the last valid default stays in force. On a pod
	// (an event) its kubernetes.io/{ingress,egress}-bandwidth annotation is refused the same
	// way, and its limit stays what it was.
	ReasonInvalidBandwidth = "InvalidBandwidth"
	// ReasonInvalidExternalGateway: spec.externalGateway on a Subnet without spec.vlan, or an
	// address that is malformed, outside the Subnet or of a family it does not have.
	ReasonInvalidExternalGateway = "InvalidExternalGateway"
	// ReasonNotExternal: a FloatingIP or EgressIP names a Subnet without spec.externalGateway.
	ReasonNotExternal = "NotExternal"
	// ReasonInvalidSelector: an EgressIP's namespace or pod selector is not a valid label
	// selector; what it had programmed stays.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonAddressInUse: a FloatingIP or EgressIP asks for an address another owner holds.
	ReasonAddressInUse = "AddressInUse"
	// ReasonPodNotRunning: a FloatingIP's pod does not exist or has no address yet; the
	// FloatingIP keeps its addresses and binds them when the pod is back.
	ReasonPodNotRunning = "PodNotRunning"
	// ReasonInvalidProvider: a subnet's provider does not name a NetworkAttachmentDefinition
	// ("namespace/name"), or the subnet is also a default network (default, namespaces).
	ReasonInvalidProvider = "InvalidProvider"
	// ReasonInvalidVlan: a subnet's vlan is malformed or combined with fields an underlay
	// subnet cannot have (centralized gateway, private, a custom VPC).
	ReasonInvalidVlan = "InvalidVlan"
	// ReasonVlanNotFound: spec.vlan names a Vlan that does not exist.
	ReasonVlanNotFound = "VlanNotFound"
	// ReasonProviderNotFound: a Vlan's provider names a ProviderNetwork that does not exist.
	ReasonProviderNotFound = "ProviderNotFound"
	// ReasonInterfaceNotFound: a node has no NIC of the name its ProviderNetwork gives.
	ReasonInterfaceNotFound = "InterfaceNotFound"
	// ReasonBridgeFailed: the provider bridge could not be set up on a node.
	ReasonBridgeFailed = "BridgeFailed"
)

// NodeConditionNetworkReady is the Node condition kovn-daemon keeps on its node: whether the
// node can give pods kovn's network now, and if not, which component is down (a reason
// below). Its lastHeartbeatTime is re-written every NodeConditionHeartbeat, so a reader sees
// when kovn-daemon itself stopped reporting.
const NodeConditionNetworkReady = "KovnNetworkReady"

// NodeConditionHeartbeat is how often kovn-daemon re-writes NodeConditionNetworkReady when
// nothing changed; readers treat a heartbeat older than three of these as kovn-daemon down.
const NodeConditionHeartbeat = 30 * time.Second

// NodeConditionTunnelsUp is the second Node condition kovn-daemon keeps: True while every BFD
// session on the node's tunnels is up and forwarding (OVN runs them toward the chassis of HA
// gateways), False naming the remote addresses whose session is not, Unknown while the node's
// OVS database does not answer. The interconnect's gateway hold reads it: a gateway back from
// a failure takes its port again only once it and the other gateways see each other over BFD,
// since a standby that still sees it down keeps claiming the port too (each ovn-controller
// decides from its own sessions) and the two take it from each other for seconds.
const NodeConditionTunnelsUp = "KovnTunnelsUp"

// Reasons of NodeConditionTunnelsUp.
const (
	ReasonBFDUp         = "BFDUp"
	ReasonBFDDown       = "BFDDown"
	ReasonTunnelsUnread = "TunnelsUnread"
)

// Reasons of NodeConditionNetworkReady.
const (
	ReasonNodeNetworkReady  = "Ready"
	ReasonOVSDown           = "OVSDown"
	ReasonOVNControllerDown = "OVNControllerDown"
	ReasonNotPlumbed        = "NotPlumbed"
)

// SetCondition sets condition typ of a status's conditions (True when ok), as of the object's
// generation; meta.SetStatusCondition keeps the transition time when the status is unchanged.
func SetCondition(conds *[]metav1.Condition, generation int64, typ string, ok bool, reason, msg string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation})
}
