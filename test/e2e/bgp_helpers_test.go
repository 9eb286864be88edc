package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/test/rig"
)

// applyBgpPeer applies a BgpPeer to the ToR's address from the rig's speaker AS, hold time
// 9 s; selector and extra are further spec lines (YAML, may be empty).
func (c *cluster) applyBgpPeer(name, addr, selector, extra string) {
	c.t.Helper()
	c.applyBgpPeerAS(name, addr, rig.ToRASN, selector, extra+"\n  holdTimeSeconds: 9")
}

// applyBgpPeerAS applies a BgpPeer whose neighbour AS is peerASN.
func (c *cluster) applyBgpPeerAS(name, addr string, peerASN int, selector, extra string) {
	c.t.Helper()
	y := fmt.Sprintf("apiVersion: kovn.io/v1alpha1\nkind: BgpPeer\nmetadata: {name: %s}\nspec:\n  peerAddress: %q\n  peerASN: %d\n  localASN: %d\n",
		name, addr, peerASN, rig.SpeakerASN)
	for _, l := range []string{selector, extra} {
		if l = strings.TrimSpace(l); l != "" {
			y += "  " + l + "\n"
		}
	}
	c.applyYAML(y)
}

func (c *cluster) applyYAML(y string) {
	c.t.Helper()
	if out, err := c.apply(y); err != nil {
		c.t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, y)
	}
}

func (c *cluster) kubectlOK(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl(args...)
	if err != nil {
		c.t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}

// serviceIPs are a Service's ClusterIPs.
func (c *cluster) serviceIPs(ns, name string) []netip.Addr {
	c.t.Helper()
	var out []netip.Addr
	for _, s := range strings.Fields(c.kubectlOK("get", "service", "-n", ns, name, "-o", "jsonpath={.spec.clusterIPs[*]}")) {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

type bgpNodeStatus struct {
	Node             string         `json:"node"`
	State            string         `json:"state"`
	LocalAddress     string         `json:"localAddress"`
	EstablishedSince string         `json:"establishedSince"`
	PrefixesSent     int            `json:"prefixesSent"`
	PrefixesReceived int            `json:"prefixesReceived"`
	LastError        string         `json:"lastError"`
	Conditions       []bgpCondition `json:"conditions"`
}

type bgpCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// condition is the entry's condition of that type (zero if it has none).
func (s bgpNodeStatus) condition(typ string) bgpCondition {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return bgpCondition{}
}

func (c *cluster) bgpNodes(peer string) ([]bgpNodeStatus, error) {
	out, err := c.kubectl("get", "bgppeer", peer, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("%v %s", err, out)
	}
	var obj struct {
		Status struct {
			Nodes []bgpNodeStatus `json:"nodes"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		return nil, err
	}
	return obj.Status.Nodes, nil
}

func (c *cluster) bgpNode(peer, node string) bgpNodeStatus {
	c.t.Helper()
	nodes, err := c.bgpNodes(peer)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Node == node {
			return n
		}
	}
	return bgpNodeStatus{}
}

func (c *cluster) waitBgpNode(peer, node string, ok func(bgpNodeStatus) bool) {
	c.t.Helper()
	var last bgpNodeStatus
	if err := eventually(30*time.Second, func() error {
		if last = c.bgpNode(peer, node); !ok(last) {
			return fmt.Errorf("BgpPeer %s on %s: %+v", peer, node, last)
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
}

// bgpSince is each node's establishedSince for peer.
func (c *cluster) bgpSince(peer string) map[string]string {
	c.t.Helper()
	nodes, err := c.bgpNodes(peer)
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes {
		out[n.Node] = n.EstablishedSince
	}
	return out
}

// waitBgpPeersEstablished waits until every BgpPeer reports n nodes Established.
func (c *cluster) waitBgpPeersEstablished(n int) {
	c.t.Helper()
	if err := eventually(30*time.Second, func() error {
		out, err := c.kubectl("get", "bgppeers", "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.establishedNodes[*]}{"\n"}{end}`)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			name, nodes, _ := strings.Cut(l, "=")
			if len(strings.Fields(nodes)) != n {
				return fmt.Errorf("BgpPeer %s established on %q, want %d nodes", name, nodes, n)
			}
		}
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
}

func urls(ips []corev1.PodIP, port int) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, "http://"+hostPort(ip.IP, port)+"/")
	}
	return out
}

