// Package v1beta1 is the ClusterProperty API of KEP-2149 (about.k8s.io): the cluster's id in
// the clusterset. Its upstream module (sigs.k8s.io/about-api) is not obtainable here, so kovn
// carries the type; the CRD is generated from it (make generate) like kovn's own.
// +kubebuilder:object:generate=true
// +groupName=about.k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of ClusterProperty.
	GroupVersion = schema.GroupVersion{Group: "about.k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers ClusterProperty with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds ClusterProperty to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
