package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/test/rig"
)

// TestUnderlay: one cluster of three nodes whose second NIC (eth1) sits on the rig's VLAN-aware
// switch. A ProviderNetwork moves eth1 into br-phys on c1-n1 and c1-n2 without cutting the
// nodes off; c1-n3 is given a NIC that does not exist and says so in its status. Subnets on
// VLANs 100 and 200 put pods directly on the physical network: pods on two nodes reach each
// other in 802.1Q frames on the switch (never in Geneve), reach the physical gateway and the
// external host (which sees the pod's own address), and reach the other VLAN only through the
// physical router. An overlay pod reaches an underlay pod through the physical gateway.
// Deleting the ProviderNetwork gives eth1 its addresses and routes back.
func TestUnderlay(t *testing.T) {
	l := newUnderlayLab(t)
	t.Run("ProviderNetwork created: eth1 moves into br-phys, the node stays reachable; a missing NIC is reported on its node", l.attach)
	t.Run("a node's kovn-daemon writes only its own entry of the status", l.ownEntry)
	l.startPods()
	t.Run("a pod of an underlay subnet on the node without the NIC is refused with the reason", l.podOnBadNode)
	t.Run("underlay pods on two nodes reach each other in 802.1Q frames of their VLAN, not over Geneve", l.sameVlan)
	t.Run("a bandwidth limit on an underlay pod's port, each way", l.bandwidth)
	t.Run("underlay pods reach the physical gateway and the external host, which sees the pod address", l.outside)
	t.Run("two VLANs meet only through the physical router", l.isolation)
	t.Run("an overlay pod reaches an underlay pod through the physical gateway", l.overlayToUnderlay)
	t.Run("a floating IP of the VLAN's Subnet: the external host reaches a StatefulSet pod on it, the pod leaves with it", l.floatingIP)
	t.Run("an egress IP: selected pods leave as it through the gateway node, which fails over", l.egressIP)
	t.Run("kovn-daemon restarted: nothing moves, the pods keep talking", l.daemonRestart)
	t.Run("a node excluded gets eth1 back and leaves the status; included again, it rejoins", l.exclude)
	t.Run("ProviderNetwork deleted: eth1 has its addresses and routes back, the node stays reachable", l.detach)
}

// underlayLab is TestUnderlay's cluster.
type underlayLab struct {
	r                  *rig.Rig
	cfg                rig.Config
	c                  *cluster
	a100, b100, c200   *corev1.Pod // a100 on c1-n1; b100, c200 on c1-n2
	overlay            *corev1.Pod // in the default subnet, on c1-n1
	eth1Before         map[int]string
	nodes              []int // the nodes whose eth1 joins the network
	badNode            int
	badNIC, provider   string
	vlan100, vlanOther int
}

