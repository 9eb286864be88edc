package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/test/rig"
)

// TestBGP: one cluster of three nodes, each running kovn-speaker, peering with the rig's ToR
// (FRR) in both families. The ToR learns a Cluster-policy subnet from every node (ECMP), a
// Local-policy subnet's pod and a Local-policy Service's ClusterIPs from the node hosting them
// only, with exactly those next hops; the outside host behind the ToR reaches all three, and
// the Local ones see its own address. Unmarking the subnet withdraws it; a killed speaker's next
// hop goes within the hold time; a speaker restarted under graceful restart loses no probe;
// a node's address change moves its next hop; a wrong AS or password keeps that session down,
// says why in the BgpPeer status, and leaves the other sessions alone. A route the ToR sends is
// imported by no speaker; a ToR sending more than maxPrefixes gets its session held down.
func TestBGP(t *testing.T) {
	l := newBGPLab(t)
	c, tor, r, cfg, want := l.c, l.tor, l.r, l.cfg, l.want
	t.Run("the ToR learns the subnet from every node and the Local Service from its endpoint's node", l.learns)
	t.Run("the outside host reaches the pods and the ClusterIP through the ToR; Local ones see its address", l.reachable)
	t.Run("subnet unmarked: it and its pod's host route withdrawn from the ToR; marked again: back", l.unmarked)
	t.Run("a node's speaker killed: the ToR drops that next hop within the hold time", l.killed)
	t.Run("a node's speaker stopped (SIGTERM, no graceful restart): it withdraws everything before it goes", l.stopped)
	t.Run("graceful restart: the ToR keeps forwarding while the hosting node's speaker restarts", func(t *testing.T) {
		bgpGracefulRestart(t, c, tor, r, cfg, want, l.soloIPs[0])
	})
	t.Run("a node's address changes: its next hop follows", func(t *testing.T) {
		bgpAddressChange(t, c, tor, cfg, want)
	})
	t.Run("wrong AS and wrong password: that session stays down and says why; the others stay up", func(t *testing.T) {
		bgpBadPeers(t, c, tor, cfg, want)
	})
	t.Run("the ToR's routes: none imported; more than maxPrefixes: the session held down and the BgpPeer says so", func(t *testing.T) {
		bgpImportAndPrefixLimit(t, c, tor, cfg, want)
	})
}

// bgpExtIP is the announced externalIP, inside rig.SpeakerExternalIPCIDR.
const bgpExtIP = "192.0.2.10"

// bgpLab is TestBGP's cluster and what it announces.
type bgpLab struct {
	r                 *rig.Rig
	cfg               rig.Config
	c                 *cluster
	tor               *torRouter
	subnetCIDRs       []string
	web, solo, pinned *corev1.Pod
	clusterIPs        []netip.Addr
	soloIPs           []netip.Addr
	want              map[string][]string // the ToR's routes: prefix -> next hops
}

// newBGPLab: peers for both families; a Cluster-policy subnet (pods web on c1-n2 and pinned,
// which asks for its own host route, on c1-n3), a Local-policy subnet (solo on c1-n2), a
// Local-policy Service on web and an ETP=Local one with two externalIPs (one allowed).
func newBGPLab(t *testing.T) *bgpLab {
	cfg := rigConfig(t, 1, 3)
	cfg.Kovn = true
	preferInstall(&cfg, rig.InstallChart) // kovn-speaker is the chart's DaemonSet
	l := &bgpLab{cfg: cfg, r: upRig(t, cfg)}
	c := newCluster(t, l.r, "c1")
	l.c, l.tor = c, &torRouter{t: t, cfg: cfg}
	for _, ip := range cfg.ToRIPs() {
		c.applyBgpPeer(peerName(ip), ip.String(), "", "")
	}
	l.subnetCIDRs = pick(cfg, "10.30.0.0/24", "fd00:30:1::/64")
	c.kubectlOK("create", "namespace", "bgp")
	c.kubectlOK("create", "namespace", "bgp-local")
	c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: bgpnet}
