// Package v1alpha1 holds kovn's Kubernetes API: the Vpc, Subnet, IP and IPPool custom resources
// of group kovn.io.
//
// What can be checked on one object alone (syntax of CIDRs/IPs, enums, required-if, immutable
// fields) is enforced by the apiserver through OpenAPI and CEL markers on the types, so a bad
// object is rejected at `kubectl apply`. The same checks, plus the semantic ones CEL cannot express
// in Kubernetes 1.31 (range ordering, addresses inside the CIDR, overlap between objects), are
// implemented in Go in validation*.go; the controller runs them and reports the outcome as the
// Validated condition, which also covers objects stored before a rule existed.
//
// +kubebuilder:object:generate=true
// +groupName=kovn.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "kovn.io", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
