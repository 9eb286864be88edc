//go:build tools

// Package tools pins the command-line tools kovn's Makefile builds from Go modules (helm for
// the chart; kind's config loader for test/kind), in their own module so that their
// dependencies never move kovn's own go.mod.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