spec: {cidrBlock: %q, namespaces: [bgp], natOutgoing: false, bgpAdvertise: true}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: bgplocal}
spec: {cidrBlock: %q, namespaces: [bgp-local], natOutgoing: true, bgpAdvertise: true, bgpPolicy: Local}
`, strings.Join(l.subnetCIDRs, ","), strings.Join(pick(cfg, "10.31.0.0/24", "fd00:30:2::/64"), ",")))
	// A pod is bound to its namespace's subnet only once the controller accepted that subnet.
	c.waitSubnetReady("bgpnet")
	c.waitSubnetReady("bgplocal")
	c.createPod(testboxPod("bgp", "web", onNode("c1-n2")))
	c.createPod(testboxPod("bgp-local", "solo", onNode("c1-n2")))
	c.createPod(testboxPod("bgp", "pinned", onNode("c1-n3"), withAnnotations("ovn.kovn.io/bgp", "true")))
	l.web = c.waitRunning("bgp", "web", 90*time.Second)
	l.solo = c.waitRunning("bgp-local", "solo", 90*time.Second)
	l.pinned = c.waitRunning("bgp", "pinned", 90*time.Second)
	c.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: bgp, annotations: {ovn.kovn.io/bgp: local}}
spec: {ipFamilyPolicy: PreferDualStack, selector: {app: web}, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: ext, namespace: bgp, annotations: {ovn.kovn.io/bgp: "true"}}
spec: {selector: {app: web}, externalTrafficPolicy: Local, externalIPs: [%s, 198.51.100.10], ports: [{name: http, port: 80, targetPort: 8080}]}
`, bgpExtIP))
	l.clusterIPs, l.soloIPs = c.serviceIPs("bgp", "web"), podAddrs(l.solo.Status.PodIPs)
	l.want = map[string][]string{}
	for i, cidr := range l.subnetCIDRs {
		l.want[cidr] = nodeIPsOf(cfg, 1, 2, 3)[i]
	}
	for _, ip := range slices.Concat(l.clusterIPs, l.soloIPs, c.serviceIPs("bgp", "ext"), []netip.Addr{netip.MustParseAddr(bgpExtIP)}) {
		l.want[netip.PrefixFrom(ip, ip.BitLen()).String()] = nodeIPsOf(cfg, 2)[familyIndex(cfg, ip)]
	}
	for _, ip := range podAddrs(l.pinned.Status.PodIPs) {
		l.want[netip.PrefixFrom(ip, ip.BitLen()).String()] = nodeIPsOf(cfg, 3)[familyIndex(cfg, ip)]
	}
	return l
}

// learns: exact routes and next hops on the ToR, every session up, per-peer metrics on a
// speaker's metrics port (inside its node's namespace, refreshed every second).
func (l *bgpLab) learns(t *testing.T) {
	l.tor.t, l.c.t = t, t
	start := time.Now()
	l.tor.waitRoutes(l.want)
	t.Logf("ToR routes with exactly the expected next hops %.1fs after the Service existed: %v", time.Since(start).Seconds(), l.want)
	l.c.waitBgpPeersEstablished(3)
	sent := 0
	for _, p := range l.want {
		if slices.Contains(p, rig.NodeIP(1, 2).String()) {
			sent++
		}
	}
	lines := []string{`kovn_bgp_session_established{address="172.30.0.254",peer="tor-v4"} 1`,
		fmt.Sprintf(`kovn_bgp_prefixes_sent{address="172.30.0.254",peer="tor-v4"} %d`, sent)}
	var scrape string
	if err := eventually(10*time.Second, func() error {
		out, err := l.c.componentMetrics(t, l.cfg.NodeNS(1, 2), chartSpeakerMetricsPort)
		if err != nil {
			return fmt.Errorf("c1-n2's speaker metrics: %v\n%s", err, out)
		}
		for _, line := range lines {
			if !strings.Contains(out, line+"\n") {
				return fmt.Errorf("c1-n2's speaker metrics lack %q:\n%s", line, grepLines(out, "kovn_bgp_"))
			}
		}
		scrape = out
		return nil
	}); err != nil {
		t.Error(err)
		return
	}
	checkDashboardSeries(t, "kovn-speaker", scrape)
}

