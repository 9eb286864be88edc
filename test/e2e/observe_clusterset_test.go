package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// TestObserveClusterSet: kovn-pinger across two clusters installed from the chart (each an
// AZ of the rig's clusterset, c1-n1 and c2-n1 their interconnect gateways). Every pinger
// probes the other cluster's pingers, found through the clusterset.local name of their
// exported headless Service; geneve blocked between the two gateways makes exactly those
// cross-cluster paths lossy (from every node of both clusters) and no path inside a cluster;
// unblocked, they clear. The pinger does all this with its chart RBAC, which grants nothing more
// than it uses (pingerRBAC).
func TestObserveClusterSet(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 2, 2)
	cfg.Kovn, cfg.Install, cfg.Pinger = true, rig.InstallChart, true
	r := upRig(t, cfg)
	clusters := []*cluster{newCluster(t, r, "c1"), newCluster(t, r, "c2")}
	for _, c := range clusters {
		c.kubectlOK("-n", "kube-system", "rollout", "status", "daemonset/kovn-pinger", "--timeout=3m")
	}
	// Every remote path: from each node of one cluster to each pinger address of the other.
	var remote []string
	for i, c := range clusters {
		other := clusters[1-i]
		addrs := strings.Fields(other.kubectlOK("-n", "kube-system", "get", "pods", "-l", "app=kovn-pinger",
			"-o", `jsonpath={range .items[*]}{range .status.podIPs[*]}{.ip}{" "}{end}{end}`))
		for n := 1; n <= cfg.Nodes; n++ {
			for _, a := range addrs {
				fam := "ipv4"
				if strings.Contains(a, ":") {
					fam = "ipv6"
				}
				remote = append(remote, fmt.Sprintf("%s-n%d->remote-pod/%s/%s", c.info.Name, n, a, fam))
			}
		}
	}
	sort.Strings(remote)
	kinds := []string{"node", "pod", "external", "remote-pod"}
	lossy := func() ([]string, error) {
		var out []string
		for _, c := range clusters {
			c.t = t
			got, err := c.lossyFromNodes(t, kinds...)
			if err != nil {
				return nil, err
			}
			out = append(out, got...)
		}
		sort.Strings(out)
		return out, nil
	}
	// Healthy: every remote path probed in two rounds (6 probes), none lossy.
	var last string
	if err := eventually(3*time.Minute, func() error {
		for _, path := range remote {
			src, rest, _ := strings.Cut(path, "->remote-pod/")
			target, fam, _ := strings.Cut(rest, "/")
			cl, n := nodeIndex(t, src)
			series := fmt.Sprintf(`kovn_pinger_probes_total{family="%s",kind="remote-pod",source="%s",target="%s"}`, fam, src, target)
			var err error
			if last, err = clusters[cl-1].pingerMetricsFromNode(t, n); err != nil {
				return err
			}
			if value(last, series) < 6 {
				return fmt.Errorf("%s: %v probes", series, value(last, series))
			}
		}
		if got, err := lossy(); err != nil || len(got) != 0 {
			return fmt.Errorf("lossy %v (%v)", got, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("healthy clusterset: %v\n%s", err, last)
	}
	t.Logf("healthy: %d cross-cluster paths probed, none lossy", len(remote))
	pingerRBAC(t, clusters[0])

	gw1, gw2 := cfg.NodeIPs(1, 1)[0], cfg.NodeIPs(2, 1)[0]
	blockGeneve(t, cfg, 1, 1, gw2)
	blockGeneve(t, cfg, 2, 1, gw1)
	start := time.Now()
	var got []string
	err := eventually(30*time.Second, func() error {
		var err error
		if got, err = lossy(); err != nil || !slices.Equal(got, remote) {
			return fmt.Errorf("lossy %v (%v)", got, err)
		}
		return nil
	})
	t.Logf("geneve blocked between c1-n1 and c2-n1: lossy after %.1fs: %v", time.Since(start).Seconds(), got)
	if err != nil {
		t.Errorf("within 30 s: %v, want exactly %v", err, remote)
	}
	out, _, _ := clusters[0].kubectlKovn("status")
	if !strings.Contains(out, "->remote-pod/") || !strings.Contains(out, "LOSSY PATH") {
		t.Errorf("kubectl kovn status on c1 names no lossy cross-cluster path:\n%s", out)
	} else {
		t.Logf("kubectl kovn status on c1:\n%s", out)
	}

	unblockGeneve(t, cfg, 1, 1, gw2)
	unblockGeneve(t, cfg, 2, 1, gw1)
	start = time.Now()
	if err := eventually(30*time.Second, func() error {
		var err error
		if got, err = lossy(); err != nil || len(got) != 0 {
			return fmt.Errorf("lossy %v (%v)", got, err)
		}
		return nil
	}); err != nil {
		t.Errorf("unblocked, within 30 s: %v", err)
	}
	t.Logf("unblocked: clear after %.1fs", time.Since(start).Seconds())
}

// pingerRBAC: the pinger's ServiceAccount may do what it does (list and watch nodes and its
// namespace's pods, create its ServiceExport: the healthy clusterset shows it did) and nothing
// beside it, as the API server answers for it.
func pingerRBAC(t *testing.T, c *cluster) {
	sa := "--as=system:serviceaccount:kube-system:kovn-pinger"
	for _, check := range []struct {
		verb, resource, ns string
		allowed            bool
	}{
		{"list", "nodes", "", true}, {"watch", "nodes", "", true},
		{"list", "pods", "kube-system", true}, {"watch", "pods", "kube-system", true},
		{"create", "serviceexports.multicluster.x-k8s.io", "kube-system", true},
		{"get", "nodes", "", false}, {"patch", "nodes", "", false},
		{"list", "pods", "default", false}, {"get", "pods", "kube-system", false}, {"create", "pods", "kube-system", false},
		{"get", "secrets", "kube-system", false}, {"list", "configmaps", "kube-system", false},
		{"delete", "serviceexports.multicluster.x-k8s.io", "kube-system", false},
		{"create", "serviceexports.multicluster.x-k8s.io", "default", false},
		{"list", "services", "kube-system", false}, {"list", "ips.kovn.io", "", false},
	} {
		args := []string{"auth", "can-i", check.verb, check.resource, sa}
		if check.ns != "" {
			args = append(args, "-n", check.ns)
		}
		out, _ := c.kubectl(args...) // exit 1 for "no"; the answer is the last line, after any warning
		lines := strings.Fields(out)
		if got := len(lines) > 0 && lines[len(lines)-1] == "yes"; got != check.allowed {
			t.Errorf("kovn-pinger %s %s in %q: %q, want allowed=%t", check.verb, check.resource, check.ns, strings.TrimSpace(out), check.allowed)
		}
	}
}
