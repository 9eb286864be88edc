package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RoutePolicy selects which address of a packet a static route matches.
// +kubebuilder:validation:Enum=destination;source
type RoutePolicy string

const (
	RoutePolicyDestination RoutePolicy = "destination"
	RoutePolicySource      RoutePolicy = "source"
)

// PolicyRouteAction is what a policy route does with matching packets.
// +kubebuilder:validation:Enum=allow;drop;reroute
type PolicyRouteAction string

const (
	PolicyRouteAllow   PolicyRouteAction = "allow"
	PolicyRouteDrop    PolicyRouteAction = "drop"
	PolicyRouteReroute PolicyRouteAction = "reroute"
)

// StaticRoute is an OVN Logical_Router_Static_Route on the VPC router.
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.cidr) || !isIP(self.nextHopIP) || cidr(self.cidr).ip().family() == ip(self.nextHopIP).family()",message="cidr and nextHopIP must be of the same IP family"
type StaticRoute struct {
	// CIDR is the prefix the route matches, e.g. "0.0.0.0/0".
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && string(cidr(self).masked()) == self",message="cidr must be a CIDR in canonical form"
	CIDR string `json:"cidr"`
	// NextHopIP is the address packets are forwarded to.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="nextHopIP must be an IP address"
	NextHopIP string `json:"nextHopIP"`
	// Policy matches cidr against the destination (default) or the source address.
	// +kubebuilder:default=destination
	// +optional
	Policy RoutePolicy `json:"policy,omitempty"`
}

// PolicyRoute is an OVN Logical_Router_Policy on the VPC router.
// +kubebuilder:validation:XValidation:rule="self.action != 'reroute' || (has(self.nextHopIP) && size(self.nextHopIP) > 0)",message="nextHopIP is required when action is reroute"
type PolicyRoute struct {
	// Priority orders policies; higher wins. OVN allows 0..32767.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=32767
	Priority int32 `json:"priority"`
	// Match is an OVN match expression, e.g. "ip4.src == 10.0.1.0/24".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Match string `json:"match"`
	// Action taken on matching packets.
	Action PolicyRouteAction `json:"action"`
	// NextHopIP is where reroute sends packets.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || isIP(self)",message="nextHopIP must be an IP address"
	// +optional
	NextHopIP string `json:"nextHopIP,omitempty"`
}

// VpcSpec is the desired state of a Vpc.
type VpcSpec struct {
	// Namespaces whose subnets may attach to this VPC. Empty means any.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// StaticRoutes are added to the VPC router.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	StaticRoutes []StaticRoute `json:"staticRoutes,omitempty"`

	// PolicyRoutes are added to the VPC router.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	PolicyRoutes []PolicyRoute `json:"policyRoutes,omitempty"`
}

// VpcStatus is the observed state of a Vpc.
type VpcStatus struct {
	// ObservedGeneration is the metadata.generation the conditions refer to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Router is the name of the OVN logical router realising the VPC.
	// +optional
	Router string `json:"router,omitempty"`
	// Subnets attached to the VPC router, sorted.
	// +listType=set
	// +optional
	Subnets []string `json:"subnets,omitempty"`
	// Conditions: Ready and Validated.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// Vpc is an isolated L3 domain: one OVN logical router and the subnets attached to it. Subnets
// of different VPCs may overlap. The default VPC is "ovn-cluster".
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:printcolumn:name="Router",type=string,JSONPath=`.status.router`
// +kubebuilder:printcolumn:name="Subnets",type=string,JSONPath=`.status.subnets`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Vpc struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec   VpcSpec   `json:"spec,omitempty"`
	Status VpcStatus `json:"status,omitempty"`
}

// VpcList is a list of Vpcs.
// +kubebuilder:object:root=true
type VpcList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Vpc `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Vpc{}, &VpcList{})
}
