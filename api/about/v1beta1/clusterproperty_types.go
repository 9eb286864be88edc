package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterIDProperty names the ClusterProperty whose value is the cluster's id in the
// clusterset (KEP-2149): unique there, and the source-cluster of everything it exports.
const ClusterIDProperty = "cluster.clusterset.k8s.io"

// ClusterPropertySpec holds the property's value.
type ClusterPropertySpec struct {
	// Value is the property's value.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128000
	Value string `json:"value"`
}

// ClusterProperty is a property of the cluster: cluster.clusterset.k8s.io is its id in the
// clusterset.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:storageversion
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=https://github.com/kubernetes/enhancements/tree/master/keps/sig-multicluster/2149-clusterid"
// +kubebuilder:printcolumn:name="Value",type=string,JSONPath=`.spec.value`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterProperty struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterPropertySpec `json:"spec"`
}

// ClusterPropertyList is a list of ClusterProperty.
// +kubebuilder:object:root=true
type ClusterPropertyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProperty `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ClusterProperty{}, &ClusterPropertyList{})
}
