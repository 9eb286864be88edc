package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// TestInterconnect: two clusters of two nodes, each joined to the clusterset by an
// InterConnect (both its nodes gateways). Pods reach pods of the other cluster in every
// family the rig carries, by ping and HTTP, and the server sees the client's pod address (no
// NAT); each cluster learns exactly the other's pod subnets (the join subnet, node addresses
// and transit network never cross); one InterConnect deleted takes its cluster out: the other
// forgets its routes.
func TestInterconnect(t *testing.T) {
	cfg := rigConfig(t, 2, 2)
	cfg.Kovn = true
	r := upRig(t, cfg)
	clusters := []*cluster{newCluster(t, r, "c1"), newCluster(t, r, "c2")}
	start := time.Now()
	for i, c := range clusters {
		c.applyInterConnect(fmt.Sprintf("az%d", i+1), rig.NodeName(i+1, 1), rig.NodeName(i+1, 2))
	}
	for i, c := range clusters {
		c.waitInterConnect(func(s icStatus) error {
			if s.ready != "True" || len(s.peers) != 1 || s.active == "" {
				return fmt.Errorf("ready %q, peers %v, active %q", s.ready, s.peers, s.active)
			}
			want := prefixStrings(cfg.PodCIDRs(2 - i))
			if got := s.peerRoutes; !slices.Equal(got, want) {
				return fmt.Errorf("routes learned from the peer %v, want exactly its pod subnets %v", got, want)
			}
			return nil
		})
	}
	t.Logf("both clusters joined, each learning exactly the other's pod subnets, %.1fs after the InterConnects were created", time.Since(start).Seconds())

	a := clusters[0]
	a.createPod(testboxPod("default", "a", onNode("c1-n2")))
	pa := a.waitRunning("default", "a", 90*time.Second)
	b := clusters[1]
	b.createPod(testboxPod("default", "b", onNode("c2-n2")))
	pb := b.waitRunning("default", "b", 90*time.Second)

	t.Run("pods reach each other across clusters, no NAT", func(t *testing.T) {
		a.t, b.t = t, t
		for i := range pa.Status.PodIPs {
			aIP, bIP := pa.Status.PodIPs[i].IP, pb.Status.PodIPs[i].IP
			a.pingNewPeer("default", "a", bIP)
			b.ping("default", "b", aIP)
			for _, dir := range []struct {
				from         *cluster
				pod, to, src string
			}{{a, "a", bIP, aIP}, {b, "b", aIP, bIP}} {
				out := dir.from.mustExec("default", dir.pod, "get", "http://"+hostPort(dir.to, 8080)+"/")
				if seen := strings.TrimSuffix(hostPort(dir.src, 0), "0"); !strings.Contains(out, " "+seen) {
					t.Fatalf("HTTP %s/%s -> %s: the server saw %q, want the client's pod address %s", dir.from.info.Name, dir.pod, dir.to, out, dir.src)
				}
			}
		}
	})

	t.Run("an InterConnect deleted takes its cluster out", func(t *testing.T) {
		a.t, b.t = t, t
		deleted := time.Now()
		if out, err := b.kubectl("delete", "interconnect", "default", "--wait=true", "--timeout=30s"); err != nil {
			t.Fatalf("delete: %v %s", err, out)
		}
		a.waitInterConnect(func(s icStatus) error {
			if len(s.peers) != 0 {
				return fmt.Errorf("peers %v", s.peers)
			}
			return nil
		})
		if err := eventually(10*time.Second, func() error {
			if out := a.nbctl("--bare", "--columns=ip_prefix", "find", "Logical_Router_Static_Route", "external_ids:ic-learned-route!=\"\""); strings.TrimSpace(out) != "" {
				return fmt.Errorf("learned routes left in c1: %s", out)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		t.Logf("c2 left; c1 forgot it and its routes %.1fs after the delete", time.Since(deleted).Seconds())
		if name := strings.TrimSpace(b.nbctl("get", "NB_Global", ".", "name")); name != `""` {
			t.Errorf("c2's NB_Global name still %s", name)
		}
	})
}

func (c *cluster) applyInterConnect(az string, gateways ...string) {
	c.t.Helper()
	y := fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: InterConnect
metadata: {name: default}
spec:
  azName: %s
  icNorthbound: [%q]
  icSouthbound: [%q]
  gatewayNodes: [%s]
`, az, c.st.Config.ICNBEndpoint(), c.st.Config.ICSBEndpoint(), strings.Join(gateways, ", "))
	if out, err := c.apply(y); err != nil {
		c.t.Fatalf("apply InterConnect: %v\n%s", err, out)
	}
}

// icStatus is what `kubectl get interconnect default` reports.
type icStatus struct {
	ready, reason, message, active string
	peers, peerRoutes            []string
}

func (c *cluster) interConnectStatus() icStatus {
	c.t.Helper()
	out, _ := c.kubectl("get", "interconnect", "default", "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].reason}|`+
			`{.status.conditions[?(@.type=="Ready")].message}|{.status.activeGateways[*]}|{.status.peers[*].az}|{.status.peers[*].routes[*]}`)
	f := strings.Split(out, "|")
	for len(f) < 6 {
		f = append(f, "")
	}
	routes := strings.Fields(f[5])
	slices.Sort(routes)
	return icStatus{ready: f[0], reason: f[1], message: f[2], active: f[3], peers: strings.Fields(f[4]), peerRoutes: routes}
}

// waitInterConnect waits up to 60 s for the status to satisfy ok.
func (c *cluster) waitInterConnect(ok func(icStatus) error) {
	c.t.Helper()
	var s icStatus
	if err := eventually(60*time.Second, func() error {
		s = c.interConnectStatus()
		return ok(s)
	}); err != nil {
		out, _ := c.kubectl("get", "interconnect", "default", "-o", "yaml")
		c.t.Fatalf("%s InterConnect: %v\n%s", c.info.Name, err, out)
	}
}

func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	slices.Sort(out)
	return out
}
