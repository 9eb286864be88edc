// Package v1beta1 is the ClusterNetworkPolicy API of sigs.k8s.io/network-policy-api v0.3.0
// (group policy.networking.k8s.io), the kinds kovn-controller reads. Its module needs a newer
// Kubernetes library set than kovn's, so kovn carries the Go types of the fields it uses; the
// CRD is upstream's own manifest (make generate copies it from the module hack/cnp-conformance
// pins) with one change: the CEL rule on each networks CIDR, which Kubernetes 1.31 refuses as
// over its cost budget, is dropped (kovn-controller checks those CIDRs).
// +kubebuilder:object:generate=true
// +kubebuilder:skip
// +groupName=policy.networking.k8s.io
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of ClusterNetworkPolicy.
	GroupVersion = schema.GroupVersion{Group: "policy.networking.k8s.io", Version: "v1beta1"}

	// SchemeBuilder registers ClusterNetworkPolicy with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds ClusterNetworkPolicy to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
