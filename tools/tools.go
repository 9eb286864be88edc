//go:build tools

// Package tools pins the code generators that `make generate` runs, so their versions live in go.mod.
package tools

import (
	_ "github.com/ovn-org/libovsdb/cmd/modelgen"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
