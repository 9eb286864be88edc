// Package contract holds the names kovn-controller and the node side (kovn-daemon,
// kovn-speaker) agree on: the labels the controller puts on IP objects and the node side
// selects by, and the OVN logical switch port names the controller creates and the node
// writes into OVS interfaces' external_ids:iface-id. The node side imports this package,
// never the controller's, so a change to either side's internals cannot drag the other in.
package contract

// Labels on IP objects.
const (
	// LabelSubnet names the Subnet an IP object's address comes from.
	LabelSubnet = "kovn.io/subnet"
	// LabelStatefulSet names the StatefulSet whose pod keeps the IP object across restarts.
	LabelStatefulSet = "kovn.io/statefulset"
	// LabelNode lets each kovn-daemon cache only the IP objects of its own node.
	LabelNode = "kovn.io/node"
)

// PodPortName is the logical switch port (and OVS iface-id) of a pod.
func PodPortName(namespace, name string) string { return name + "." + namespace }

// AttachmentPortName is the logical switch port (and OVS iface-id) of a pod's attachment
// interface on a kovn Subnet; the pod's IP object for it has the same name.
func AttachmentPortName(namespace, name, iface string) string {
	return PodPortName(namespace, name) + "." + iface
}

// NodePortName is the join-switch port of a node's ovn0.
func NodePortName(node string) string { return "node-" + node }

// A node's masquerade address: a second join address of its ovn0 port, never configured on
// ovn0 itself, that the node's packet filter gives connections it forwards into the overlay
// for someone else (NodePorts, hostPorts, traffic routed to the node from outside). The node's
// own join address is admitted to the node's own pods (its kubelet's probes); the masquerade
// address is admitted by nothing but a NetworkPolicy that names it, so forwarded traffic is
// judged by the pod's policy instead of passing as the node. Its IP object is named
// NodeMasqIPName(node), has no pod and has spec.masquerade set.

// NodeMasqIPName is the IP object recording a node's masquerade address.
func NodeMasqIPName(node string) string { return "masq-" + node }

// Labels on Services that decide whether kovn serves a Service at all, as kube-proxy reads them.
const (
	// LabelServiceProxyName hands a Service to another service proxy (an ingress controller, a
	// mesh): whatever its value, kovn-controller programs no load balancer for it and
	// kovn-daemon no NodePort, external IP or health check node port.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// LabelHeadless marks a Service (or its endpoints) as headless: nothing to balance.
	LabelHeadless = "service.kubernetes.io/headless"
)

// ServedByKovn says whether kovn proxies a Service with these labels: it has neither label.
func ServedByKovn(labels map[string]string) bool {
	_, other := labels[LabelServiceProxyName]
	_, headless := labels[LabelHeadless]
	return !other && !headless
}
