package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EgressIPSpec sends the traffic that selected pods start toward the outside of the cluster
// out of an external network, translated to fixed addresses.
type EgressIPSpec struct {
	// Subnet is the external network: an underlay Subnet with spec.externalGateway. Its
	// gateway nodes (spec.externalGateway.nodes, by priority) host the egress addresses: the
	// first live one translates, and OVN moves them to the next when it is lost.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Subnet string `json:"subnet"`
	// Addresses are the egress addresses wanted, at most one per family, inside the Subnet;
	// a family of the Subnet without one gets a free address. An address another owner holds
	// is refused (Ready=False, AddressInUse) and nothing is programmed for it.
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// NamespaceSelector selects the namespaces whose pods use the addresses.
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
	// PodSelector narrows the selection to the pods of those namespaces it matches; absent,
	// every pod of them.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
}

// EgressIPAddress is one egress address and the node that holds it.
type EgressIPAddress struct {
	Address string `json:"address"`
	// Node is the gateway node the address lives on now ("" while OVN has bound it to none).
	// +optional
	Node string `json:"node,omitempty"`
}

// EgressIPStatus is what is held and programmed.
type EgressIPStatus struct {
	// ObservedGeneration is the metadata.generation the status refers to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Addresses are the egress addresses this EgressIP holds (the durable record of its
	// allocation) and where each lives.
	// +listType=atomic
	// +optional
	Addresses []EgressIPAddress `json:"addresses,omitempty"`
	// Pods is the number of running pods selected (pods of a custom VPC, an underlay Subnet,
	// the host network, or with a FloatingIP of their own are not counted: they never use it).
	// +optional
	Pods int32 `json:"pods"`
	// Conditions: Ready (the translation is programmed in OVN).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EgressIP is an admin-owned egress translation: connections that the selected pods open to
// addresses outside the cluster leave through the external network with the egress addresses
// as source. Traffic to the cluster's own pods, nodes and Services, and to other clusters'
// pods learned over the interconnect, keeps the pods' own addresses.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn,shortName=eip
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.status.addresses[*].address`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.addresses[0].node`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.pods`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EgressIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressIPSpec   `json:"spec,omitempty"`
	Status EgressIPStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// EgressIPList is a list of EgressIPs.
type EgressIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EgressIP `json:"items"`
}

func init() {
	SchemeBuilder.Register(&EgressIP{}, &EgressIPList{})
}
