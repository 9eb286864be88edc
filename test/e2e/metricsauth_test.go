package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// Ports the chart's components serve metrics on (deploy/values.yaml), on the node's host
// network: kovn-daemon's and kovn-speaker's on every node, kovn-controller's where it runs.
const (
	chartDaemonMetricsPort  = 9474
	chartSpeakerMetricsPort = 9472
)

// metricsTokenFile is a file holding a token of a ServiceAccount bound to the chart's
// kovn-metrics-reader, as a Prometheus would hold one; made once per cluster and test.
func (c *cluster) metricsTokenFile(t *testing.T) string {
	t.Helper()
	if c.metricsToken != "" {
		return c.metricsToken
	}
	if out, err := c.apply(`apiVersion: v1
kind: ServiceAccount
metadata: {name: kovn-e2e-metrics, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kovn-e2e-metrics}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kovn-metrics-reader}
subjects: [{kind: ServiceAccount, name: kovn-e2e-metrics, namespace: kube-system}]
`); err != nil {
		t.Fatalf("metrics reader: %v %s", err, out)
	}
	// The binding takes effect once the apiserver's RBAC cache has it; a scrape before that
	// is refused (and the refusal kept DenyCacheTTL).
	if err := eventually(30*time.Second, func() error {
		out, _ := c.kubectl("auth", "can-i", "get", "/metrics", "--as=system:serviceaccount:kube-system:kovn-e2e-metrics")
		if strings.TrimSpace(out) != "yes" {
			return fmt.Errorf("kovn-e2e-metrics may not get /metrics yet: %s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.metricsToken = c.tokenFile(t, "kube-system", "kovn-e2e-metrics")
	return c.metricsToken
}

// tokenFile writes a fresh token of ServiceAccount ns/sa to a file in the rig's directory:
// it outlives the subtest that made it (metricsTokenFile keeps it for the whole test).
func (c *cluster) tokenFile(t *testing.T, ns, sa string) string {
	t.Helper()
	token := strings.TrimSpace(c.kubectlOK("-n", ns, "create", "token", sa, "--duration=1h"))
	dir := filepath.Join(c.st.Config.Dir, "e2e-tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, c.info.Name+"-"+ns+"-"+sa+".token")
	if err := os.WriteFile(f, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// chartMetrics reads the metrics a chart component serves on port of node netns ns (its
// loopback: the components run on the host network) with the reader's token.
func (c *cluster) chartMetrics(t *testing.T, ns string, port int) (string, error) {
	t.Helper()
	return nsTestbox(c.st.Config, ns, "get", "-token-file", c.metricsTokenFile(t), fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
}

// componentMetrics reads a kovn component's metrics on port of node netns ns: the chart's
// with the reader's token over TLS, the process lab's (plain, on the node's loopback) as they are.
func (c *cluster) componentMetrics(t *testing.T, ns string, port int) (string, error) {
	t.Helper()
	if c.st.Config.Chart() {
		return c.chartMetrics(t, ns, port)
	}
	return nsTestbox(c.st.Config, ns, "get", fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
}

// metricsNeedToken: the chart's kovn-daemon and kovn-controller serve metrics over TLS only,
// and only to a token whose user may get /metrics: no token and a token of a user without that
// right (a namespace's default ServiceAccount, what a tenant's pod holds) are refused, plain
// HTTP gets no metrics, the reader gets them.
func metricsNeedToken(t *testing.T, c *cluster, controllerNS string, controllerPort int) {
	cfg := c.st.Config
	tenant := c.tokenFile(t, "default", "default")
	pinger := strings.TrimSpace(c.kubectlOK("-n", "kube-system", "get", "pods", "-l", "app=kovn-pinger", "--field-selector",
		"spec.nodeName="+rig.NodeName(1, 1), "-o", "jsonpath={.items[0].status.podIP}"))
	for _, s := range []struct {
		what, ns, url string
	}{
		{"kovn-daemon", cfg.NodeNS(1, 1), fmt.Sprintf("https://127.0.0.1:%d/metrics", chartDaemonMetricsPort)},
		{"kovn-controller", controllerNS, fmt.Sprintf("https://127.0.0.1:%d/metrics", controllerPort)},
		{"kovn-pinger", cfg.NodeNS(1, 1), "https://" + net.JoinHostPort(pinger, "9476") + "/metrics"},
	} {
		url := s.url
		for _, tc := range []struct {
			who  string
			args []string
			want string
		}{
			{"no token", nil, "status 401"},
			{"the default ServiceAccount's token", []string{"-token-file", tenant}, "status 403"},
			{"the reader's token", []string{"-token-file", c.metricsTokenFile(t)}, "status 200"},
		} {
			out, _ := nsTestbox(cfg, s.ns, append(append([]string{"get", "-status"}, tc.args...), url)...)
			if first, _, _ := strings.Cut(out, "\n"); first != tc.want {
				t.Errorf("%s's metrics with %s: %q, want %s", s.what, tc.who, firstLines(out, 2), tc.want)
			} else if tc.want == "status 200" && !strings.Contains(out, "\nkovn_") {
				t.Errorf("%s's metrics for the reader hold no kovn_ series: %s", s.what, firstLines(out, 3))
			}
		}
		if out, _ := nsTestbox(cfg, s.ns, "get", "-status", strings.Replace(url, "https:", "http:", 1)); strings.Contains(out, "kovn_") {
			t.Errorf("%s served metrics over plain HTTP: %s", s.what, firstLines(out, 2))
		}
	}
	// kovn-ovn-monitor has no identity to review tokens with: it listens on its node's loopback
	// only (kubectl kovn reads it through pods/exec), so another node (or a pod) gets nothing.
	central := hostPort(cfg.NodeIPs(1, 1)[0].String(), 9478)
	if out, err := nsTestbox(cfg, cfg.NodeNS(1, 2), "get", "-status", "http://"+central+"/metrics"); err == nil || strings.Contains(out, "kovn_") {
		t.Errorf("kovn-ovn-monitor answered at %s from another node: %v %s", central, err, firstLines(out, 2))
	}
	if out, err := nsTestbox(cfg, cfg.NodeNS(1, 1), "get", "http://127.0.0.1:9478/metrics"); err != nil || !strings.Contains(out, "kovn_ovn_db_up") {
		t.Errorf("kovn-ovn-monitor on its node's loopback: %v %s", err, firstLines(out, 2))
	}
	t.Logf("kovn-daemon, kovn-controller and kovn-pinger: 401 without a token, 403 to the default ServiceAccount, metrics to kovn-metrics-reader, none over plain HTTP; kovn-ovn-monitor on its node's loopback only")
}
