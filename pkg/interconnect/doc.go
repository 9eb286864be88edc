// Package interconnect makes each cluster an OVN-IC availability zone of a clusterset: the
// InterConnect reconciler joins the AZ (IC-NB join record, transit switches, the cluster
// router's transit port bound to gateway chassis with priorities and BFD failover), turns on
// ic-route-adv/learn with filters for what must not leak (join subnet, node addresses), reports
// conflicts (overlapping CIDRs) on the InterConnect, and leaves again on delete. The desired
// model is computed by the pure For from what the reconcile read; join.go writes it per
// database in a fixed order. ForeignAZ peers a Vpc with an OVN AZ kovn does not run (foreign*.go).
// The clusterset store MCS builds on lives in the mcs subpackage.
package interconnect
