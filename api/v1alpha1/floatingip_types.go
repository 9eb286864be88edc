package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FloatingIPSpec binds addresses of an external network to one pod.
type FloatingIPSpec struct {
	// Subnet is the external network: an underlay Subnet with spec.externalGateway.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Subnet string `json:"subnet"`
	// Addresses are the floating addresses wanted, at most one per family, inside the
	// Subnet; a family of the Subnet without one gets a free address. An address another
	// FloatingIP or a pod holds is refused (Ready=False, AddressInUse) and nothing is
	// programmed.
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// Pod is the pod the addresses lead to, by namespace and name: a pod recreated under the
	// same name (a StatefulSet's) gets them again.
	Pod FloatingIPPod `json:"pod"`
}

// FloatingIPPod names a pod.
type FloatingIPPod struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// FloatingIPStatus is what is bound and programmed.
type FloatingIPStatus struct {
	// ObservedGeneration is the metadata.generation the status refers to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Addresses are the floating addresses this FloatingIP holds (the durable record of its
	// allocation).
	// +listType=atomic
	// +optional
	Addresses []string `json:"addresses,omitempty"`
	// PodIPs are the pod addresses they translate to, in the same families.
	// +listType=atomic
	// +optional
	PodIPs []string `json:"podIPs,omitempty"`
	// Node is the pod's node.
	// +optional
	Node string `json:"node,omitempty"`
	// Distributed: the pod's node is on the external network (its ProviderNetwork is ready
	// there), so the translation is done there and the pod's traffic leaves and enters
	// through that node's own NIC; otherwise through the node hosting the Subnet's external
	// gateway.
	// +optional
	Distributed bool `json:"distributed,omitempty"`
	// Conditions: Ready (the translation is programmed in OVN).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FloatingIP is an admin-owned 1:1 translation between addresses of an external network and
// a pod: the external network reaches the pod on them, and the pod's own connections to it
// leave with them as source. Pods cannot claim one.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn,shortName=fip
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.status.addresses`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.pod.namespace`
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.pod.name`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="Distributed",type=boolean,JSONPath=`.status.distributed`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FloatingIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FloatingIPSpec   `json:"spec,omitempty"`
	Status FloatingIPStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FloatingIPList is a list of FloatingIPs.
type FloatingIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FloatingIP `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FloatingIP{}, &FloatingIPList{})
}
