package annotation

// Labels that open NetworkPolicy and ClusterNetworkPolicy peers to the whole clusterset.
const (
	// ClusterLabel, named in a peer's namespace selector, makes the selector clusterset-wide:
	// it is evaluated over the namespaces of every cluster of the set, each seen with this
	// label set to its cluster's id (the value of its ClusterProperty cluster.clusterset.k8s.io,
	// KEP-2149, hence the key). A selector that does not name it selects in its own cluster
	// only, as it always did. The label is never read from a Namespace object: a namespace
	// cannot claim to be in another cluster.
	ClusterLabel = "cluster.clusterset.k8s.io"
	// PublishPeersLabel on a Namespace, set to PublishPeersValue, publishes its pods (name,
	// labels, the addresses kovn gave them) and its own labels to the other clusters of the set
	// for their policies. Only a cluster admin labels namespaces; a tenant with `edit` cannot.
	PublishPeersLabel = "kovn.io/clusterset-peers"
	PublishPeersValue = "publish"
)
