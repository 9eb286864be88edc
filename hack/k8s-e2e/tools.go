//go:build tools

// The commands built beside e2e.test (hack/install-deps.sh): the ginkgo CLI that runs it in
// parallel, and the binaries of the upstream test images kovn writes locally (agnhost,
// regression-issue-74839). Imported here so go.mod pins them with the suite.
package k8se2e

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/regression-issue-74839"
)