// reachable: 12 connections per URL from the outside host (the ToR hashes them over the entry
// nodes); the Local routes' servers see the client's own address.
func (l *bgpLab) reachable(t *testing.T) {
	check := func(u string, keep bool) {
		for i := 0; i < 12; i++ {
			out, err := outsideExec(l.cfg, "get", u)
			if err != nil {
				t.Fatalf("outside host GET %s (attempt %d): %v\n%s", u, i+1, err, out)
			}
			src := outsideSource(l.cfg, u)
			if keep && !strings.Contains(out, " "+src) {
				t.Fatalf("GET %s from the outside host: the pod saw %q, want the client's own address %s", u, strings.TrimSpace(out), src)
			}
		}
	}
	for _, u := range urls(l.web.Status.PodIPs, 8080) {
		check(u, false) // Cluster policy: masqueraded where it enters at another node than the pod's
	}
	for _, u := range slices.Concat(urls(l.solo.Status.PodIPs, 8080), urls(l.pinned.Status.PodIPs, 8080), ipURLs(l.clusterIPs, 80),
		[]string{"http://" + bgpExtIP + ":80/"}) {
		check(u, true)
	}
}

func (l *bgpLab) unmarked(t *testing.T) {
	l.tor.t, l.c.t = t, t
	l.c.kubectlOK("patch", "subnet", "bgpnet", "--type=merge", "-p", `{"spec":{"bgpAdvertise":false}}`)
	start := time.Now()
	without := maps.Clone(l.want)
	for _, p := range append(slices.Clone(l.subnetCIDRs), hostRoutes(l.pinned.Status.PodIPs)...) {
		delete(without, p) // the subnet and the host route its pod asked for: no longer allowed
	}
	l.tor.waitRoutes(without)
	t.Logf("withdrawn from the ToR %.2fs after the patch", time.Since(start).Seconds())
	l.c.kubectlOK("patch", "subnet", "bgpnet", "--type=merge", "-p", `{"spec":{"bgpAdvertise":true}}`)
	l.tor.waitRoutes(l.want)
}

func (l *bgpLab) killed(t *testing.T) {
	l.tor.t = t
	stopComponent(t, l.c, "c1-n1", "kovn-speaker", true)
	start := time.Now()
	l.tor.waitRoutes(withoutHops(l.want, l.cfg.NodeIPs(1, 1)...))
	gone := time.Since(start)
	t.Logf("c1-n1's next hop gone from the ToR %.2fs after its speaker was killed (hold time 9 s)", gone.Seconds())
	if gone > 9*time.Second {
		t.Errorf("next hop withdrawn after %s, want within the 9 s hold time", gone)
	}
	startComponent(t, l.c, "c1-n1", "kovn-speaker")
	l.tor.waitRoutes(l.want)
}

func (l *bgpLab) stopped(t *testing.T) {
	l.tor.t = t
	stopped := make(chan error, 1)
	go func() { stopped <- stopComponentErr(t, l.c, "c1-n1", "kovn-speaker", false) }()
	start := time.Now()
	l.tor.waitRoutes(withoutHops(l.want, l.cfg.NodeIPs(1, 1)...))
	t.Logf("c1-n1's next hop gone from the ToR %.2fs after SIGTERM to its speaker", time.Since(start).Seconds())
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	startComponent(t, l.c, "c1-n1", "kovn-speaker")
	l.tor.waitRoutes(l.want)
}

// bgpGracefulRestart enables graceful restart on the peers, then crashes c1-n2's speaker (the
// only next hop of the Local-policy pod's host route: no covering route to fall back to) under
// a 100 ms probe stream from the outside host to that pod, holds it down 3 s and starts it
// again: the ToR keeps the route (stale) and nothing is lost. Without graceful restart the
// same crash takes the route away at once (the speaker-killed step).
func bgpGracefulRestart(t *testing.T, c *cluster, tor *torRouter, r *rig.Rig, cfg rig.Config, want map[string][]string, vip netip.Addr) {
	c.t, tor.t = t, t
	for _, ip := range cfg.ToRIPs() {
		c.applyBgpPeer(peerName(ip), ip.String(), "", "gracefulRestart: {enabled: true, restartTimeSeconds: 60}")
	}
	tor.waitRoutes(want)
	c.waitBgpPeersEstablished(3)
	prefix := netip.PrefixFrom(vip, vip.BitLen()).String()
	const count = 150
	var staleSeen bool
	lost, outage, err := outsideStream(cfg, vip.String(), count, func() {
		if err := stopComponentErr(t, c, "c1-n2", "kovn-speaker", true); err != nil {
			t.Error(err)
			return
		}
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			if tor.isStale(prefix) {
				staleSeen = true
			}
			time.Sleep(200 * time.Millisecond)
		}
		startComponent(t, c, "c1-n2", "kovn-speaker")
	})
	if err != nil {
		t.Fatal(err)
	}
	tor.waitRoutes(want)
	t.Logf("c1-n2's speaker crashed and held down 3 s under graceful restart: %d of %d probes to %s lost (longest outage %s); the ToR kept the route as stale: %v",
		lost, count, vip, outage, staleSeen)
	if lost != 0 || !staleSeen {
		t.Errorf("graceful restart: %d probes lost, stale route seen %v; want 0 lost while the ToR holds the stale route", lost, staleSeen)
	}
}