func newUnderlayLab(t *testing.T) *underlayLab {
	cfg := rigConfig(t, 1, 3)
	cfg.Kovn = true
	l := &underlayLab{cfg: cfg, r: upRig(t, cfg), nodes: []int{1, 2}, badNode: 3, badNIC: "eth9",
		provider: "phys", vlan100: rig.UnderlayVLANs[0], vlanOther: rig.UnderlayVLANs[1]}
	l.c = newCluster(t, l.r, "c1")
	l.eth1Before = map[int]string{}
	for n := 1; n <= 3; n++ {
		l.eth1Before[n] = l.eth1State(t, n)
		if !strings.Contains(l.eth1Before[n], "172.29.") && cfg.HasIPv4() {
			t.Fatalf("node %d's eth1 has no provider address before the test:\n%s", n, l.eth1Before[n])
		}
	}
	c := l.c
	for _, v := range []int{l.vlan100, l.vlanOther} {
		c.kubectlOK("create", "namespace", fmt.Sprintf("ul%d", v))
		c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: Vlan
metadata: {name: v%d}
spec: {id: %d, provider: %s}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: ul%d}
spec: {cidrBlock: %q, gateway: %q, namespaces: [ul%d], vlan: v%d}
`, v, v, l.provider, v, joinPrefixes(cfg.VlanCIDRs(v)), joinAddrs(cfg.VlanGateways(v)), v, v))
		c.waitSubnetReady(fmt.Sprintf("ul%d", v))
	}
	return l
}

// attach creates the ProviderNetwork while the external host probes c1-n1's eth1 address every
// 100 ms, then waits for the nodes' status.
func (l *underlayLab) attach(t *testing.T) {
	l.c.t = t
	target := l.cfg.ProviderIPs(1, 1)[0].String()
	var took time.Duration
	lost, outage, err := underlayHostStream(l.cfg, target, 60, func() {
		start := time.Now()
		l.c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: ProviderNetwork
metadata: {name: %s}
spec:
  defaultInterface: %s
  customInterfaces: [{interface: %s, nodes: [%s]}]
`, l.provider, rig.UnderlayNIC, l.badNIC, rig.NodeName(1, l.badNode)))
		l.waitEth1(t, func(n int, st string) bool { return !strings.Contains(st, rig.UnderlayNIC+" ") })
		took = time.Since(start)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("external host -> c1-n1's eth1 address %s while eth1 moved into br-%s: %d of 60 probes lost (100 ms apart; %s); "+
		"every address off eth1 %.2fs after the create", target, l.provider, lost, outageText(outage), took.Seconds())
	if lost > 2 {
		t.Errorf("moving eth1 into the bridge cut the node off: %d probes lost", lost)
	}
	l.waitProviderStatus(t)
	for _, n := range l.nodes {
		st := l.eth1State(t, n)
		for _, ip := range l.cfg.ProviderIPs(1, n) {
			if !strings.Contains(st, "br-"+l.provider+" "+ip.String()+"/") || strings.Contains(st, rig.UnderlayNIC+" "+ip.String()+"/") {
				t.Errorf("node %d: %s should be on br-%s, not on eth1:\n%s", n, ip, l.provider, st)
			}
		}
		for _, r := range l.cfg.UnderlayRoutes() {
			if !strings.Contains(st, r.String()+" via ") || !strings.Contains(grepLines(st, r.String()+" via "), "dev br-"+l.provider) {
				t.Errorf("node %d: route %s should go through br-%s:\n%s", n, r, l.provider, st)
			}
		}
	}
	if st := l.eth1State(t, l.badNode); st != l.eth1Before[l.badNode] {
		t.Errorf("node %d (no %s) changed its eth1:\nbefore %s\nafter %s", l.badNode, l.badNIC, l.eth1Before[l.badNode], st)
	}
	for _, n := range append([]int{}, l.nodes...) {
		for _, ip := range l.cfg.ProviderIPs(1, n) {
			if out, err := underlayHostExec(l.cfg, "ping", "-c", "5", "-W", "1s", ip.String()); err != nil || !strings.Contains(out, "5 packets transmitted, 5 received") {
				t.Errorf("external host -> node %d's %s after the move: %v\n%s", n, ip, err, out)
			}
		}
	}
}

