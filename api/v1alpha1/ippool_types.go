package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPPoolSpec is the desired state of an IPPool.
type IPPoolSpec struct {
	// Subnet the pool's addresses belong to. Immutable: addresses handed out from the pool belong
	// to that subnet's logical switch.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="subnet is immutable"
	Subnet string `json:"subnet"`

	// IPs of the pool: single addresses, inclusive ranges "first..last" or CIDRs, all inside the
	// subnet. Pools of one subnet must not overlap (checked by the controller).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:XValidation:rule="self.all(x, isIP(x) || (isCIDR(x) && string(cidr(x).masked()) == x) || (x.contains('..') && size(x.split('..')) == 2 && isIP(x.split('..')[0]) && isIP(x.split('..')[1]) && ip(x.split('..')[0]).family() == ip(x.split('..')[1]).family()))",message="each ips entry must be an IP address, a range first..last of one family, or a canonical CIDR"
	// +listType=atomic
	IPs []string `json:"ips"`

	// Namespaces whose pods allocate from this pool by default.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`
}

// IPPoolStatus is the observed state of an IPPool. Counts saturate at 2^63-1 like SubnetStatus.
type IPPoolStatus struct {
	// ObservedGeneration is the metadata.generation the conditions and counts refer to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	V4AvailableIPs int64 `json:"v4AvailableIPs"`
	V4UsedIPs      int64 `json:"v4UsedIPs"`
	V6AvailableIPs int64 `json:"v6AvailableIPs"`
	V6UsedIPs      int64 `json:"v6UsedIPs"`

	// Conditions: Ready and Validated.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// IPPool reserves part of a subnet for particular namespaces or workloads (pod annotation
// ovn.kovn.io/ip_pool).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:printcolumn:name="Subnet",type=string,JSONPath=`.spec.subnet`
// +kubebuilder:printcolumn:name="IPs",type=string,JSONPath=`.spec.ips`
// +kubebuilder:printcolumn:name="V4Used",type=integer,JSONPath=`.status.v4UsedIPs`
// +kubebuilder:printcolumn:name="V4Available",type=integer,JSONPath=`.status.v4AvailableIPs`
// +kubebuilder:printcolumn:name="V6Used",type=integer,JSONPath=`.status.v6UsedIPs`
// +kubebuilder:printcolumn:name="V6Available",type=integer,JSONPath=`.status.v6AvailableIPs`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPPoolSpec   `json:"spec"`
	Status IPPoolStatus `json:"status,omitempty"`
}

// IPPoolList is a list of IPPools.
// +kubebuilder:object:root=true
type IPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPPool{}, &IPPoolList{})
}