// bgpAddressChange moves c1-n3's IPv6 fabric address (its IPv4 one carries the overlay) to
// another and back: the ToR's next hop for c1-n3 follows each time.
func bgpAddressChange(t *testing.T, c *cluster, tor *torRouter, cfg rig.Config, want map[string][]string) {
	c.t, tor.t = t, t
	if !cfg.HasIPv6() {
		t.Fatal("this step moves an IPv6 address (the IPv4 one carries the overlay): it needs a dual-stack or IPv6 rig")
	}
	old := rig.NodeIP6(1, 3)
	moved := netip.MustParseAddr("fd00:30::1:99")
	ns := cfg.NodeNS(1, 3)
	swap := func(from, to netip.Addr) {
		for _, args := range [][]string{{"-n", ns, "addr", "add", to.String() + "/64", "dev", "br-phy", "nodad"},
			{"-n", ns, "addr", "del", from.String() + "/64", "dev", "br-phy"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				t.Fatalf("ip %v: %v %s", args, err, out)
			}
		}
	}
	replace := func(m map[string][]string, from, to netip.Addr) map[string][]string {
		out := map[string][]string{}
		for p, hops := range m {
			var hs []string
			for _, h := range hops {
				if h == from.String() {
					h = to.String()
				}
				hs = append(hs, h)
			}
			sort.Strings(hs)
			out[p] = hs
		}
		return out
	}
	// Within 6 s: the speaker itself noticed (the ToR alone would wait out its 9 s hold time).
	for _, step := range []struct{ from, to netip.Addr }{{old, moved}, {moved, old}} {
		start := time.Now()
		swap(step.from, step.to)
		tor.waitRoutes(replace(want, old, step.to))
		took := time.Since(start)
		t.Logf("c1-n3's address %s -> %s: the ToR's next hop followed in %.2fs", step.from, step.to, took.Seconds())
		if took > 6*time.Second {
			t.Errorf("next hop followed the address change after %s, want within 6 s (the hold time is 9 s)", took)
		}
	}
}

// bgpBadPeers takes c1-n3 off the IPv4 ToR peer and gives it a peer with the wrong AS, then an
// MD5 peer (the ToR configured with a password for c1-n3) with the wrong password, then the
// right one. The down sessions say why; c1-n1's and c1-n2's sessions are not disturbed.
func bgpBadPeers(t *testing.T, c *cluster, tor *torRouter, cfg rig.Config, want map[string][]string) {
	c.t, tor.t = t, t
	torIP := rig.ToRIP()
	notN3 := "nodeSelector: {matchExpressions: [{key: kubernetes.io/hostname, operator: NotIn, values: [c1-n3]}]}"
	onlyN3 := "nodeSelector: {matchLabels: {kubernetes.io/hostname: c1-n3}}"
	c.applyBgpPeer(peerName(torIP), torIP.String(), notN3, "gracefulRestart: {enabled: true, restartTimeSeconds: 60}")
	c.waitBgpNode(peerName(torIP), "c1-n3", func(s bgpNodeStatus) bool { return s.Node == "" })
	before := c.bgpSince(peerName(torIP))
	c.applyBgpPeerAS("wrong-as", torIP.String(), 64999, onlyN3, "")
	c.waitBgpNode("wrong-as", "c1-n3", func(s bgpNodeStatus) bool {
		return s.State != "Established" && strings.Contains(s.LastError, "64999")
	})
	t.Logf("wrong AS: %+v", c.bgpNode("wrong-as", "c1-n3"))
	c.kubectlOK("delete", "bgppeer", "wrong-as")
	n3 := rig.NodeIP(1, 3).String()
	tor.vtysh("configure terminal", "router bgp "+fmt.Sprint(rig.ToRASN), "neighbor "+n3+" remote-as external",
		"neighbor "+n3+" password right-one", "address-family ipv4 unicast", "neighbor "+n3+" activate")
	c.applyYAML("apiVersion: v1\nkind: Secret\nmetadata: {name: tor-md5, namespace: kovn-bgp}\nstringData: {password: wrong-one}\n")
	c.applyBgpPeerAS("md5", torIP.String(), rig.ToRASN, onlyN3, "passwordSecretRef: {name: tor-md5}\n  holdTimeSeconds: 9")
	time.Sleep(10 * time.Second) // several connection attempts (every 3 s), all refused
	s := c.bgpNode("md5", "c1-n3")
	t.Logf("wrong password after 10 s: %+v", s)
	if s.State == "Established" || s.LastError == "" {
		t.Errorf("wrong password: %+v, want a session that is not up and says why", s)
	}
	c.applyYAML("apiVersion: v1\nkind: Secret\nmetadata: {name: tor-md5, namespace: kovn-bgp}\nstringData: {password: right-one}\n")
	c.waitBgpNode("md5", "c1-n3", func(s bgpNodeStatus) bool { return s.State == "Established" })
	if after := c.bgpSince(peerName(torIP)); !maps.Equal(before, after) {
		t.Errorf("c1-n1/c1-n2 sessions disturbed: established since %v, then %v", before, after)
	}
	tor.waitRoutes(want)
	t.Logf("right password: Established; the other nodes' sessions kept their start times %v", before)
}

