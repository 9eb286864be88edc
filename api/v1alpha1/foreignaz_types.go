package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ForeignAZSpec is what an admin agreed with the operators of an OVN availability zone that
// kovn does not run (an OpenStack/Neutron deployment, another team's OVN): which transit
// switch joins the two, and which prefixes cross it in each direction. Nothing else does:
// kovn advertises only AdvertiseCIDRs there, and routes to the foreign AZ only the prefixes it
// advertises inside AcceptCIDRs.
type ForeignAZSpec struct {
	// AZ is the foreign availability zone's name in OVN-IC (its NB_Global name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	AZ string `json:"az"`

	// Vpc is the Vpc whose router peers with the foreign AZ; empty: the default Vpc.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Vpc string `json:"vpc,omitempty"`

	// TransitSwitch is the OVN-IC transit switch the two AZs share, created in IC-NB if
	// missing (and never deleted: the foreign AZ may use it). It must not be one of kovn's own
	// (kovn-ts, kovn-ts1, ...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-_.A-Za-z0-9]*[A-Za-z0-9])?$`
	TransitSwitch string `json:"transitSwitch"`

	// TransitAddresses are kovn's addresses on the transit switch, with the transit network's
	// prefix length (169.254.60.1/24); the foreign router's port takes another address of
	// the same network. One per family at most.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +listType=atomic
	TransitAddresses []string `json:"transitAddresses"`

	// AdvertiseCIDRs are the local prefixes the foreign AZ may learn (each should be a subnet
	// of the Vpc, or cover some).
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	AdvertiseCIDRs []string `json:"advertiseCIDRs,omitempty"`

	// AcceptCIDRs are the foreign prefixes kovn routes to: a prefix the foreign AZ advertises
	// is learned when one of these contains it, and refused (kept out of this AZ's routes)
	// otherwise.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	AcceptCIDRs []string `json:"acceptCIDRs,omitempty"`
}

// ForeignAZStatus is what is programmed and what the foreign AZ advertises.
type ForeignAZStatus struct {
	// ObservedGeneration is the metadata.generation the conditions refer to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Router is the peering router kovn made between the Vpc's router and the transit switch.
	// +optional
	Router string `json:"router,omitempty"`
	// LinkIndex numbers the link network between the Vpc's router and the peering router
	// (169.254.99.4*i/30, fd00:a9fe:63::i:0/126); kept while the object exists.
	// +optional
	LinkIndex int32 `json:"linkIndex,omitempty"`
	// Advertised are the prefixes kovn advertises to the foreign AZ, sorted.
	// +listType=atomic
	// +optional
	Advertised []string `json:"advertised,omitempty"`
	// Learned are the foreign prefixes kovn routes to, sorted.
	// +listType=atomic
	// +optional
	Learned []string `json:"learned,omitempty"`
	// Refused are the prefixes the foreign AZ advertises outside AcceptCIDRs (or overlapping
	// this cluster's subnets), sorted: not learned, not routed to.
	// +listType=atomic
	// +optional
	Refused []string `json:"refused,omitempty"`
	// Conditions: Ready, Validated, and RoutesAgreed (False while the foreign AZ advertises
	// prefixes outside AcceptCIDRs, or an accepted CIDR has no advertised prefix in it).
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// ConditionRoutesAgreed is True when the foreign AZ advertises exactly what its ForeignAZ
// accepts.
const ConditionRoutesAgreed = "RoutesAgreed"

// Reasons of a ForeignAZ's conditions.
const (
	// ReasonRouteMismatch: RoutesAgreed=False, the message lists the prefixes.
	ReasonRouteMismatch = "RouteMismatch"
	// ReasonAgreed: RoutesAgreed=True.
	ReasonAgreed = "Agreed"
	// ReasonNotInterconnected: Ready=False, this cluster has no InterConnect.
	ReasonNotInterconnected = "NotInterconnected"
)

// ForeignAZ peers a Vpc of this cluster with an OVN availability zone that kovn does not
// manage, over an OVN-IC transit switch, exchanging only the agreed prefixes. It needs the
// cluster's InterConnect (the IC databases and gateway nodes). Deleting it removes the peering.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn,shortName=faz
// +kubebuilder:printcolumn:name="AZ",type=string,JSONPath=`.spec.az`
// +kubebuilder:printcolumn:name="Switch",type=string,JSONPath=`.spec.transitSwitch`
// +kubebuilder:printcolumn:name="Learned",type=string,JSONPath=`.status.learned`
// +kubebuilder:printcolumn:name="Refused",type=string,JSONPath=`.status.refused`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Agreed",type=string,JSONPath=`.status.conditions[?(@.type=="RoutesAgreed")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ForeignAZ struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ForeignAZSpec   `json:"spec"`
	Status ForeignAZStatus `json:"status,omitempty"`
}

// ForeignAZList is a list of ForeignAZs.
// +kubebuilder:object:root=true
type ForeignAZList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ForeignAZ `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ForeignAZ{}, &ForeignAZList{})
}
