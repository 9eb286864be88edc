// Package underlay will attach subnets to physical networks (ProviderNetwork/Vlan): bridges,
// moving a NIC with its addresses and routes onto them, and localnet ports. Not implemented
// yet: it arrives with the underlay issue.
package underlay