// ownEntry: c1-n1's daemon credentials may not write c1-n2's entry (the admission policy),
// even as c1-n2's field manager; a dry run, so nothing changes if it were let through.
func (l *underlayLab) ownEntry(t *testing.T) {
	dyn := dynamicClient(t, componentConfig(t, l.r.State, rig.NodeName(1, 1), "kovn-daemon"))
	pns := dyn.Resource(schema.GroupVersionResource{Group: "kovn.io", Version: "v1alpha1", Resource: "providernetworks"})
	forged := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kovn.io/v1alpha1", "kind": "ProviderNetwork",
		"metadata": map[string]any{"name": l.provider},
		"status":   map[string]any{"readyNodes": []any{rig.NodeName(1, 3)}, "nodes": []any{map[string]any{"node": rig.NodeName(1, 3), "interface": "eth1"}}}}}
	_, err := pns.ApplyStatus(context.Background(), l.provider, forged, metav1.ApplyOptions{FieldManager: "kovn-daemon-" + rig.NodeName(1, 3),
		Force: true, DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kovn-daemon-own-provider-entry") {
		t.Errorf("c1-n1's daemon writing c1-n3's entry: got %v, want Forbidden by kovn-daemon-own-provider-entry", err)
	}
	own := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kovn.io/v1alpha1", "kind": "ProviderNetwork",
		"metadata": map[string]any{"name": l.provider},
		"status":   map[string]any{"readyNodes": []any{rig.NodeName(1, 1)}, "nodes": []any{map[string]any{"node": rig.NodeName(1, 1), "interface": "eth1"}}}}}
	if _, err := pns.ApplyStatus(context.Background(), l.provider, own, metav1.ApplyOptions{FieldManager: "kovn-daemon-" + rig.NodeName(1, 1),
		Force: true, DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("c1-n1's daemon writing its own entry (dry run): %v", err)
	}
}

