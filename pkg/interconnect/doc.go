// Package interconnect will make each cluster an OVN-IC availability zone: transit switches,
// the cluster router's transit port bound to gateway chassis with priorities (BFD failover),
// ic-route-adv/learn with filters for what must not leak (join subnet, node addresses) and
// conflict detection reported on the InterConnect object, plus the OVN_ClusterSet store that
// MCS builds on. Not implemented yet: it arrives with the interconnect issue. The rig already
// runs the IC-NB/IC-SB databases for rigs of two or more clusters, and pkg/ovn has their
// generated models (model/icnb, model/icsb).
package interconnect
