// Package v1beta1 is the MultiNetworkPolicy API of the Network Plumbing Working Group's
// multi-network policy specification (group k8s.cni.cncf.io), as its reference implementation
// (k8snetworkplumbingwg/multi-networkpolicy) installs it: a NetworkPolicy's spec that applies
// to the attachment networks its annotation k8s.v1.cni.cncf.io/policy-for names, never to
// eth0. kovn serves the same CRD so policies written for it work unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=k8s.cni.cncf.io
package v1beta1

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the NPWG group and this version.
	GroupVersion = schema.GroupVersion{Group: "k8s.cni.cncf.io", Version: "v1beta1"}
	// SchemeBuilder registers MultiNetworkPolicy with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// PolicyForAnnotation names the networks a MultiNetworkPolicy applies to: comma-separated
// NetworkAttachmentDefinitions, "name" (the policy's namespace) or "namespace/name".
const PolicyForAnnotation = "k8s.v1.cni.cncf.io/policy-for"

// MultiNetworkPolicy is a NetworkPolicy for attachment networks: its podSelector picks pods of
// its namespace, and its rules admit peers by their addresses on the same networks.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=multi-networkpolicies,shortName=multi-policy,scope=Namespaced
// +kubebuilder:storageversion
type MultiNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec networkingv1.NetworkPolicySpec `json:"spec,omitempty"`
}

// MultiNetworkPolicyList is a list of MultiNetworkPolicies.
//
// +kubebuilder:object:root=true
type MultiNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MultiNetworkPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MultiNetworkPolicy{}, &MultiNetworkPolicyList{})
}
