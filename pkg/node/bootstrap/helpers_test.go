package bootstrap

import "github.com/kovn/kovn/pkg/node/nodetest"

// The node side's shared test fixtures, by the names the tests here use.
var (
	subnet   = nodetest.Subnet
	cond     = nodetest.Cond
	prefixes = nodetest.Prefixes
)
