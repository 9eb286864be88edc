//go:build tools

// Package tools pins golangci-lint, built from its Go module by `make vet` (its own module, so
// its many dependencies never move kovn's or helm's).
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
