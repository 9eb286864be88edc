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
// unblocked, they clear.
func TestObserveClusterSet(t *testing.T) {
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
	lossy := func() []string {
		var out []string
		for _, c := range clusters {
			c.t = t
			out = append(out, c.lossyFromNodes(t, kinds...)...)
		}
		sort.Strings(out)
		return out
	}
	// Healthy: every remote path probed in two rounds (6 probes), none lossy.
	var last string
	if err := eventually(3*time.Minute, func() error {
		for _, path := range remote {
			src, rest, _ := strings.Cut(path, "->remote-pod/")
			target, fam, _ := strings.Cut(rest, "/")
			cl, n := nodeIndex(t, src)
			series := fmt.Sprintf(`kovn_pinger_probes_total{family="%s",kind="remote-pod",source="%s",target="%s"}`, fam, src, target)
			if last = clusters[cl-1].pingerMetricsFromNode(t, n); value(last, series) < 6 {
				return fmt.Errorf("%s: %v probes", series, value(last, series))
			}
		}
		if got := lossy(); len(got) != 0 {
			return fmt.Errorf("lossy %v", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("healthy clusterset: %v\n%s", err, last)
	}
	t.Logf("healthy: %d cross-cluster paths probed, none lossy", len(remote))

	gw1, gw2 := cfg.NodeIPs(1, 1)[0], cfg.NodeIPs(2, 1)[0]
	blockGeneve(t, cfg, 1, 1, gw2)
	blockGeneve(t, cfg, 2, 1, gw1)
	start := time.Now()
	var got []string
	err := eventually(30*time.Second, func() error {
		if got = lossy(); !slices.Equal(got, remote) {
			return fmt.Errorf("lossy %v", got)
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
		if got = lossy(); len(got) != 0 {
			return fmt.Errorf("lossy %v", got)
		}
		return nil
	}); err != nil {
		t.Errorf("unblocked, within 30 s: %v", err)
	}
	t.Logf("unblocked: clear after %.1fs", time.Since(start).Seconds())
}
