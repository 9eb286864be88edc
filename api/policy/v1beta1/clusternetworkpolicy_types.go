package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterNetworkPolicy is a cluster admin's policy in the Admin tier (before any
// NetworkPolicy) or the Baseline tier (after them): its rules accept, deny or pass traffic of
// the pods its subject selects, in priority order (lower first).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type ClusterNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec   ClusterNetworkPolicySpec   `json:"spec"`
	Status ClusterNetworkPolicyStatus `json:"status,omitempty"`
}

// ClusterNetworkPolicyList is a list of ClusterNetworkPolicy.
// +kubebuilder:object:root=true
type ClusterNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterNetworkPolicy `json:"items"`
}

// ClusterNetworkPolicySpec is what the policy selects and its rules.
type ClusterNetworkPolicySpec struct {
	Tier     Tier                              `json:"tier"`
	Priority int32                             `json:"priority"`
	Subject  ClusterNetworkPolicySubject       `json:"subject"`
	Ingress  []ClusterNetworkPolicyIngressRule `json:"ingress,omitempty"`
	Egress   []ClusterNetworkPolicyEgressRule  `json:"egress,omitempty"`
}

// Tier is Admin or Baseline.
type Tier string

// The tiers: Admin is judged before NetworkPolicy, Baseline after it.
const (
	AdminTier    Tier = "Admin"
	BaselineTier Tier = "Baseline"
)

// ClusterNetworkPolicyStatus holds the policy's conditions.
type ClusterNetworkPolicyStatus struct {
	Conditions []metav1.Condition `json:"conditions"`
}

// ClusterNetworkPolicySubject selects pods: every pod of the namespaces selected, or the pods
// a namespace and pod selector pair selects. Exactly one is set.
type ClusterNetworkPolicySubject struct {
	Namespaces *metav1.LabelSelector `json:"namespaces,omitempty"`
	Pods       *NamespacedPod        `json:"pods,omitempty"`
}

// ClusterNetworkPolicyIngressRule is one ingress rule: traffic from any of From to the
// subject, on any of Protocols (every protocol and port when empty).
type ClusterNetworkPolicyIngressRule struct {
	Name      string                            `json:"name,omitempty"`
	Action    ClusterNetworkPolicyRuleAction    `json:"action"`
	From      []ClusterNetworkPolicyIngressPeer `json:"from"`
	Protocols []ClusterNetworkPolicyProtocol    `json:"protocols,omitempty"`
}

// ClusterNetworkPolicyEgressRule is one egress rule: traffic from the subject to any of To.
type ClusterNetworkPolicyEgressRule struct {
	Name      string                           `json:"name,omitempty"`
	Action    ClusterNetworkPolicyRuleAction   `json:"action"`
	To        []ClusterNetworkPolicyEgressPeer `json:"to"`
	Protocols []ClusterNetworkPolicyProtocol   `json:"protocols,omitempty"`
}

// ClusterNetworkPolicyRuleAction is Accept, Deny or Pass.
type ClusterNetworkPolicyRuleAction string

// The actions: Pass skips the rest of the tier (to NetworkPolicy from Admin, to the default
// from Baseline).
const (
	ClusterNetworkPolicyRuleActionAccept ClusterNetworkPolicyRuleAction = "Accept"
	ClusterNetworkPolicyRuleActionDeny   ClusterNetworkPolicyRuleAction = "Deny"
	ClusterNetworkPolicyRuleActionPass   ClusterNetworkPolicyRuleAction = "Pass"
)

// ClusterNetworkPolicyIngressPeer is pods, by namespaces or by namespace and pod selectors.
type ClusterNetworkPolicyIngressPeer struct {
	Namespaces *metav1.LabelSelector `json:"namespaces,omitempty"`
	Pods       *NamespacedPod        `json:"pods,omitempty"`
}

// ClusterNetworkPolicyEgressPeer is pods, nodes (by node labels), CIDRs or domain names.
type ClusterNetworkPolicyEgressPeer struct {
	Namespaces  *metav1.LabelSelector `json:"namespaces,omitempty"`
	Pods        *NamespacedPod        `json:"pods,omitempty"`
	Nodes       *metav1.LabelSelector `json:"nodes,omitempty"`
	Networks    []CIDR                `json:"networks,omitempty"`
	DomainNames []DomainName          `json:"domainNames,omitempty"`
}

// NamespacedPod selects pods by their namespace's labels and their own.
type NamespacedPod struct {
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
	PodSelector       metav1.LabelSelector `json:"podSelector"`
}

// ClusterNetworkPolicyProtocol is one protocol with an optional destination port, or a
// destination named port. Exactly one field is set.
type ClusterNetworkPolicyProtocol struct {
	TCP                  *ClusterNetworkPolicyProtocolTCP  `json:"tcp,omitempty"`
	UDP                  *ClusterNetworkPolicyProtocolUDP  `json:"udp,omitempty"`
	SCTP                 *ClusterNetworkPolicyProtocolSCTP `json:"sctp,omitempty"`
	DestinationNamedPort string                            `json:"destinationNamedPort,omitempty"`
}

// ClusterNetworkPolicyProtocolTCP is TCP to a port (every port when nil).
type ClusterNetworkPolicyProtocolTCP struct {
	DestinationPort *Port `json:"destinationPort,omitempty"`
}

// ClusterNetworkPolicyProtocolUDP is UDP to a port (every port when nil).
type ClusterNetworkPolicyProtocolUDP struct {
	DestinationPort *Port `json:"destinationPort,omitempty"`
}

// ClusterNetworkPolicyProtocolSCTP is SCTP to a port (every port when nil).
type ClusterNetworkPolicyProtocolSCTP struct {
	DestinationPort *Port `json:"destinationPort,omitempty"`
}

// Port is a port number or an inclusive range.
type Port struct {
	Number int32      `json:"number,omitempty"`
	Range  *PortRange `json:"range,omitempty"`
}

// PortRange is Start..End, both included.
type PortRange struct {
	Start int32 `json:"start"`
	End   int32 `json:"end"`
}

// CIDR is a masked CIDR of either family.
type CIDR string

// DomainName is a DNS name, possibly with a leading wildcard label.
type DomainName string

func init() {
	SchemeBuilder.Register(&ClusterNetworkPolicy{}, &ClusterNetworkPolicyList{})
}
