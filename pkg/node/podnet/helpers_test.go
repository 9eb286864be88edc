package podnet

import "github.com/kovn/kovn/pkg/node/nodetest"

// subnet is the node side's shared test fixture.
var subnet = nodetest.Subnet
