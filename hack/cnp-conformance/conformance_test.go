// Package cnpconformance runs the ClusterNetworkPolicy conformance suite of
// sigs.k8s.io/network-policy-api (its conformance/tests and conformance/utils/suite packages, at
// the version go.mod pins) against the cluster of $KUBECONFIG, as upstream's own
// conformance_profile_test.go does: the suite's flags (-conformance-profiles,
// -supported-features, -report-output, -organization ...) are upstream's. It lives in its own
// module because the suite needs a newer Kubernetes library set than kovn's.
// hack/install-deps.sh builds it with `go test -c` as cnp-conformance.test; test/e2e's
// TestClusterNetworkPolicyConformance runs it on a lab cluster.
//
// Three flags are kovn's, for what the suite takes only through its Options: -host-network-ports,
// the range of the host-network "centaur" pods' ports; -request-timeout, how long a probe
// waits before it judges a connection blocked (every blocked probe waits it out twice); and
// -skip-tests, tests not to run (the report says skipped).
package cnpconformance

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/yaml"

	api "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/network-policy-api/conformance/tests"
	"sigs.k8s.io/network-policy-api/conformance/utils/config"
	"sigs.k8s.io/network-policy-api/conformance/utils/flags"
	"sigs.k8s.io/network-policy-api/conformance/utils/suite"
)

var (
	hostPorts      = flag.String("host-network-ports", "34345-34352", "inclusive range of the host-network pods' ports (at least 8)")
	requestTimeout = flag.Duration("request-timeout", 0, "how long a probe's connection attempt may take before it counts as blocked (0: the suite's 3 s)")
	skipTests      = flag.String("skip-tests", "", "comma-separated short names of tests not to run (the report counts them as skipped)")
)

func TestClusterNetworkPolicyConformance(t *testing.T) {
	var first, last int
	if _, err := fmt.Sscanf(*hostPorts, "%d-%d", &first, &last); err != nil || last-first+1 < 8 {
		t.Fatalf("-host-network-ports %q: want FIRST-LAST spanning at least 8 ports", *hostPorts)
	}
	cfg, err := ctrlconfig.GetConfig()
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Install(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(c.Scheme()); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	impl, err := suite.ParseImplementation(*flags.ImplementationOrganization, *flags.ImplementationProject, *flags.ImplementationURL,
		*flags.ImplementationVersion, *flags.ImplementationContact, *flags.ImplementationAdditionalInformation)
	if err != nil {
		t.Fatal(err)
	}
	s, err := suite.NewConformanceProfileTestSuite(suite.ConformanceProfileOptions{
		Options: suite.Options{
			Client: c, ClientSet: cs, KubeConfig: *cfg, Debug: *flags.ShowDebug, CleanupBaseResources: *flags.CleanupBaseResources,
			SupportedFeatures: suite.ParseSupportedFeatures(*flags.SupportedFeatures), ExemptFeatures: suite.ParseSupportedFeatures(*flags.ExemptFeatures),
			EnableAllSupportedFeatures: *flags.EnableAllSupportedFeatures,
			HostNetworkPortRangeStart:  first, HostNetworkPortRangeEnd: last,
			TimeoutConfig: config.TimeoutConfig{RequestTimeout: *requestTimeout},
			SkipTests:     splitList(*skipTests),
		},
		Implementation:      *impl,
		ConformanceProfiles: suite.ParseConformanceProfiles(*flags.ConformanceProfiles),
	})
	if err != nil {
		t.Fatalf("conformance suite: %v", err)
	}
	s.Setup(t)
	if err := s.Run(t, tests.ConformanceTests); err != nil {
		t.Fatal(err)
	}
	report, err := s.Report()
	if err != nil {
		t.Fatalf("conformance report: %v", err)
	}
	raw, err := yaml.Marshal(report)
	if err != nil {
		t.Fatal(err)
	}
	if *flags.ReportOutput != "" {
		if err := os.WriteFile(*flags.ReportOutput, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("conformance report:\n%s", raw)
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
