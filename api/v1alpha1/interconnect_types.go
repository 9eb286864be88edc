package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GatewayMode says how the interconnect gateways share cross-cluster traffic.
// +kubebuilder:validation:Enum=ActiveStandby;ECMP
type GatewayMode string

const (
	// GatewayActiveStandby: one gateway carries the traffic; the next by priority takes over
	// when BFD or kovn's chassis health check finds it dead.
	GatewayActiveStandby GatewayMode = "ActiveStandby"
	// GatewayECMP: every gateway carries a share of the traffic.
	GatewayECMP GatewayMode = "ECMP"
)

// BFDTimers tune the BFD sessions between the gateways and the nodes, which decide how fast
// a lost gateway is replaced. They apply to every gateway port of the cluster.
type BFDTimers struct {
	// MinRxMillis is the slowest rate, in ms, at which this end wants BFD packets.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=100
	// +optional
	MinRxMillis int32 `json:"minRxMillis,omitempty"`
	// MinTxMillis is the fastest rate, in ms, at which this end sends BFD packets.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=100
	// +optional
	MinTxMillis int32 `json:"minTxMillis,omitempty"`
	// Multiplier is how many missed packets declare the session down.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	// +kubebuilder:default=5
	// +optional
	Multiplier int32 `json:"multiplier,omitempty"`
}

