// Package crds embeds the CRD manifests controller-gen writes into this directory, so
// kovn-controller can install or upgrade its own CRDs at start-up.
package crds

import "embed"

// FS holds every kovn.io CRD manifest.
//
//go:embed *.yaml
var FS embed.FS
