package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPSpec records one address allocation. The controller writes it; it exists so operators can
// see who holds which address, and so IPAM can rebuild its state from the API after a restart
// (an IP object that outlives its pod, e.g. for a StatefulSet, keeps the address reserved).
//
// +kubebuilder:validation:XValidation:rule="(has(self.v4IP) && size(self.v4IP) > 0) || (has(self.v6IP) && size(self.v6IP) > 0)",message="at least one of v4IP and v6IP is required"
// +kubebuilder:validation:XValidation:rule="has(self.network) == has(self.interface)",message="network and interface go together: both for an attachment, neither for eth0"
// +kubebuilder:validation:XValidation:rule="!has(self.masquerade) || !self.masquerade || !has(self.podName) || size(self.podName) == 0",message="masquerade is a node's address, never a pod's"
type IPSpec struct {
	// PodName is the pod holding the address; for a node's ovn0 port it is empty and NodeName set.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PodName string `json:"podName,omitempty"`
	// Namespace of the pod.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Subnet the address was allocated from.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Subnet string `json:"subnet"`
	// NodeName is the node the pod runs on (or the node owning the ovn0 port).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// V4IP is the IPv4 address, if the subnet has an IPv4 CIDR.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || (isIP(self) && ip(self).family() == 4)",message="v4IP must be an IPv4 address"
	// +optional
	V4IP string `json:"v4IP,omitempty"`
	// V6IP is the IPv6 address, if the subnet has an IPv6 CIDR.
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || (isIP(self) && ip(self).family() == 6)",message="v6IP must be an IPv6 address"
	// +optional
	V6IP string `json:"v6IP,omitempty"`
	// MACAddress of the logical switch port, lower-case colon form.
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`
	// +optional
	MACAddress string `json:"macAddress,omitempty"`
	// Network is the NetworkAttachmentDefinition ("namespace/name") this address is for: one
	// of the pod's attachment networks (k8s.v1.cni.cncf.io/networks). Empty for eth0 and ovn0.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	Network string `json:"network,omitempty"`
	// Interface is that attachment's interface in the pod (net1, ...).
	// +kubebuilder:validation:MaxLength=15
	// +optional
	Interface string `json:"interface,omitempty"`
	// Delegated: a delegate CNI plugin (macvlan, ipvlan, bridge, host-device) makes the
	// interface and kovn only allocated its addresses, so it has no OVN port.
	// +optional
	Delegated bool `json:"delegated,omitempty"`
	// Masquerade: a node's masquerade address (podName empty, nodeName set), which the node
	// gives the connections it forwards into the overlay for others (NodePorts, hostPorts,
	// traffic routed to it from outside), so that pods' NetworkPolicies judge them instead of
	// admitting them as the node's own traffic. Empty for the node's own join address.
	// +optional
	Masquerade bool `json:"masquerade,omitempty"`
}

// IPStatus is the observed state of an IP.
type IPStatus struct {
	// ObservedGeneration is the metadata.generation the conditions refer to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions are reserved: kovn does not write them yet (one more write per pod would slow
	// a cold start by half). The pod's logical switch port shows in OVN as <pod>.<namespace>.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// IP is one allocated address (IPv4, IPv6 or both for dual stack) of a pod or node port.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.podName`
// +kubebuilder:printcolumn:name="V4IP",type=string,JSONPath=`.spec.v4IP`
// +kubebuilder:printcolumn:name="V6IP",type=string,JSONPath=`.spec.v6IP`
// +kubebuilder:printcolumn:name="MAC",type=string,JSONPath=`.spec.macAddress`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPSpec   `json:"spec"`
	Status IPStatus `json:"status,omitempty"`
}

// IPList is a list of IPs.
// +kubebuilder:object:root=true
type IPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IP `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IP{}, &IPList{})
}