func ipURLs(ips []netip.Addr, port int) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, "http://"+netip.AddrPortFrom(ip, uint16(port)).String()+"/")
	}
	return out
}

func podAddrs(ips []corev1.PodIP) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		out = append(out, netip.MustParseAddr(ip.IP))
	}
	return out
}

// hostRoutes are the /32 and /128 prefixes of a pod's addresses.
func hostRoutes(ips []corev1.PodIP) []string {
	var out []string
	for _, a := range podAddrs(ips) {
		out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
	}
	return out
}

// speakerMetrics scrapes the kovn-speaker of cluster 1's node n (inside its namespace).
func (c *cluster) speakerMetrics(n int) string {
	c.t.Helper()
	out, err := c.componentMetrics(c.t, c.st.Config.NodeNS(1, n), chartSpeakerMetricsPort)
	if err != nil {
		c.t.Fatalf("c1-n%d's speaker metrics: %v\n%s", n, err, out)
	}
	return out
}

// nodeRoutes are every route of every table in cluster 1's node n's namespace, both families.
func nodeRoutes(t *testing.T, cfg rig.Config, n int) string {
	t.Helper()
	var b strings.Builder
	for _, fam := range []string{"-4", "-6"} {
		out, err := exec.Command("ip", "-n", cfg.NodeNS(1, n), fam, "route", "show", "table", "all").CombinedOutput()
		if err != nil {
			t.Fatalf("ip route in c1-n%d: %v\n%s", n, err, out)
		}
		b.Write(out)
	}
	return b.String()
}

// vtyshTry runs vtysh commands whose failure is expected when there is nothing to undo.
func (r *torRouter) vtyshTry(cmds ...string) {
	argv := r.cfg.VtyshArgv(cmds...)
	_ = exec.Command(argv[0], argv[1:]...).Run()
}

// torLimitRouteMap is the ToR's outbound filter toward the speakers while the prefix-limit
// step runs: only the test prefixes go out, so a node receives exactly those (by default the
// ToR also sends each speaker the cluster's own routes, which it rejects as loops but counts).
const torLimitRouteMap = "KOVN-TEST-ONLY"

// sendOnly makes the ToR originate prefixes (IPv4) and send the speakers nothing else.
func (r *torRouter) sendOnly(prefixes ...string) {
	r.t.Helper()
	cmds := []string{"configure terminal",
		"ip prefix-list " + torLimitRouteMap + " seq 5 permit 203.0.113.0/24 le 32",
		"route-map " + torLimitRouteMap + " permit 10", "match ip address prefix-list " + torLimitRouteMap, "exit",
		fmt.Sprintf("router bgp %d", rig.ToRASN), "no bgp network import-check", "address-family ipv4 unicast",
		"neighbor KOVN route-map " + torLimitRouteMap + " out"}
	for _, p := range prefixes {
		cmds = append(cmds, "network "+p)
	}
	r.vtysh(cmds...)
}

// originate adds prefixes to what the ToR originates.
func (r *torRouter) originate(prefixes ...string) {
	r.t.Helper()
	cmds := []string{"configure terminal", fmt.Sprintf("router bgp %d", rig.ToRASN), "address-family ipv4 unicast"}
	for _, p := range prefixes {
		cmds = append(cmds, "network "+p)
	}
	r.vtysh(cmds...)
}

// sendAll undoes sendOnly: the prefixes withdrawn, the speakers sent everything again.
func (r *torRouter) sendAll(prefixes ...string) {
	r.t.Helper()
	cmds := []string{"configure terminal", fmt.Sprintf("router bgp %d", rig.ToRASN), "address-family ipv4 unicast",
		"no neighbor KOVN route-map " + torLimitRouteMap + " out"}
	for _, p := range prefixes {
		cmds = append(cmds, "no network "+p)
	}
	r.vtysh(append(cmds, "exit-address-family", "exit", "no route-map "+torLimitRouteMap,
		"no ip prefix-list "+torLimitRouteMap)...)
}
