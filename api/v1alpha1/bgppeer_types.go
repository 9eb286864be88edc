package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BgpPeerSpec is one BGP neighbour (a ToR router, usually) and how the selected nodes'
// kovn-speakers peer with it. Each session carries the address family of peerAddress.
type BgpPeerSpec struct {
	// PeerAddress is the neighbour's IPv4 or IPv6 address.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="peerAddress must be an IP address"
	PeerAddress string `json:"peerAddress"`
	// PeerASN is the neighbour's autonomous system.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	PeerASN int64 `json:"peerASN"`
	// LocalASN is the autonomous system the speakers use toward this neighbour. Different
	// BgpPeers (with different nodeSelectors) may give different nodes different ASNs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	LocalASN int64 `json:"localASN"`
	// RouterID is the BGP identifier the selected speakers use; empty means each node's own
	// IPv4 address (on an IPv6-only node, a stable number derived from its name). Set it only
	// with a nodeSelector that picks a single node.
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="routerID must be in IPv4 form"
	// +optional
	RouterID string `json:"routerID,omitempty"`
	// NodeSelector picks the nodes whose speakers peer with this neighbour; empty means every
	// node that runs kovn-speaker.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Port is the neighbour's BGP port.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:default=179
	// +optional
	Port int32 `json:"port,omitempty"`
	// HoldTimeSeconds: the session is declared down after this long without a message from
	// the neighbour (which takes the node's routes away). 0 keeps BGP's 90 s.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=65535
	// +optional
	HoldTimeSeconds int32 `json:"holdTimeSeconds,omitempty"`
	// KeepaliveSeconds between messages; 0 means a third of the hold time.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=21845
	// +optional
	KeepaliveSeconds int32 `json:"keepaliveSeconds,omitempty"`
	// PasswordSecretRef names a Secret in namespace kovn-bgp holding the TCP MD5 password (the
	// speakers may read the Secrets of that namespace only).
	// +optional
	PasswordSecretRef *SecretKeyRef `json:"passwordSecretRef,omitempty"`
	// EBGPMultihopTTL, when set, lets the session cross that many hops (eBGP multihop).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=255
	// +optional
	EBGPMultihopTTL int32 `json:"ebgpMultihopTTL,omitempty"`
	// Passive: the speakers wait for the neighbour to connect instead of connecting.
	// +optional
	Passive bool `json:"passive,omitempty"`
	// GracefulRestart lets the neighbour keep forwarding to a node's routes while its speaker
	// restarts (RFC 4724).
	// +optional
	GracefulRestart *GracefulRestart `json:"gracefulRestart,omitempty"`
	// MaxPrefixes bounds what the neighbour may send over each session. The speakers import
	// nothing, but keep what is received until it is rejected, so a router that leaks a full
	// table would cost each node's memory. Everything received counts, including the
	// cluster's own routes when the router sends them back (rejected as a loop). Beyond it,
	// the session is closed and held down until this BgpPeer changes or the speaker restarts;
	// the node's status entry gets a PrefixLimitReached condition.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=10000
	// +optional
	MaxPrefixes int32 `json:"maxPrefixes,omitempty"`
}

// SecretKeyRef is a key of a Secret in namespace kovn-bgp.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:default=password
	// +optional
	Key string `json:"key,omitempty"`
}

// GracefulRestart settings of a BgpPeer.
type GracefulRestart struct {
	// Enabled turns graceful restart on for the sessions.
	Enabled bool `json:"enabled"`
	// RestartTimeSeconds is how long the neighbour keeps a restarting speaker's routes.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4095
	// +kubebuilder:default=120
	// +optional
	RestartTimeSeconds int32 `json:"restartTimeSeconds,omitempty"`
}

// BgpSessionState is a BGP session's finite-state-machine state.
type BgpSessionState string

const (
	BgpStateIdle        BgpSessionState = "Idle"
	BgpStateConnect     BgpSessionState = "Connect"
	BgpStateActive      BgpSessionState = "Active"
	BgpStateOpenSent    BgpSessionState = "OpenSent"
	BgpStateOpenConfirm BgpSessionState = "OpenConfirm"
	BgpStateEstablished BgpSessionState = "Established"
)

// BgpPeerNodeStatus is one node's session with the neighbour, written by that node's speaker.
type BgpPeerNodeStatus struct {
	// Node whose speaker holds the session.
	Node string `json:"node"`
	// State of the session.
	State BgpSessionState `json:"state"`
	// LocalAddress the session runs from: the next hop the neighbour gets for this node.
	// +optional
	LocalAddress string `json:"localAddress,omitempty"`
	// EstablishedSince is when the session last reached Established.
	// +optional
	EstablishedSince *metav1.Time `json:"establishedSince,omitempty"`
	// PrefixesSent and PrefixesReceived over the session.
	// +optional
	PrefixesSent int32 `json:"prefixesSent,omitempty"`
	// +optional
	PrefixesReceived int32 `json:"prefixesReceived,omitempty"`
	// LastError is why the session last failed or is not up (configuration, NOTIFICATION
	// received, connection error); empty when none.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// Conditions: Established (True while the session is up; the reason names the state),
	// and PrefixLimitReached (True while the session is held down because the neighbour sent
	// more than maxPrefixes; absent otherwise).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BgpPeerStatus is each selected node's session, one entry per node.
type BgpPeerStatus struct {
	// EstablishedNodes are the nodes whose session is up (each speaker adds or removes its own
	// node), for `kubectl get bgppeers`.
	// +listType=set
	// +optional
	EstablishedNodes []string `json:"establishedNodes,omitempty"`
	// Nodes: one entry per node whose speaker is selected, written by that speaker.
	// +listType=map
	// +listMapKey=node
	// +optional
	Nodes []BgpPeerNodeStatus `json:"nodes,omitempty"`
}

// BgpPeer is a BGP neighbour of the cluster's kovn-speakers: they announce to it the
// addresses of subnets, pods and Services marked for BGP (see Subnet spec.bgpAdvertise).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.peerAddress`
// +kubebuilder:printcolumn:name="PeerASN",type=integer,JSONPath=`.spec.peerASN`
// +kubebuilder:printcolumn:name="LocalASN",type=integer,JSONPath=`.spec.localASN`
// +kubebuilder:printcolumn:name="Established",type=string,JSONPath=`.status.establishedNodes`
// +kubebuilder:printcolumn:name="Port",type=integer,JSONPath=`.spec.port`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BgpPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BgpPeerSpec   `json:"spec"`
	Status BgpPeerStatus `json:"status,omitempty"`
}

// BgpPeerList is a list of BgpPeers.
// +kubebuilder:object:root=true
type BgpPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BgpPeer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BgpPeer{}, &BgpPeerList{})
}
