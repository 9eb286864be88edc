package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderNetworkSpec says which NIC of each node carries a physical (underlay) network. On
// every node it selects, kovn-daemon creates the OVS bridge br-<name>, moves the NIC into it
// with its addresses and routes (the node keeps its connectivity), and maps the network name to
// the bridge for ovn-controller (ovn-bridge-mappings). Removing the ProviderNetwork, or
// excluding a node, moves the addresses and routes back onto the NIC and removes the bridge.
type ProviderNetworkSpec struct {
	// DefaultInterface is the NIC used on every node without a customInterfaces entry.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][-a-zA-Z0-9_.]*$`
	DefaultInterface string `json:"defaultInterface"`
	// CustomInterfaces name another NIC on some nodes (NIC names differ between server models).
	// +kubebuilder:validation:MaxItems=64
	// +optional
	CustomInterfaces []CustomInterface `json:"customInterfaces,omitempty"`
	// ExcludeNodes do not join the network; a node added here gets its NIC back.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	ExcludeNodes []string `json:"excludeNodes,omitempty"`
}

// CustomInterface is the NIC to use on the listed nodes.
type CustomInterface struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][-a-zA-Z0-9_.]*$`
	Interface string `json:"interface"`
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	Nodes []string `json:"nodes"`
}

// ProviderNetworkNodeStatus is one node's state, written by that node's kovn-daemon.
type ProviderNetworkNodeStatus struct {
	// Node the entry is about.
	Node string `json:"node"`
	// Interface is the NIC the node uses.
	Interface string `json:"interface"`
	// Bridge is the OVS bridge holding the NIC.
	// +optional
	Bridge string `json:"bridge,omitempty"`
	// Conditions: Ready (True once the NIC, its addresses and routes are on the bridge and the
	// bridge is mapped; the reason and message say what is wrong otherwise).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProviderNetworkStatus gathers the nodes' reports.
type ProviderNetworkStatus struct {
	// ReadyNodes are the nodes where the network is up (each node's daemon adds or removes
	// itself), for `kubectl get providernetworks`.
	// +listType=set
	// +optional
	ReadyNodes []string `json:"readyNodes,omitempty"`
	// NotReadyNodes are the selected nodes where it is not (the reason is in nodes[]).
	// +listType=set
	// +optional
	NotReadyNodes []string `json:"notReadyNodes,omitempty"`
	// Nodes: one entry per selected node.
	// +listType=map
	// +listMapKey=node
	// +optional
	Nodes []ProviderNetworkNodeStatus `json:"nodes,omitempty"`
}

// ProviderNetwork is a physical network reached through a NIC of each node (see the spec).
// Its name is the OVN network name of its localnet ports and names the bridge br-<name>, so
// it is at most 12 characters (Linux interface names hold 15).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 12 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="name must be a DNS label of at most 12 characters (the bridge is br-<name>)"
// +kubebuilder:printcolumn:name="Interface",type=string,JSONPath=`.spec.defaultInterface`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="NotReady",type=string,JSONPath=`.status.notReadyNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProviderNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProviderNetworkSpec   `json:"spec"`
	Status ProviderNetworkStatus `json:"status,omitempty"`
}

// InterfaceFor returns the NIC node uses for the network and whether the node takes part.
func (p *ProviderNetwork) InterfaceFor(node string) (string, bool) {
	for _, n := range p.Spec.ExcludeNodes {
		if n == node {
			return "", false
		}
	}
	for _, ci := range p.Spec.CustomInterfaces {
		for _, n := range ci.Nodes {
			if n == node {
				return ci.Interface, true
			}
		}
	}
	return p.Spec.DefaultInterface, true
}

// BridgeName is the OVS bridge of a provider network on every node.
func BridgeName(provider string) string { return "br-" + provider }

// ProviderNetworkList is a list of ProviderNetworks.
// +kubebuilder:object:root=true
type ProviderNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProviderNetwork `json:"items"`
}

// VlanSpec is a VLAN of a provider network. Subnets name it in spec.vlan.
type VlanSpec struct {
	// ID is the 802.1Q VLAN ID; 0 means untagged frames.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4094
	ID int32 `json:"id"`
	// Provider names the ProviderNetwork carrying the VLAN.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=12
	Provider string `json:"provider"`
}

// VlanStatus reports whether the provider exists and which subnets use the VLAN.
type VlanStatus struct {
	// Subnets on this VLAN.
	// +listType=set
	// +optional
	Subnets []string `json:"subnets,omitempty"`
	// Conditions: Ready (the ProviderNetwork exists).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Vlan is an 802.1Q VLAN on a ProviderNetwork. A Subnet on it becomes a logical switch with a
// localnet port tagged with the ID: its pods sit directly on the physical network, and the
// subnet's gateway is the physical router's address there.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:printcolumn:name="ID",type=integer,JSONPath=`.spec.id`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Subnets",type=string,JSONPath=`.status.subnets`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type Vlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VlanSpec   `json:"spec"`
	Status VlanStatus `json:"status,omitempty"`
}

// VlanList is a list of Vlans.
// +kubebuilder:object:root=true
type VlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Vlan `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProviderNetwork{}, &ProviderNetworkList{}, &Vlan{}, &VlanList{})
}
