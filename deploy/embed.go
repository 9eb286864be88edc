// Package deploy embeds the manifests for real clusters, so the rig gives kovn's components
// exactly the identities, RBAC and policies a real installation gets, from the same files.
package deploy

import "embed"

// FS holds the manifests under deploy/ (the CRDs are in package crds).
//
//go:embed kovn.yaml rbac/controller/role.yaml rbac/daemon/role.yaml rbac/speaker/role.yaml policy/*.yaml
var FS embed.FS

// AccessFiles are the manifests that define who kovn's components are and what they may do,
// in apply order: the ClusterRoles, then kovn.yaml (ServiceAccounts, bindings and workloads),
// then the policies.
var AccessFiles = []string{
	"rbac/controller/role.yaml",
	"rbac/daemon/role.yaml",
	"rbac/speaker/role.yaml",
	"kovn.yaml",
	"policy/daemon-own-node.yaml",
	"policy/daemon-own-provider-entry.yaml",
}
