// Package hostnet is kovn's one house for host networking on a node: network namespaces,
// netlink dumps that survive a concurrent change, sysctls, ethtool, waiting for links,
// neighbour announcements and the firewall (iptables through go-iptables). It is a leaf:
// it imports nothing of kovn, so the CNI server, the node agent, the underlay and the BGP
// speaker can all use it without importing each other. Its errors are its own; callers
// that speak a protocol (the CNI) map them to that protocol's codes.
package hostnet