// daemonRestart kills c1-n1's kovn-daemon (SIGKILL, down for 1 s) while a100 pings b100
// across nodes: its provider bridge, addresses and routes stay as they are and not a probe is
// lost (the restarted daemon finds the bridge by its ownership and its record of eth1).
func (l *underlayLab) daemonRestart(t *testing.T) {
	l.c.t = t
	before := l.eth1State(t, 1)
	ns := fmt.Sprintf("ul%d", l.vlan100)
	dst := podAddrs(l.b100.Status.PodIPs)[0].String()
	done := make(chan string, 1)
	go func() {
		out, _ := l.c.exec(ns, "a100", "pingstream", "-c", "60", "-i", "100ms", "-W", "2s", dst)
		done <- out
	}()
	time.Sleep(time.Second)
	if err := l.r.State.CrashDaemon(rig.NodeName(1, 1), "kovn-daemon"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := l.r.State.StartDaemon(ctx, rig.NodeName(1, 1), "kovn-daemon"); err != nil {
		t.Fatal(err)
	}
	lost, outage, err := parseStream(<-done, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a100 -> b100 across c1-n1's kovn-daemon crash and restart: %d of 60 probes lost (%s)", lost, outageText(outage))
	if lost != 0 {
		t.Errorf("%d probes lost while kovn-daemon restarted", lost)
	}
	time.Sleep(2 * time.Second) // the restarted daemon's first pass
	if after := l.eth1State(t, 1); after != before {
		t.Errorf("c1-n1's eth1 and bridge changed across the restart:\nbefore %s\nafter  %s", before, after)
	}
}

// exclude lists c1-n2 in excludeNodes: its eth1 gets its addresses and routes back and its
// entry leaves the status; removing it again brings the node back in.
func (l *underlayLab) exclude(t *testing.T) {
	l.c.t = t
	l.c.kubectlOK("patch", "providernetwork", l.provider, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"excludeNodes":[%q]}}`, rig.NodeName(1, 2)))
	if err := eventually(20*time.Second, func() error {
		if st := l.eth1State(t, 2); st != l.eth1Before[2] {
			return fmt.Errorf("c1-n2's eth1:\nnow    %s\nbefore %s", st, l.eth1Before[2])
		}
		out := l.c.kubectlOK("get", "providernetwork", l.provider, "-o", "jsonpath={.status.readyNodes[*]}|{.status.nodes[*].node}")
		if strings.Contains(out, rig.NodeName(1, 2)) {
			return fmt.Errorf("c1-n2 still in the status: %s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, ip := range l.cfg.ProviderIPs(1, 2) {
		// kovn-daemon announces eth1's addresses once the bridge is gone, yet CI saw the
		// external host unanswered for seconds (about 1 run in 3, a70c91f): the first answer
		// is awaited (20 s) and its delay logged, then every echo must be answered.
		start := time.Now()
		if err := eventually(20*time.Second, func() error {
			_, err := underlayHostExec(l.cfg, "ping", "-c", "1", "-W", "1s", ip.String())
			return err
		}); err != nil {
			t.Errorf("external host -> excluded c1-n2's %s: no answer within 20 s: %v\n%s", ip, err, l.excludedDiag(t, 2, ip))
			continue
		}
		t.Logf("external host -> excluded c1-n2's %s: first answer %.1fs after eth1 was back", ip, time.Since(start).Seconds())
		if out, err := underlayHostExec(l.cfg, "ping", "-c", "5", "-W", "1s", ip.String()); err != nil || !strings.Contains(out, "5 packets transmitted, 5 received") {
			t.Errorf("external host -> excluded c1-n2's %s: %v\n%s", ip, err, out)
		}
	}
	l.c.kubectlOK("patch", "providernetwork", l.provider, "--type=merge", "-p", `{"spec":{"excludeNodes":null}}`)
	l.waitProviderStatus(t)
	// The status says kovn-daemon's part is done; ovn-controller then recreates b100's
	// localnet patch port on c1-n2 (CI once lost the first echo to it): wait for the first
	// answer, logged, then require every one.
	ns, b := fmt.Sprintf("ul%d", l.vlan100), podAddrs(l.b100.Status.PodIPs)[0].String()
	start := time.Now()
	if err := eventually(15*time.Second, func() error {
		_, err := l.c.exec(ns, "a100", "ping", "-c", "1", "-W", "1s", b)
		return err
	}); err != nil {
		t.Fatalf("a100 -> b100 after c1-n2 rejoined: %v", err)
	}
	t.Logf("a100 -> b100: first answer %.1fs after c1-n2 rejoined", time.Since(start).Seconds())
	l.c.ping(ns, "a100", b)
}

// waitProviderStatus waits for readyNodes to be the good nodes and notReadyNodes the bad one,
// whose condition names the missing NIC.
func (l *underlayLab) waitProviderStatus(t *testing.T) {
	want := fmt.Sprintf("%s,%s|%s", rig.NodeName(1, 1), rig.NodeName(1, 2), rig.NodeName(1, l.badNode))
	var out string
	err := eventually(30*time.Second, func() error {
		var err error
		out, err = l.c.kubectl("get", "providernetwork", l.provider, "-o",
			`jsonpath={.status.readyNodes[*]}|{.status.notReadyNodes[*]}|{range .status.nodes[*]}{.node}={.conditions[0].reason}:{.conditions[0].message};{end}`)
		if err != nil {
			return err
		}
		parts := strings.SplitN(out, "|", 3)
		if len(parts) < 3 {
			return fmt.Errorf("status %q", out)
		}
		ready := strings.Fields(parts[0])
		slices.Sort(ready)
		if got := strings.Join(ready, ",") + "|" + parts[1]; got != want {
			return fmt.Errorf("ready|notReady %q, want %q", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ProviderNetwork status: %v\n%s", err, out)
	}
	bad := fmt.Sprintf("%s=InterfaceNotFound:interface %s not found on node %s", rig.NodeName(1, l.badNode), l.badNIC, rig.NodeName(1, l.badNode))
	if !strings.Contains(out, bad) {
		t.Errorf("status %q does not say %q", out, bad)
	}
	t.Logf("ProviderNetwork status: %s", out)
	if ev := l.c.kubectlOK("get", "events", "-A", "--field-selector", "involvedObject.kind=ProviderNetwork,reason=InterfaceNotFound", "-o", "jsonpath={.items[*].message}"); !strings.Contains(ev, l.badNIC) {
		t.Errorf("no InterfaceNotFound event naming %s: %q", l.badNIC, ev)
	}
}

func (l *underlayLab) startPods() {
	c := l.c
	c.createPod(testboxPod(fmt.Sprintf("ul%d", l.vlan100), "a100", onNode(rig.NodeName(1, 1))))
	c.createPod(testboxPod(fmt.Sprintf("ul%d", l.vlan100), "b100", onNode(rig.NodeName(1, 2))))
	c.createPod(testboxPod(fmt.Sprintf("ul%d", l.vlanOther), "c200", onNode(rig.NodeName(1, 2))))
	c.createPod(testboxPod("default", "overlay", onNode(rig.NodeName(1, 1))))
	l.a100 = c.waitRunning(fmt.Sprintf("ul%d", l.vlan100), "a100", 90*time.Second)
	l.b100 = c.waitRunning(fmt.Sprintf("ul%d", l.vlan100), "b100", 90*time.Second)
	l.c200 = c.waitRunning(fmt.Sprintf("ul%d", l.vlanOther), "c200", 90*time.Second)
	l.overlay = c.waitRunning("default", "overlay", 90*time.Second)
	for _, p := range []*corev1.Pod{l.a100, l.b100} {
		for _, ip := range podAddrs(p.Status.PodIPs) {
			if !containsAddr(l.cfg.VlanCIDRs(l.vlan100), ip) {
				c.t.Fatalf("pod %s has %s, outside VLAN %d's subnets %v", p.Name, ip, l.vlan100, l.cfg.VlanCIDRs(l.vlan100))
			}
		}
	}
}

// bandwidth: a100's 20M egress and ingress limits hold on the physical network as on the
// overlay (the meters are on the pod's port, whatever carries its frames).
func (l *underlayLab) bandwidth(t *testing.T) {
	l.c.t = t
	ns := fmt.Sprintf("ul%d", l.vlan100)
	l.c.annotate(t, ns, "a100", map[string]*string{ingressBW: ptr.To("20M"), egressBW: ptr.To("20M")})
	defer l.c.annotate(t, ns, "a100", map[string]*string{ingressBW: nil, egressBW: nil})
	l.c.waitQoS(t, ns, "a100", 2)
	a, b := podAddrs(l.a100.Status.PodIPs)[0], podAddrs(l.b100.Status.PodIPs)[0]
	checkRate(t, "a100 -> b100 (egress 20M), VLAN "+fmt.Sprint(l.vlan100), l.c.stream(t, ns, "a100", "b100", net.JoinHostPort(b.String(), "5201"), 8*time.Second, nil), 20)
	checkRate(t, "b100 -> a100 (ingress 20M), VLAN "+fmt.Sprint(l.vlan100), l.c.stream(t, ns, "b100", "a100", net.JoinHostPort(a.String(), "5201"), 8*time.Second, nil), 20)
}

// podOnBadNode: the CNI on c1-n3 refuses an underlay pod, naming the missing NIC (an event on
// the pod), instead of starting it cut off.
func (l *underlayLab) podOnBadNode(t *testing.T) {
	l.c.t = t
	ns := fmt.Sprintf("ul%d", l.vlan100)
	l.c.createPod(testboxPod(ns, "stranded", onNode(rig.NodeName(1, l.badNode))))
	ev := l.c.waitEvent(ns, "stranded", "FailedCreatePodSandBox", 60*time.Second)
	if !strings.Contains(ev, "interface "+l.badNIC+" not found on node "+rig.NodeName(1, l.badNode)) {
		t.Errorf("sandbox event %q does not name the missing NIC", ev)
	}
	t.Logf("pod on %s: %s", rig.NodeName(1, l.badNode), ev)
	l.c.deletePod(ns, "stranded")
}

// sameVlan pings b100 from a100 in each family while capturing on c1-n1's switch port: exactly
// the 2 x pingCount echo frames per family, each tagged with VLAN 100; none inside Geneve on
// the fabric.
func (l *underlayLab) sameVlan(t *testing.T) {
	l.c.t = t
	ns := fmt.Sprintf("ul%d", l.vlan100)
	srcs, dsts := podAddrs(l.a100.Status.PodIPs), podAddrs(l.b100.Status.PodIPs)
	var tagged, geneve string
	geneve = capture(t, l.cfg.FabricNS(), fmt.Sprintf("c%dn%d", 1, 1), "udp port 6081", func() {
		tagged = capture(t, l.cfg.FabricNS(), rig.FabricVlanPort(1, 1), "", func() {
			for _, dst := range dsts {
				l.c.pingNewPeer(ns, "a100", dst.String())
			}
		})
	})
	for i := range srcs {
		echoes := 0
		for _, line := range strings.Split(tagged, "\n") {
			if strings.Contains(line, "echo re") && strings.Contains(line, srcs[i].String()+" > ") || strings.Contains(line, dsts[i].String()+" > ") && strings.Contains(line, "echo re") {
				if !strings.Contains(line, fmt.Sprintf("vlan %d,", l.vlan100)) {
					t.Errorf("echo frame without the VLAN %d tag: %s", l.vlan100, line)
				}
				echoes++
			}
		}
		// pingNewPeer may lose the first request: 2*pingCount frames, or one pair fewer.
		if echoes != 2*pingCount && echoes != 2*pingCount-1 {
			t.Errorf("%s <-> %s: %d tagged echo frames on c1-n1's switch port, want %d\n%s", srcs[i], dsts[i], echoes, 2*pingCount, tagged)
		}
		t.Logf("%s <-> %s: %d echo frames tagged VLAN %d on %s", srcs[i], dsts[i], echoes, l.vlan100, rig.FabricVlanPort(1, 1))
	}
	for _, ip := range srcs {
		if n := strings.Count(geneve, ip.String()); n != 0 {
			t.Errorf("%d Geneve packets on the fabric carry %s:\n%s", n, ip, grepLines(geneve, ip.String()))
		}
	}
}

// outside: the VLAN gateways and the external host on VLAN 30 answer every ping; the host's
// HTTP server sees the pod's own address.
func (l *underlayLab) outside(t *testing.T) {
	l.c.t = t
	ns := fmt.Sprintf("ul%d", l.vlan100)
	for _, gw := range l.cfg.VlanGateways(l.vlan100) {
		l.c.ping(ns, "a100", gw.String())
	}
	for i, host := range l.cfg.UnderlayHostIPs() {
		l.c.ping(ns, "a100", host.String())
		out := l.c.mustExec(ns, "a100", "get", fmt.Sprintf("http://%s/", hostPort(host.String(), 8080)))
		own := podAddrs(l.a100.Status.PodIPs)[i].String()
		if !strings.Contains(out, own) {
			t.Errorf("external host %s saw %q, want the pod's own address %s", host, strings.TrimSpace(out), own)
		}
		t.Logf("external host %s sees a100 as %s", host, strings.TrimSpace(out))
	}
}

// isolation: a100 (VLAN 100) reaches c200 (VLAN 200) with forwarding on in the physical router,
// not a single echo with it off (while b100 on a100's own VLAN still answers), and again after.
func (l *underlayLab) isolation(t *testing.T) {
	l.c.t = t
	ns := fmt.Sprintf("ul%d", l.vlan100)
	other := podAddrs(l.c200.Status.PodIPs)
	for _, ip := range other {
		l.c.ping(ns, "a100", ip.String())
	}
	l.routerForwarding(t, false)
	defer l.routerForwarding(t, true) // also when a check below fails: later steps route through it
	for _, ip := range other {
		out, _ := l.c.exec(ns, "a100", "ping", "-c", "3", "-W", "1s", ip.String())
		if !strings.Contains(out, "3 packets transmitted, 0 received") {
			t.Errorf("VLAN 100 -> VLAN 200 (%s) with the router not forwarding: want 0 of 3 replies\n%s", ip, out)
		}
	}
	for _, ip := range podAddrs(l.b100.Status.PodIPs) {
		l.c.ping(ns, "a100", ip.String())
	}
	l.routerForwarding(t, true)
	for _, ip := range other {
		l.c.ping(ns, "a100", ip.String())
	}
}

// overlayToUnderlay: the overlay pod's traffic leaves through its node (masqueraded to the
// node's address on the provider network: the physical router has no route to the overlay)
// and reaches the underlay pod through the physical gateway.
func (l *underlayLab) overlayToUnderlay(t *testing.T) {
	l.c.t = t
	for i, ip := range podAddrs(l.a100.Status.PodIPs) {
		l.c.ping("default", "overlay", ip.String())
		out := l.c.mustExec("default", "overlay", "get", fmt.Sprintf("http://%s/", hostPort(ip.String(), 8080)))
		t.Logf("overlay pod -> underlay pod %s: the server sees %s", ip, strings.TrimSpace(out))
		if want := l.cfg.ProviderIPs(1, 1)[i].String(); !strings.Contains(out, want) {
			t.Errorf("underlay pod saw %q, want c1-n1's provider address %s (masqueraded at the node)", strings.TrimSpace(out), want)
		}
	}
}

// detach deletes the ProviderNetwork while the external host probes c1-n1's eth1 address, then
// compares eth1 with what it was before the test.
func (l *underlayLab) detach(t *testing.T) {
	l.c.t = t
	target := l.cfg.ProviderIPs(1, 1)[0].String()
	var took time.Duration
	lost, outage, err := underlayHostStream(l.cfg, target, 60, func() {
		start := time.Now()
		l.c.kubectlOK("delete", "providernetwork", l.provider)
		l.waitEth1(t, func(n int, st string) bool { return st == l.eth1Before[n] })
		took = time.Since(start)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("external host -> %s while eth1 left the bridge: %d of 60 probes lost (%s); every node's eth1 as before the test %.2fs after the delete",
		target, lost, outageText(outage), took.Seconds())
	if lost > 2 {
		t.Errorf("giving eth1 back cut the node off: %d probes lost", lost)
	}
	for n := 1; n <= 3; n++ {
		if st := l.eth1State(t, n); st != l.eth1Before[n] {
			t.Errorf("eth1 of node %d:\nnow    %s\nbefore %s", n, st, l.eth1Before[n])
		}
	}
	for _, n := range l.nodes {
		if out := nodeExecOut(t, l.cfg, n, "ovs-vsctl", "--db=unix:"+l.cfg.OVSDBSocket(1, n), "list-br"); strings.Contains(out, "br-"+l.provider) {
			t.Errorf("node %d still has br-%s: %s", n, l.provider, out)
		}
		for _, ip := range l.cfg.ProviderIPs(1, n) {
			// A node other than the probed one was once unreachable for 5 s right after its
			// eth1 looked as before (CI, 2 cores): how long it takes is measured and logged,
			// up to 15 s, before 5 of 5 echoes are required.
			start := time.Now()
			if err := eventually(15*time.Second, func() error {
				_, err := underlayHostExec(l.cfg, "ping", "-c", "1", "-W", "1s", ip.String())
				return err
			}); err != nil {
				t.Errorf("external host -> node %d's %s after the delete: unreachable for 15 s: %v", n, ip, err)
				continue
			}
			if d := time.Since(start); d > time.Second {
				t.Logf("external host -> node %d's %s: first reply %.1fs after eth1 looked as before", n, ip, d.Seconds())
			}
			if out, err := underlayHostExec(l.cfg, "ping", "-c", "5", "-W", "1s", ip.String()); err != nil || !strings.Contains(out, "5 packets transmitted, 5 received") {
				t.Errorf("external host -> node %d's %s after the delete: %v\n%s", n, ip, err, out)
			}
		}
	}
}