// bgpImportAndPrefixLimit gives c1-n3 a BgpPeer of its own to the IPv4 ToR with maxPrefixes 3,
// and has the ToR send the speakers one prefix of its own and nothing else. Every node receives
// it and none imports it: not in its speaker's table, not in its routes. Then the ToR sends
// four: c1-n3's session is closed and stays closed (no flap in 15 s, the span in which GoBGP
// would have reconnected), with a PrefixLimitReached condition naming the node and the limit,
// and a Warning event. maxPrefixes 10 brings it back with four received, none imported; at the
// end the ToR sends everything again and holds every node's routes as before.
func bgpImportAndPrefixLimit(t *testing.T, c *cluster, tor *torRouter, cfg rig.Config, want map[string][]string) {
	c.t, tor.t = t, t
	torIP := rig.ToRIP()
	sent := []string{"203.0.113.1/32", "203.0.113.2/32", "203.0.113.3/32", "203.0.113.4/32"}
	onlyN3 := "nodeSelector: {matchLabels: {kubernetes.io/hostname: c1-n3}}"
	// On its own: whatever an earlier step gave c1-n3 (an explicit ToR neighbour with a
	// password, BgpPeers of its own) goes; tor-v4 stays off c1-n3 so "limit" is its v4 session.
	c.kubectlOK("delete", "bgppeer", "md5", "wrong-as", "--ignore-not-found")
	tor.vtyshTry("configure terminal", fmt.Sprintf("router bgp %d", rig.ToRASN), "no neighbor "+rig.NodeIP(1, 3).String())
	c.applyBgpPeer(peerName(torIP), torIP.String(), "nodeSelector: {matchExpressions: [{key: kubernetes.io/hostname, operator: NotIn, values: [c1-n3]}]}",
		"gracefulRestart: {enabled: true, restartTimeSeconds: 60}")
	t.Logf("before the ToR's filter, c1-n1 receives %d prefixes from it (the cluster's own, sent back)",
		c.bgpNode(peerName(torIP), "c1-n1").PrefixesReceived)
	tor.sendOnly(sent[0])
	c.applyBgpPeer("limit", torIP.String(), onlyN3, "maxPrefixes: 3")
	c.waitBgpNode("limit", "c1-n3", func(s bgpNodeStatus) bool { return s.State == "Established" && s.PrefixesReceived == 1 })
	for _, node := range []string{"c1-n1", "c1-n2"} {
		c.waitBgpNode(peerName(torIP), node, func(s bgpNodeStatus) bool { return s.State == "Established" && s.PrefixesReceived == 1 })
	}
	for n := 1; n <= 3; n++ {
		expectNothingImported(t, c, cfg, n, sent[:1])
	}

	tor.originate(sent[1:]...)
	start := time.Now()
	c.waitBgpNode("limit", "c1-n3", func(s bgpNodeStatus) bool {
		return s.State != "Established" && s.condition("PrefixLimitReached").Status == "True"
	})
	held := c.bgpNode("limit", "c1-n3")
	t.Logf("4 prefixes sent, maxPrefixes 3: held down %.1fs later: %+v", time.Since(start).Seconds(), held.condition("PrefixLimitReached"))
	if m := held.condition("PrefixLimitReached").Message; !strings.Contains(m, "c1-n3") || !strings.Contains(m, "maxPrefixes (3)") {
		t.Errorf("PrefixLimitReached message %q, want the node and the limit", m)
	}
	if err := eventually(10*time.Second, func() error {
		ev, _ := c.kubectl("get", "events", "-A", "--field-selector", "reason=PrefixLimitReached,involvedObject.name=limit,type=Warning", "-o", "name")
		if strings.TrimSpace(ev) == "" {
			return fmt.Errorf("no PrefixLimitReached Warning event for BgpPeer limit")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	time.Sleep(15 * time.Second)
	if s := c.bgpNode("limit", "c1-n3"); s.State == "Established" || s.condition("PrefixLimitReached").Status != "True" {
		t.Errorf("15 s after the limit: %+v, want still held down", s)
	}
	flaps := `kovn_bgp_session_flaps{address="172.30.0.254",peer="limit"} 1` + "\n"
	if out := c.speakerMetrics(3); !strings.Contains(out, flaps) {
		t.Errorf("c1-n3's session flapped after the limit, want one drop: %s", grepLines(out, "kovn_bgp_session_flaps"))
	}

	c.applyBgpPeer("limit", torIP.String(), onlyN3, "maxPrefixes: 10")
	c.waitBgpNode("limit", "c1-n3", func(s bgpNodeStatus) bool {
		return s.State == "Established" && s.PrefixesReceived == 4 && s.condition("PrefixLimitReached").Type == ""
	})
	expectNothingImported(t, c, cfg, 3, sent)

	tor.sendAll(sent...)
	c.kubectlOK("delete", "bgppeer", "limit")
	c.applyBgpPeer(peerName(torIP), torIP.String(), "", "gracefulRestart: {enabled: true, restartTimeSeconds: 60}")
	tor.waitRoutes(want)
	c.waitBgpPeersEstablished(3)
}

// expectNothingImported: cluster 1's node n received the ToR's prefixes (checked by the
// caller) but its speaker's table holds none of them, nor do the node's routes.
func expectNothingImported(t *testing.T, c *cluster, cfg rig.Config, n int, prefixes []string) {
	t.Helper()
	if out := c.speakerMetrics(n); !strings.Contains(out, "kovn_bgp_routes_imported 0\n") {
		t.Errorf("c1-n%d's speaker imported routes: %s", n, grepLines(out, "kovn_bgp_routes_imported"))
	}
	routes := nodeRoutes(t, cfg, n)
	for _, p := range prefixes {
		if strings.Contains(routes, strings.TrimSuffix(p, "/32")+" ") {
			t.Errorf("c1-n%d routes %s, sent by the ToR:\n%s", n, p, routes)
		}
	}
}

// withoutHops is want with gone removed from every prefix's next hops (prefixes left with none
// dropped).
func withoutHops(want map[string][]string, gone ...netip.Addr) map[string][]string {
	out := map[string][]string{}
	for p, hops := range want {
		var hs []string
		for _, h := range hops {
			if !slices.ContainsFunc(gone, func(g netip.Addr) bool { return g.String() == h }) {
				hs = append(hs, h)
			}
		}
		if len(hs) > 0 {
			out[p] = hs
		}
	}
	return out
}

// torRouter reads the ToR's FRR.
type torRouter struct {
	t   *testing.T
	cfg rig.Config
}

func (r *torRouter) vtysh(cmds ...string) string {
	r.t.Helper()
	argv := r.cfg.VtyshArgv(cmds...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("vtysh %v: %v\n%s", cmds, err, out)
	}
	return string(out)
}

type frrPath struct {
	Valid    bool `json:"valid"`
	Stale    bool `json:"stale"`
	Nexthops []struct {
		IP    string `json:"ip"`
		Scope string `json:"scope"`
	} `json:"nexthops"`
}

// paths are the ToR's BGP paths of every family the rig carries, by prefix.
func (r *torRouter) paths() (map[string][]frrPath, error) {
	all := map[string][]frrPath{}
	for _, af := range pick(r.cfg, "ipv4", "ipv6") {
		argv := r.cfg.VtyshArgv("show bgp " + af + " unicast json")
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil {
			return nil, fmt.Errorf("vtysh: %v", err)
		}
		var doc struct {
			Routes map[string][]frrPath `json:"routes"`
		}
		if err := json.Unmarshal(out, &doc); err != nil {
			return nil, fmt.Errorf("FRR %s json: %v", af, err)
		}
		for p, ps := range doc.Routes {
			all[p] = ps
		}
	}
	return all, nil
}

// routes are the ToR's valid BGP routes: prefix -> sorted next hops (global ones).
func (r *torRouter) routes() (map[string][]string, error) {
	paths, err := r.paths()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for p, ps := range paths {
		for _, path := range ps {
			if !path.Valid {
				continue
			}
			for _, nh := range path.Nexthops {
				if nh.Scope != "link-local" {
					out[p] = append(out[p], nh.IP)
				}
			}
		}
		sort.Strings(out[p])
	}
	return out, nil
}

func (r *torRouter) isStale(prefix string) bool {
	paths, err := r.paths()
	if err != nil {
		return false
	}
	for _, p := range paths[prefix] {
		if p.Stale {
			return true
		}
	}
	return false
}

// waitRoutes waits until the ToR's routes are exactly want (every prefix, every next hop).
func (r *torRouter) waitRoutes(want map[string][]string) {
	r.t.Helper()
	var got map[string][]string
	err := eventually(30*time.Second, func() error {
		var err error
		if got, err = r.routes(); err != nil {
			return err
		}
		if len(got) != len(want) {
			return fmt.Errorf("ToR routes %v, want %v", got, want)
		}
		for p, hops := range want {
			h := append([]string(nil), hops...)
			sort.Strings(h)
			if !slices.Equal(got[p], h) {
				return fmt.Errorf("ToR routes %v, want %v", got, want)
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// outsideExec runs the testbox on the outside host (behind the ToR, off the fabric).
func outsideExec(cfg rig.Config, args ...string) (string, error) {
	return nsTestbox(cfg, cfg.OutsideNS(), args...)
}

// outsideStream runs a 100 ms probe stream from the outside host to ip, doing event 3 s in.
func outsideStream(cfg rig.Config, ip string, count int, event func()) (lost int, outage string, err error) {
	return nsStream(cfg, cfg.OutsideNS(), ip, count, 3*time.Second, event)
}

// nsTestbox runs the testbox binary in one of the rig's host namespaces (outside hosts, routers).
func nsTestbox(cfg rig.Config, ns string, args ...string) (string, error) {
	argv := append([]string{"netns", "exec", ns, filepath.Join(cfg.KovnBinDir, "kovn-testbox")}, args...)
	out, err := exec.Command("ip", argv...).CombinedOutput()
	return string(out), err
}

// nsStream runs a 100 ms probe stream from namespace ns to ip, doing event after delay.
func nsStream(cfg rig.Config, ns, ip string, count int, delay time.Duration, event func()) (lost int, outage string, err error) {
	done := make(chan string, 1)
	go func() {
		out, _ := nsTestbox(cfg, ns, "pingstream", "-c", fmt.Sprint(count), "-i", "100ms", "-W", "2s", ip)
		done <- out
	}()
	time.Sleep(delay)
	event()
	return parseStream(<-done, count)
}

// outsideSource is the outside host's address of u's family.
func outsideSource(cfg rig.Config, u string) string {
	if strings.Contains(u, "[") {
		return "[" + rig.OutsideHostIP6().String() + "]"
	}
	return rig.OutsideHostIP().String()
}

func peerName(ip netip.Addr) string {
	if ip.Is4() {
		return "tor-v4"
	}
	return "tor-v6"
}

// nodeIPsOf is, per family of the rig, the fabric addresses of cluster 1's nodes ns.
func nodeIPsOf(cfg rig.Config, ns ...int) [][]string {
	var out [][]string
	for f := range cfg.ToRIPs() {
		var hops []string
		for _, n := range ns {
			hops = append(hops, cfg.NodeIPs(1, n)[f].String())
		}
		sort.Strings(hops)
		out = append(out, hops)
	}
	return out
}

func familyIndex(cfg rig.Config, ip netip.Addr) int {
	for i, t := range cfg.ToRIPs() {
		if t.Is4() == ip.Is4() {
			return i
		}
	}
	return 0
}

// pick returns the values of the rig's families, in its order.
func pick(cfg rig.Config, v4, v6 string) []string {
	var out []string
	if cfg.HasIPv4() {
		out = append(out, v4)
	}
	if cfg.HasIPv6() {
		out = append(out, v6)
	}
	return out
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
