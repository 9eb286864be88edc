package e2e

import (
	"os"
	"strings"
	"testing"
)

// The judge of the conformance run (no lab): on an excerpt of a real run, the node-peers test
// that connected where it had to time out (a TCP probe) is a failure, the SCTP test that
// failed only at SCTP probes is not; a test that fails at a TCP probe in one subtest and at
// an SCTP probe in a later one is a failure too.
func TestCNPJudge(t *testing.T) {
	b, err := os.ReadFile("testdata/cnp-conformance-excerpt.txt")
	if err != nil {
		t.Fatal(err)
	}
	results := parseCNPOutput(string(b))
	if r := results["CNPAdminTierIngressTCP"]; !r.passed {
		t.Errorf("CNPAdminTierIngressTCP: %+v, want passed", r)
	}
	if ok, why := sctpOnlyFailure(results, "CNPAdminTierEgressNodePeers"); ok {
		t.Errorf("CNPAdminTierEgressNodePeers judged an SCTP-only failure (%s)", why)
	}
	if ok, why := sctpOnlyFailure(results, "CNPAdminTierIngressSCTP"); !ok {
		t.Errorf("CNPAdminTierIngressSCTP: %s", why)
	}
	mixed := strings.Join([]string{
		"=== RUN   TestClusterNetworkPolicyConformance/CNPAdminTierGress",
		"=== RUN   TestClusterNetworkPolicyConformance/CNPAdminTierGress/first",
		"    helper.go:71: FAILED Command was [/agnhost connect --timeout=1s --protocol=tcp 10.16.0.5:80]",
		"=== RUN   TestClusterNetworkPolicyConformance/CNPAdminTierGress/second",
		"    helper.go:71: FAILED Command was [/agnhost connect --timeout=1s --protocol=sctp 10.16.0.5:9003]",
		"=== NAME  TestClusterNetworkPolicyConformance/CNPAdminTierGress",
		"    --- FAIL: TestClusterNetworkPolicyConformance/CNPAdminTierGress (20.00s)",
		"        --- FAIL: TestClusterNetworkPolicyConformance/CNPAdminTierGress/first (10.00s)",
		"        --- FAIL: TestClusterNetworkPolicyConformance/CNPAdminTierGress/second (10.00s)",
	}, "\n")
	if ok, _ := sctpOnlyFailure(parseCNPOutput(mixed), "CNPAdminTierGress"); ok {
		t.Error("a TCP probe's failure before an SCTP one judged an SCTP-only failure")
	}
}
