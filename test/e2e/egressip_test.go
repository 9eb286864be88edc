package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// egressIP: VLAN 100's Subnet is an external network whose gateway port c1-n2 hosts (c1-n1
// next). An EgressIP selects pod egress/sel (namespace label egress=yes, pod label app=sel) on
// c1-n3, which is neither a gateway nor on the external network, so its traffic can only leave
// as the egress address through the gateway: the external host sees the egress address for
// it and c1-n3's own address (the usual masquerade) for egress/plain beside it, while the
// overlay pod still sees its pod address. c1-n2's fabric link is cut under a 100 ms probe
// stream: the address moves to c1-n1 (status and traffic), the outage is printed, and it comes
// back when the link does. With the gateway nodes chosen by label, labelling and unlabelling
// c1-n1 moves the address there and back. The namespace unlabelled, the pod leaves as before.
func (l *underlayLab) egressIP(t *testing.T) {
	c := l.c
	c.t = t
	subnet := l.makeExternal(t, 2, 1)
	defer l.dropExternal()
	c.createNamespace("egress")
	defer c.kubectlOK("delete", "namespace", "egress", "--wait=false")
	c.kubectlOK("label", "namespace", "egress", "egress=yes")
	far := rig.NodeName(1, l.badNode)
	for _, name := range []string{"sel", "plain"} {
		c.createPod(testboxPod("egress", name, onNode(far)))
	}
	sel := c.waitRunning("egress", "sel", 90*time.Second)
	c.waitRunning("egress", "plain", 90*time.Second)
	eip := l.vlanHost(210)
	c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: EgressIP
metadata: {name: out}
spec:
  subnet: %s
  addresses: [%s]
  namespaceSelector: {matchLabels: {egress: "yes"}}
  podSelector: {matchLabels: {app: sel}}
`, subnet, quoteAddrs(eip)))
	defer c.kubectlOK("delete", "egressip", "out", "--ignore-not-found")
	t.Logf("EgressIP out: %s", c.waitEIP("out", rig.NodeName(1, 2), 1))

	usual := l.cfg.ProviderIPs(1, l.badNode)
	seenAs := func(pod string, want []netip.Addr, why string) {
		t.Helper()
		for i, host := range l.cfg.UnderlayHostIPs() {
			var out string
			if err := eventually(30*time.Second, func() error {
				var err error
				out, err = c.exec("egress", pod, "get", fmt.Sprintf("http://%s/", hostPort(host.String(), 8080)))
				if src, ok := answerSource(out); err != nil || !ok || src != want[i] {
					return fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
				}
				return nil
			}); err != nil {
				t.Fatalf("%s: egress/%s -> external host %s: want seen as %s: %v", why, pod, host, want[i], err)
			}
			t.Logf("%s: egress/%s -> external host %s: seen as %s", why, pod, host, strings.TrimSpace(out))
		}
	}
	seenAs("sel", eip, "selected")
	seenAs("plain", usual, "not selected (c1-n3's own address)")
	// Inside the cluster the pod keeps its own address.
	for _, ip := range podAddrs(l.overlay.Status.PodIPs) {
		out := c.mustExec("egress", "sel", "get", fmt.Sprintf("http://%s/", hostPort(ip.String(), 8080)))
		mine := false
		for _, own := range podAddrs(sel.Status.PodIPs) {
			mine = mine || strings.Contains(out, own.String())
		}
		if !mine {
			t.Errorf("egress/sel -> overlay pod %s: seen as %q, want its pod address %v", ip, strings.TrimSpace(out), sel.Status.PodIPs)
		}
	}

	// c1-n2 loses its fabric link: OVN's BFD moves the gateway port, and the address with it.
	restored := false
	defer func() {
		if !restored {
			setFabricLink(t, l.cfg, 1, 2, true)
		}
	}()
	target := l.cfg.UnderlayHostIPs()[0].String()
	every := 100 * time.Millisecond
	var moved string
	sent, lost, outage := c.measureUntil(t, "egress", "sel", target, streamCount, every, func() { setFabricLink(t, l.cfg, 1, 2, false) },
		func() { moved = c.waitEIP("out", rig.NodeName(1, 1), 1) })
	t.Logf("c1-n2's fabric link cut: %d of %d probes (100 ms apart) lost, longest outage %s (goal < 2 s)", lost, sent, outage)
	if lost > maxCentralFailoverLoss {
		t.Errorf("egress address failover lost %d of %d probes (longest outage %s), want at most %d", lost, sent, outage, maxCentralFailoverLoss)
	}
	t.Logf("after the cut: %s", moved)
	seenAs("sel", eip, "c1-n2 cut off")
	restored = true
	sent, lost, outage = c.measureUntil(t, "egress", "sel", target, failbackCount, every, func() { setFabricLink(t, l.cfg, 1, 2, true) },
		func() { moved = c.waitEIP("out", rig.NodeName(1, 2), 1) })
	t.Logf("c1-n2's fabric link back: %d of %d probes lost, longest outage %s", lost, sent, outage)
	t.Logf("after the link came back: %s", moved)
	seenAs("sel", eip, "c1-n2 back")

	// The gateway nodes by label instead: c1-n2 alone, then c1-n1 too (preferred by name), then
	// c1-n2 alone again; the addresses follow. Each change briefly drops traffic from other
	// nodes while OVN sets BFD up or down toward the gateways, so only status and the source
	// seen are checked here, not a probe stream.
	const gwLabel = "kovn.io/external-gateway"
	c.kubectlOK("label", "node", rig.NodeName(1, 2), gwLabel+"=true")
	defer c.kubectlOK("label", "node", rig.NodeName(1, 1), rig.NodeName(1, 2), gwLabel+"-")
	c.kubectlOK("patch", "subnet", subnet, "--type=merge", "-p",
		`{"spec":{"externalGateway":{"nodes":null,"nodeSelector":{"matchLabels":{"`+gwLabel+`":"true"}}}}}`)
	if err := eventually(30*time.Second, func() error {
		if out := strings.Fields(c.nbctl("lrp-get-gateway-chassis", "ovn-cluster-"+subnet)); len(out) != 2 {
			return fmt.Errorf("gateway chassis of the external port: %q, want c1-n2's alone", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("c1-n2 labelled: %s", c.waitEIP("out", rig.NodeName(1, 2), 1))
	c.kubectlOK("label", "node", rig.NodeName(1, 1), gwLabel+"=true")
	t.Logf("c1-n1 labelled too: %s", c.waitEIP("out", rig.NodeName(1, 1), 1))
	seenAs("sel", eip, "held by c1-n1, by label")
	c.kubectlOK("label", "node", rig.NodeName(1, 1), gwLabel+"-")
	t.Logf("c1-n1 unlabelled: %s", c.waitEIP("out", rig.NodeName(1, 2), 1))
	seenAs("sel", eip, "held by c1-n2, by label")

	// The namespace no longer selected: the pod leaves as every other pod does, no NAT left.
	c.kubectlOK("label", "namespace", "egress", "egress-")
	c.waitEIP("out", rig.NodeName(1, 2), 0)
	seenAs("sel", usual, "namespace unlabelled")
	if out := strings.TrimSpace(c.nbctl("--bare", "--columns=external_ip", "find", "NAT", "type=snat")); out != "" {
		t.Errorf("snat rows left with no pod selected: %s", out)
	}
}

// answerSource is the client address in testbox's answer ("<hostname> <ip>:<port>"), found
// among the lines kubectl exec mixes in.
func answerSource(out string) (netip.Addr, bool) {
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if ap, err := netip.ParseAddrPort(f[1]); err == nil {
				return ap.Addr().Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// waitEIP waits until EgressIP name is Ready with every address on node and pods selected,
// and returns its Ready message.
func (c *cluster) waitEIP(name, node string, pods int) string {
	c.t.Helper()
	var msg string
	if err := eventually(60*time.Second, func() error {
		out, _ := c.kubectl("get", "egressip", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.addresses[*].node}|{.status.pods}|{.status.conditions[?(@.type=="Ready")].message}`)
		f := strings.SplitN(out, "|", 4)
		if len(f) != 4 || f[0] != "True" || f[2] != fmt.Sprint(pods) {
			return fmt.Errorf("EgressIP %s: %q, want Ready with %d pods", name, out, pods)
		}
		for _, n := range strings.Fields(f[1]) {
			if n != node {
				return fmt.Errorf("EgressIP %s: addresses on %q, want %s", name, f[1], node)
			}
		}
		if f[1] == "" {
			return fmt.Errorf("EgressIP %s: no node holds its addresses", name)
		}
		msg = f[3]
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return msg
}
