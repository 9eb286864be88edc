// Package ovsdb holds the schemas of kovn's own OVSDB databases: OVN_ClusterSet, the MCS
// clusterset store, served by the OVN-IC southbound database's ovsdb-server (its own file,
// standalone or a raft cluster like the IC databases).
package ovsdb

import _ "embed"

// ClusterSetSchema is ovn-clusterset.ovsschema (models: pkg/ovn/model/clusterset, make generate).
//
//go:embed ovn-clusterset.ovsschema
var ClusterSetSchema []byte

// ClusterSetDB is the database's name.
const ClusterSetDB = "OVN_ClusterSet"
