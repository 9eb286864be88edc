// Package v1 is the NetworkAttachmentDefinition API of the Network Plumbing Working Group's
// multi-network specification (group k8s.cni.cncf.io), as Multus installs it: kovn serves the
// same CRD so objects written for Multus work unchanged. kovn adds no field: a definition is a
// name and a CNI configuration (see pkg/netattach for how kovn reads it).
//
// +kubebuilder:object:generate=true
// +groupName=k8s.cni.cncf.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the NPWG group and version.
	GroupVersion = schema.GroupVersion{Group: "k8s.cni.cncf.io", Version: "v1"}
	// SchemeBuilder registers NetworkAttachmentDefinition with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// NetworkAttachmentDefinitionSpec is the definition's CNI configuration.
type NetworkAttachmentDefinitionSpec struct {
	// Config is a CNI configuration (one plugin, or a list) as JSON.
	// +optional
	Config string `json:"config,omitempty"`
}

// NetworkAttachmentDefinition names a network pods can attach to besides their default one.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=network-attachment-definitions,shortName=net-attach-def,scope=Namespaced
// +kubebuilder:storageversion
type NetworkAttachmentDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NetworkAttachmentDefinitionSpec `json:"spec,omitempty"`
}

// NetworkAttachmentDefinitionList is a list of NetworkAttachmentDefinitions.
//
// +kubebuilder:object:root=true
type NetworkAttachmentDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NetworkAttachmentDefinition `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NetworkAttachmentDefinition{}, &NetworkAttachmentDefinitionList{})
}
