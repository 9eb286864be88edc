package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
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
	Node             string `json:"node"`
	State            string `json:"state"`
	LocalAddress     string `json:"localAddress"`
	EstablishedSince string `json:"establishedSince"`
	PrefixesSent     int    `json:"prefixesSent"`
	LastError        string `json:"lastError"`
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
