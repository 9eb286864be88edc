// Package underlay attaches nodes to physical networks (ProviderNetwork, Vlan): on each node
// kovn-daemon creates the OVS bridge br-<provider>, moves the provider's NIC into it together
// with the NIC's addresses and routes (so the node stays reachable on that network), and maps
// the provider name to the bridge in ovn-bridge-mappings, where ovn-controller finds it for the
// localnet ports of underlay subnets. What the NIC had is recorded in the bridge's
// external_ids, so removing the ProviderNetwork (or excluding the node) puts it back exactly,
// even after a daemon restart.
//
// desired.go is pure (which NIC for which provider on this node; the mappings string),
// bridge.go is the OVS side (libovsdb), nic_linux.go the kernel side (netlink), reconciler.go
// ties them together and writes each node's entry of the ProviderNetwork's status.
package underlay
