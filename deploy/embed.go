// Package deploy holds kovn's Helm chart (this directory is the chart) and embeds it, so the
// rig gives kovn's components exactly the identities, RBAC and policies a real installation
// gets, from the same files, and can install the chart itself.
package deploy

import "embed"

// Chart is the Helm chart: Chart.yaml, values.yaml, templates/ and the generated files the
// templates include (crds/, rbac/, policy/, dashboards/).
//
//go:embed Chart.yaml values.yaml .helmignore templates/*.yaml templates/_helpers.tpl
//go:embed crds/*.yaml rbac/controller/role.yaml rbac/daemon/role.yaml rbac/speaker/role.yaml rbac/pinger/role.yaml policy/*.yaml
//go:embed dashboards/kovn.json ovsdb/ovn-clusterset.ovsschema
var Chart embed.FS
