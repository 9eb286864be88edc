// Package bgp will hold kovn-speaker: a pure computation of the paths to advertise (pod,
// subnet and service CIDRs, cluster-wide or node-local) and a driver that keeps an embedded
// GoBGP v3 server's advertised set equal to it (level-triggered, withdrawn on delete and on
// shutdown, next hops re-derived on every pass). Not implemented yet: it arrives with the BGP
// issue, tested against FRR in the rig.
package bgp