// InterConnectSpec is how this cluster joins the clusterset.
// +kubebuilder:validation:XValidation:rule="size(self.gatewayNodes) > 0 || has(self.gatewaySelector)",message="name gatewayNodes or a gatewaySelector"
// +kubebuilder:validation:XValidation:rule="(has(self.insecurePlainTCP) && self.insecurePlainTCP) || (self.icNorthbound + self.icSouthbound).all(e, e.startsWith('ssl:'))",message="tcp: endpoints let anyone who reaches the IC databases rewrite the clusterset: use ssl: endpoints (with tlsSecretName), or set insecurePlainTCP"
type InterConnectSpec struct {
	// AZName is this cluster's availability zone in the clusterset; unique among its clusters.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	AZName string `json:"azName"`

	// ICNorthbound are the endpoints of the OVN-IC northbound database: tcp:IP:PORT or
	// ssl:IP:PORT, several for a raft cluster.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	// +kubebuilder:validation:items:Pattern=`^(tcp|ssl):.+:[0-9]+$`
	// +listType=atomic
	ICNorthbound []string `json:"icNorthbound"`

	// ICSouthbound are the endpoints of the OVN-IC southbound database, as ICNorthbound.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	// +kubebuilder:validation:items:Pattern=`^(tcp|ssl):.+:[0-9]+$`
	// +listType=atomic
	ICSouthbound []string `json:"icSouthbound"`

	// TLSSecretName is the Secret, in kovn's namespace (kube-system), with this AZ's clusterset
	// credentials for ssl: endpoints: tls.crt and tls.key (the AZ's certificate, issued by the
	// clusterset's CA) and ca.crt (that CA), as cert-manager writes them. kovn-controller may
	// read the default name only; another needs a Role granting it get on that Secret. A
	// missing or broken Secret is reported (CredentialsReady) and the last good credentials
	// stay in use.
	// +kubebuilder:default=kovn-clusterset-tls
	// +kubebuilder:validation:MaxLength=253
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`

	// InsecurePlainTCP allows tcp: endpoints: the IC databases then take unauthenticated,
	// unencrypted connections, and anything that reaches them can rewrite the clusterset's
	// routes and exports. For throwaway labs only.
	// +optional
	InsecurePlainTCP bool `json:"insecurePlainTCP,omitempty"`

	// GatewayNodes are the nodes that carry cross-cluster traffic, most preferred first.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	GatewayNodes []string `json:"gatewayNodes,omitempty"`

	// GatewaySelector picks the gateway nodes by label when GatewayNodes is empty; they are
	// preferred in the order of their names.
	// +optional
	GatewaySelector *metav1.LabelSelector `json:"gatewaySelector,omitempty"`

	// Mode is ActiveStandby (default) or ECMP.
	// +kubebuilder:default=ActiveStandby
	// +optional
	Mode GatewayMode `json:"mode,omitempty"`

	// AdvertiseCIDRs limits what this cluster advertises to these CIDRs (a subnet inside one is
	// advertised). Empty: every subnet of the default VPC.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	AdvertiseCIDRs []string `json:"advertiseCIDRs,omitempty"`

	// RefuseCIDRs are never advertised and never learned. The join subnet, the nodes' addresses
	// and the transit network never are in any case.
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=set
	// +optional
	RefuseCIDRs []string `json:"refuseCIDRs,omitempty"`

	// BFD tunes gateway failure detection (default 100 ms x 5).
	// +optional
	BFD *BFDTimers `json:"bfd,omitempty"`
}

// InterConnectGateway is one gateway node as programmed.
type InterConnectGateway struct {
	// Node (and OVN chassis) name.
	Node string `json:"node"`
	// Priority of the node's Gateway_Chassis; the highest live one is active.
	Priority int32 `json:"priority"`
	// Active: the gateway binding the transit port now, as OVN-IC reports it.
	// +optional
	Active bool `json:"active,omitempty"`
	// Held is set while the gateway is held at the lowest priority after a failure.
	// +optional
	Held *GatewayHold `json:"held,omitempty"`
}

// GatewayHold keeps a gateway that OVN found dead (its transit port moved to a gateway of
// lower priority) from taking the port back before it can carry traffic: a node whose link
// returns answers BFD at once, but its ovn-controller may need seconds to reconnect to the
// southbound database, and a failback in that window loses the traffic. The hold ends when
// the node's ovn-controller has caught up with a northbound change made after the failure
// (its Chassis_Private.nb_cfg reaches NbCfg); then it takes the port back as in a planned
// switchover.
type GatewayHold struct {
	// Since is when kovn saw the transit port leave this gateway.
	Since metav1.Time `json:"since"`
	// NbCfg is the NB_Global nb_cfg the node's ovn-controller must reach to be released.
	NbCfg int64 `json:"nbCfg"`
}

// InterConnectPeer is another availability zone of the clusterset.
type InterConnectPeer struct {
	// AZ is the peer's availability zone name.
	AZ string `json:"az"`
	// Gateways are the peer's gateway chassis registered in OVN-IC.
	// +listType=atomic
	// +optional
	Gateways []string `json:"gateways,omitempty"`
	// Routes are the prefixes the peer advertises, sorted.
	// +listType=atomic
	// +optional
	Routes []string `json:"routes,omitempty"`
}

// InterConnectStatus is the observed state of the cluster's interconnection.
type InterConnectStatus struct {
	// ObservedGeneration is the metadata.generation the conditions refer to.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// AZName is the availability zone name programmed (it differs from spec.azName while a
	// rename is in progress).
	// +optional
	AZName string `json:"azName,omitempty"`
	// JoinedAt is when this cluster joined the clusterset under AZName, as its join record in
	// IC-NB says (RFC 3339, nanoseconds): kept here so that a record another AZ's certificate
	// rewrote or deleted is put back as it was (its precedence in conflicts included).
	// +optional
	JoinedAt string `json:"joinedAt,omitempty"`
	// Gateways as programmed, most preferred first.
	// +listType=atomic
	// +optional
	Gateways []InterConnectGateway `json:"gateways,omitempty"`
	// ActiveGateways are the gateways carrying traffic now.
	// +listType=atomic
	// +optional
	ActiveGateways []string `json:"activeGateways,omitempty"`
	// Advertised are the prefixes this cluster advertises, sorted.
	// +listType=atomic
	// +optional
	Advertised []string `json:"advertised,omitempty"`
	// Peers are the other availability zones seen in OVN-IC, sorted by name.
	// +listType=atomic
	// +optional
	Peers []InterConnectPeer `json:"peers,omitempty"`
	// Conditions: Ready, Validated and Supported.
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// InterConnect joins this cluster to a clusterset as an OVN-IC availability zone: pods reach
// pods of the other clusters without NAT, through the gateway nodes. One per cluster, named
// "default"; every field can change at run time. Deleting it takes the cluster out.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=kovn,shortName=ic
// +kubebuilder:validation:XValidation:rule="self.metadata.name == 'default'",message="the InterConnect is a singleton named default"
// +kubebuilder:printcolumn:name="AZ",type=string,JSONPath=`.status.azName`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.activeGateways`
// +kubebuilder:printcolumn:name="Held",type=string,JSONPath=`.status.gateways[?(@.held)].node`
// +kubebuilder:printcolumn:name="Peers",type=string,JSONPath=`.status.peers[*].az`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type InterConnect struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   InterConnectSpec   `json:"spec"`
	Status InterConnectStatus `json:"status,omitempty"`
}

// InterConnectList is a list of InterConnects.
// +kubebuilder:object:root=true
type InterConnectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InterConnect `json:"items"`
}

func init() {
	SchemeBuilder.Register(&InterConnect{}, &InterConnectList{})
}
