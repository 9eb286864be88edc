package servicenat

import "github.com/kovn/kovn/pkg/node/nodetest"

// prefixes is the node side's shared test fixture.
var prefixes = nodetest.Prefixes
