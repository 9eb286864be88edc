package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/contract"
	"github.com/kovn/kovn/test/rig"
)

// TestInterconnectSet: four two-node clusters (n1 the gateway, the test pods on n2, so every
// path takes the hop to the gateway on both sides) whose IC-NB and IC-SB are 3-member raft
// clusters. Clusters 1-3 join one after the other and every pod reaches the other two (ping
// and HTTP in every family, the server seeing the client's pod address). Cluster
// 4 has a subnet inside cluster 1's pod CIDR when it joins: cluster 4, the later AZ, withdraws
// it and says so, cluster 1 names the conflict too, clusters 2 and 3 never route the prefix to
// cluster 4, and all four keep talking (cluster 4 still reaches cluster 1's pods: its own /24
// wins only for its own addresses). The subnet deleted, both conditions clear. Then the raft
// leader of IC-SB, and after it of IC-NB, is killed under a probe stream: no probe lost, a new
// subnet's route reaches the other clusters through the new leader (time printed), the killed
// member rejoins and IC-SB holds no duplicate route. Last, cluster 4 leaves: its routes are
// gone from the other three within 5 s.
func TestInterconnectSet(t *testing.T) {
	cfg := rigConfig(t, 4, 2)
	cfg.Kovn = true
	cfg.ICRaft = true
	r := upRig(t, cfg)
	var cs []*cluster
	var pods []string // first address of each cluster's pod
	for i := 1; i <= 4; i++ {
		c := newCluster(t, r, fmt.Sprintf("c%d", i))
		c.createPod(testboxPod("default", "p", onNode(rig.NodeName(i, 2))))
		cs = append(cs, c)
	}
	for i := 1; i <= 3; i++ {
		c := cs[i-1]
		c.applyInterConnect(fmt.Sprintf("az%d", i), rig.NodeName(i, 1))
		c.waitInterConnect(func(s icStatus) error {
			if s.ready != "True" || len(s.peers) != i-1 {
				return fmt.Errorf("ready %q (%s), peers %v", s.ready, s.message, s.peers)
			}
			return nil
		})
	}
	var podIPs [][]string // every address of each cluster's pod, in the rig's family order
	for _, c := range cs {
		p := c.waitRunning("default", "p", 90*time.Second)
		pods = append(pods, p.Status.PodIPs[0].IP)
		var ips []string
		for _, a := range p.Status.PodIPs {
			ips = append(ips, a.IP)
		}
		podIPs = append(podIPs, ips)
	}
	for i, c := range cs[:3] {
		c.waitLearned(cfg, i+1, 3)
	}
	c1, c4 := cs[0], cs[3]
	meshPing := func(t *testing.T, n int) {
		for i, c := range cs[:n] {
			c.t = t
			for j, ip := range pods[:n] {
				if i != j {
					c.pingNewPeer("default", "p", ip)
				}
			}
		}
	}
	t.Run("three clusters: every pod reaches the other two", func(t *testing.T) {
		// IC-SB shows a route before every node of every cluster has its tunnels to the new
		// AZ's gateway and ovn-ic's route in NB: the set converges first (time printed).
		start := time.Now()
		waitMesh(t, cs[:3], pods[:3])
		// An upper bound: the 6 pings run one after another, each through kubectl exec (about
		// 0.5 s apiece); TestInterconnectBench times the first packet itself (170-280 ms).
		t.Logf("every pod answered the other clusters' pods %.1fs after the last cluster's routes were learned (6 kubectl exec pings in a row)", time.Since(start).Seconds())
		meshPing(t, 3)
		// Each gateway's daemon copied the transit keys into Open_vSwitch (what makes its
		// ovn-controller rebuild physical flows after ovn-ic re-keyed a transit port).
		for i := 1; i <= 3; i++ {
			out, err := exec.Command("ovs-vsctl", "--db=unix:"+cfg.OVSDBSocket(i, 1), "--if-exists", "get", "Open_vSwitch", ".",
				"external_ids:kovn-ic-transit-keys").CombinedOutput()
			if want := fmt.Sprintf("kovn-ts-az%d=", i); err != nil || !strings.Contains(string(out), want) {
				t.Errorf("c%d-n1 Open_vSwitch external_ids:kovn-ic-transit-keys = %q (%v), want it to name %s<key>", i, out, err, want)
			}
		}
		// Every family, ping and TCP (HTTP), and the server sees the client's own pod address.
		for i, c := range cs[:3] {
			for j := range 3 {
				for f, ip := range podIPs[j] {
					if i == j {
						continue
					}
					c.pingNewPeer("default", "p", ip)
					out := c.mustExec("default", "p", "get", "http://"+hostPort(ip, 8080)+"/")
					if seen := strings.TrimSuffix(hostPort(podIPs[i][f], 0), "0"); !strings.Contains(out, " "+seen) {
						t.Errorf("HTTP c%d -> %s: the server saw %q, want the client's pod address %s (no NAT)", i+1, ip, out, podIPs[i][f])
					}
				}
			}
		}
		t.Logf("ping and HTTP between the three clusters' pods in %d famil(ies), no NAT", len(podIPs[0]))
	})

	t.Run("a cluster advertising a route inside another's pod CIDR captures nothing", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		capturedRoute(t, cs[0], cs[2], pods)
	})

	b := rig.PodCIDR(1).Addr().As4()
	b[2] = 200
	clash := netip.PrefixFrom(netip.AddrFrom4(b), 24) // inside c1's IPv4 pod CIDR
	t.Run("cluster 4 joins with a subnet inside cluster 1's pod CIDR: it withdraws it, both name the conflict, all keep talking", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		c4.createSubnet("clash", clash)
		// Existing traffic between c2 and c1 (through both gateways, which each get a tunnel
		// to c4's gateway) loses nothing while c4 joins and the set converges: a probe stream
		// covers the join, the conflict and the new mesh.
		var start time.Time
		var learned, meshed time.Duration
		// At most 60 s of probes (the stream stops 5 s after the mesh answers): CI once took
		// 27 s to mesh under load, past the 30 s the shared stream length allowed.
		const joinProbes = 600
		stream := cs[1].streamUntil("default", "p", pods[0], joinProbes, 100*time.Millisecond, func() {
			start = time.Now()
			c4.applyInterConnect("az4", rig.NodeName(4, 1))
			c4.waitRoutesAccepted("False", clash.String(), "withdrawn here")
			c1.waitRoutesAccepted("False", clash.String(), "az4")
			t.Logf("conflict named by c4 (withdrawing %s) and c1 %.1fs after c4's InterConnect was created", clash, time.Since(start).Seconds())
			for i, c := range cs {
				c.waitLearned(cfg, i+1, 4) // c2 and c3 never learn the clash from c4
			}
			learned = time.Since(start)
			waitMesh(t, cs, pods)
			meshed = time.Since(start)
		}, func() {}) // settled once the mesh answered
		// The join's window: from the InterConnect (3 s into the stream) to 3 s after the mesh
		// answered. Every probe in it must come back. After it the set is settled; CI once
		// lost one probe there, 19 s after the mesh, with no port, flow or BFD change logged on
		// any node (the lab's unexplained background loss: 2 probes in about 12,300 this
		// month): one such probe is logged, more fail.
		last := int((3*time.Second + meshed + 3*time.Second) / (100 * time.Millisecond))
		sent, lost, outage, err := parseStreamSent(stream, last, joinProbes, 100*time.Millisecond)
		within, after := lostSplit(stream, last)
		if err != nil || within != 0 || after > 1 || lost != within+after {
			t.Fatalf("c2 -> c1 across c4's join: %d of %d probes lost (%d up to seq %d, the join's window; want 0, and at most 1 after it; longest outage %s), the mesh %.1fs after the join (the stream covers at most 60 s): %v\n%s",
				lost, sent, within, last, outage, meshed.Seconds(), err, stream)
		}
		if after > 0 {
			t.Logf("c2 -> c1: %d probe lost after the join's window (seq > %d, %s): not the join's; background loss, logged", after, last, outage)
		}
		t.Logf("routes learned %.1fs and every pod of the four clusters answered the others %.1fs after c4's InterConnect was created; c2 -> c1 lost 0 of %d probes across it",
			learned.Seconds(), meshed.Seconds(), sent)
		// The new pairs, c4 to and from each of the others, answer every request but perhaps
		// the first to a new tunnel peer.
		for i, c := range cs {
			for j, ip := range pods {
				if i != j && (i == 3 || j == 3) {
					c.pingNewPeer("default", "p", ip)
				}
			}
		}
	})
	t.Run("the subnet deleted: the conflict clears on both", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		if out, err := c4.kubectl("delete", "subnet", "clash", "--wait=true", "--timeout=30s"); err != nil {
			t.Fatalf("delete subnet: %v %s", err, out)
		}
		c4.waitRoutesAccepted("True", "", "")
		c1.waitRoutesAccepted("True", "", "")
	})
	for k, db := range []struct{ name, dbName string }{{"icsb", "OVN_IC_Southbound"}, {"icnb", "OVN_IC_Northbound"}} {
		t.Run(fmt.Sprintf("the %s raft leader killed: no probe lost, a new subnet's route crosses through the new leader", db.dbName), func(t *testing.T) {
			for _, c := range cs {
				c.t = t
			}
			icRaftLeaderKill(t, r.State, cs, db.name, db.dbName, netip.MustParsePrefix(fmt.Sprintf("10.40.%d.0/24", k+1)), pods[1])
			if db.name == "icsb" { // the same servers carry kovn's clusterset store
				clustersetServed(t, cfg)
			}
		})
	}
	t.Run("cluster 4 leaves: its routes are gone from the other three within 5 s", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		start := time.Now()
		if out, err := c4.kubectl("delete", "interconnect", "default", "--wait=false"); err != nil {
			t.Fatalf("delete interconnect: %v %s", err, out)
		}
		gone := make([]time.Duration, 3)
		if err := eventually(20*time.Second, func() error {
			for i, c := range cs[:3] {
				if gone[i] != 0 {
					continue
				}
				s := c.interConnectStatus()
				if slices.Contains(s.peers, "az4") || slices.ContainsFunc(s.peerRoutes, func(p string) bool {
					return slices.Contains(prefixStrings(cfg.PodCIDRs(4)), p)
				}) {
					return fmt.Errorf("c%d still has az4: peers %v routes %v", i+1, s.peers, s.peerRoutes)
				}
				gone[i] = time.Since(start)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i, d := range gone {
			if d > 5*time.Second {
				t.Errorf("c%d forgot az4's routes after %.1fs, want < 5 s", i+1, d.Seconds())
			}
		}
		t.Logf("az4 gone from c1, c2, c3 after %.1fs, %.1fs, %.1fs", gone[0].Seconds(), gone[1].Seconds(), gone[2].Seconds())
		meshPing(t, 3)
	})
}

// waitLearned waits until cluster cl (c) of the first n clusters learned exactly the pod
// subnets of the other n-1 (and the test's extra subnets).
func (c *cluster) waitLearned(cfg rig.Config, cl, n int, extra ...netip.Prefix) {
	c.t.Helper()
	var want []string
	for j := 1; j <= n; j++ {
		if j != cl {
			want = append(want, prefixStrings(cfg.PodCIDRs(j))...)
		}
	}
	want = append(want, prefixStrings(extra)...)
	slices.Sort(want)
	c.waitInterConnect(func(s icStatus) error {
		if !slices.Equal(s.peerRoutes, want) {
			return fmt.Errorf("routes learned %v, want %v", s.peerRoutes, want)
		}
		return nil
	})
}

// waitMesh waits (60 s a pair) until every cluster's pod p answers one ping from every
// other's. It has taken 6-8 s after the routes were learned; once (of about ten runs) c1 never
// reached a joining c4 in 30 s, cause unknown: a failure prints the path's OVN state.
func waitMesh(t *testing.T, cs []*cluster, pods []string) {
	t.Helper()
	for i, c := range cs {
		for j, ip := range pods {
			if i == j {
				continue
			}
			answered := func() error {
				out, err := c.exec("default", "p", "ping", "-c", "1", "-W", "1s", ip)
				if err != nil || !strings.Contains(out, "1 received") {
					return fmt.Errorf("c%d -> %s: %v %s", i+1, ip, err, out)
				}
				return nil
			}
			if err := eventually(60*time.Second, answered); err != nil {
				diag := c.pathDiagnostics("default", "p", ip)
				diag += cs[j].transitBindings() + c.transitBindings()
				t.Fatalf("%v\n%s\n%s", err, diag, meshRemedies(c.st.Config, i+1, j+1, answered))
			}
		}
	}
}

// meshRemedies is for a pair that never answered: the datapath state of both clusters' nodes,
// then which remedy, least invasive first, makes the ping answer: purging every node's
// datapath flows, then a full ovn-controller recompute node by node (gateways first). The test
// still fails; this says which layer, on which node, held the stale state.
func meshRemedies(cfg rig.Config, src, dst int, answered func() error) string {
	var b strings.Builder
	type node struct{ cl, n int }
	var nodes []node
	for n := 1; n <= cfg.Nodes; n++ {
		for _, cl := range []int{src, dst} {
			nodes = append(nodes, node{cl, n})
			fmt.Fprintf(&b, "datapath of %s:\n%s", rig.NodeName(cl, n), cfg.DatapathDiagnostics(cl, n))
		}
	}
	type remedy struct {
		name string
		do   func() error
	}
	var remedies []remedy
	for _, x := range nodes {
		remedies = append(remedies, remedy{"revalidator/purge on " + rig.NodeName(x.cl, x.n), func() error { return cfg.PurgeDatapathFlows(x.cl, x.n) }})
	}
	for _, x := range nodes {
		remedies = append(remedies, remedy{"ovn-controller recompute on " + rig.NodeName(x.cl, x.n), func() error { return cfg.RecomputeOVNController(x.cl, x.n) }})
	}
	for _, r := range remedies {
		if err := r.do(); err != nil {
			fmt.Fprintf(&b, "remedy %s: %v\n", r.name, err)
			continue
		}
		if err := eventually(5*time.Second, answered); err == nil {
			fmt.Fprintf(&b, "remedy %s: the ping answers now\n", r.name)
			return b.String()
		}
		fmt.Fprintf(&b, "remedy %s: still no answer\n", r.name)
	}
	return b.String()
}

// transitBindings are c's southbound bindings of the transit ports (keys, external_ids) and
// NB's transit router ports, for a failed mesh.
func (c *cluster) transitBindings() string {
	var b strings.Builder
	for _, args := range [][]string{
		{"ovn-sbctl", "--db=" + c.info.SBAddr, "--timeout=5", "--columns=logical_port,type,tunnel_key,external_ids,options", "list", "Port_Binding"},
		{"ovn-nbctl", "--db=" + c.info.NBAddr, "--timeout=5", "--columns=name,external_ids", "list", "Logical_Router_Port"},
		{"ovn-nbctl", "--db=" + c.info.NBAddr, "--timeout=5", "--columns=name,options", "list", "Logical_Switch_Port"},
	} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		fmt.Fprintf(&b, "[%s] $ %s\n", c.info.Name, strings.Join(args, " "))
		for _, blk := range strings.Split(string(out), "\n\n") {
			if strings.Contains(blk, "kovn-ts") {
				b.WriteString(blk + "\n")
			}
		}
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

// pathDiagnostics is what OVN holds for the path from pod ns/name to dst in c: the router's
// routes and policies, the transit switches' remote ports and the remote chassis (with their
// encaps), and ovn-trace of one ICMP echo (IPv4 only).
func (c *cluster) pathDiagnostics(ns, name, dst string) string {
	var b strings.Builder
	run := func(cmd string, args ...string) {
		out, err := exec.Command(cmd, args...).CombinedOutput()
		fmt.Fprintf(&b, "$ %s %s\n%s", cmd, strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	nb, sb := "--db="+c.info.NBAddr, "--db="+c.info.SBAddr
	run("ovn-nbctl", nb, "--timeout=5", "lr-route-list", "ovn-cluster")
	run("ovn-nbctl", nb, "--timeout=5", "lr-policy-list", "ovn-cluster")
	run("ovn-sbctl", sb, "--timeout=5", "--columns=logical_port,type,chassis,up,options", "find", "Port_Binding", "type=remote")
	run("ovn-sbctl", sb, "--timeout=5", "--columns=name,encaps,other_config", "list", "Chassis")
	run("ovn-sbctl", sb, "--timeout=5", "--columns=ip,type", "list", "Encap")
	out, _ := c.kubectl("get", "pod", "-n", ns, name, "-o", "jsonpath={.status.podIP} {.metadata.annotations.ovn\\.kovn\\.io/mac_address} {.spec.nodeName}")
	f := strings.Fields(out)
	if len(f) != 3 || strings.Contains(dst, ":") {
		return b.String()
	}
	gw := topology.RouterMAC(topology.RouterPortName("ovn-cluster", "ovn-default"))
	run("ovn-trace", sb, "--summary", fmt.Sprintf(
		`inport == "%s.%s" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && icmp4.type == 8`,
		name, ns, f[1], gw, f[0], dst))
	// The same echo through the node's OpenFlow tables: what the datapath does with it.
	var cl, n int
	if _, err := fmt.Sscanf(f[2], "c%d-n%d", &cl, &n); err == nil {
		cfg := c.st.Config
		ofport, _ := exec.Command("ovs-vsctl", "--db=unix:"+cfg.OVSDBSocket(cl, n), "--bare", "--columns=ofport", "find", "Interface",
			"external_ids:iface-id="+contract.PodPortName(ns, name)).CombinedOutput()
		run("ovs-appctl", "-t", filepath.Join(filepath.Dir(cfg.OVSDBSocket(cl, n)), "ovs-vswitchd.ctl"), "ofproto/trace", "br-int",
			fmt.Sprintf("in_port=%s,icmp,dl_src=%s,dl_dst=%s,nw_src=%s,nw_dst=%s,nw_ttl=64,icmp_type=8", strings.TrimSpace(string(ofport)), f[1], gw, f[0], dst))
		run("ovs-vsctl", "--db=unix:"+cfg.OVSDBSocket(cl, n), "--columns=name,ofport,options,bfd_status", "find", "Interface", "type=geneve")
	}
	return b.String()
}

func (c *cluster) createSubnet(name string, cidr netip.Prefix) {
	c.t.Helper()
	c.createNamespace(name)
	if out, err := c.apply(fmt.Sprintf("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: %s}\nspec: {cidrBlock: %q, namespaces: [%s]}\n", name, cidr, name)); err != nil {
		c.t.Fatalf("create subnet %s: %v %s", name, err, out)
	}
}

// waitRoutesAccepted waits for the InterConnect's RoutesAccepted condition to have status and
// a message holding every one of words.
func (c *cluster) waitRoutesAccepted(status string, words ...string) {
	c.t.Helper()
	var out string
	err := eventually(60*time.Second, func() error {
		out, _ = c.kubectl("get", "interconnect", "default", "-o",
			`jsonpath={.status.conditions[?(@.type=="RoutesAccepted")].status}|{.status.conditions[?(@.type=="RoutesAccepted")].message}`)
		st, msg, _ := strings.Cut(out, "|")
		if st != status {
			return fmt.Errorf("RoutesAccepted %q", out)
		}
		for _, w := range words {
			if !strings.Contains(msg, w) {
				return fmt.Errorf("RoutesAccepted message %q lacks %q", msg, w)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("%s: %v", c.info.Name, err)
	}
}

// clustersetServed checks that the IC-SB servers serve kovn's OVN_ClusterSet database: a
// Cluster row inserted through the first member is read back through the last, then deleted.
func clustersetServed(t *testing.T, cfg rig.Config) {
	t.Helper()
	eps := strings.Split(cfg.ICSBLocal(), ",")
	client := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", cfg.ICNS(), "ovsdb-client", "--timeout=10"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovsdb-client %v: %v %s", args, err, out)
		}
		return string(out)
	}
	if out := client("list-dbs", eps[0]); !strings.Contains(out, "OVN_ClusterSet") {
		t.Fatalf("the IC-SB server at %s serves %q, want OVN_ClusterSet too", eps[0], out)
	}
	client("transact", eps[0], `["OVN_ClusterSet",{"op":"insert","table":"Cluster","row":{"name":"e2e-probe","availability_zone":"none"}}]`)
	if err := eventually(10*time.Second, func() error {
		if out := client("dump", eps[len(eps)-1], "OVN_ClusterSet", "Cluster"); !strings.Contains(out, "e2e-probe") {
			return fmt.Errorf("row not read back through %s: %s", eps[len(eps)-1], out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	client("transact", eps[0], `["OVN_ClusterSet",{"op":"delete","table":"Cluster","where":[["name","==","e2e-probe"]]}]`)
	t.Logf("OVN_ClusterSet served by the IC-SB server(s): written through %s, read through %s", eps[0], eps[len(eps)-1])
}

// capturedRoute: c3 (az3) gives its router a static route for the /24 (/120) of c2's pod CIDR that
// holds c2's pod, which ovn-ic advertises to the clusterset as az3's. It is outside what az3
// declared (and inside what az2 declared): c1 refuses it (RoutesAccepted False, RouteRefused,
// naming it), never installs it, and its pod keeps reaching c2's pod, which the longer route
// would otherwise have sent to c3.
func capturedRoute(t *testing.T, c1, c3 *cluster, pods []string) {
	victim := netip.MustParseAddr(pods[1])
	prefix := netip.PrefixFrom(victim, 24).Masked()
	if victim.Is6() { // an IPv6-only lab: still far longer than the pod CIDR's /64
		prefix = netip.PrefixFrom(victim, 120).Masked()
	}
	c3.nbctl("--may-exist", "lr-route-add", "ovn-cluster", prefix.String(), pods[2])
	defer c3.nbctl("--if-exists", "lr-route-del", "ovn-cluster", prefix.String())
	c1.waitRoutesAccepted("False", prefix.String()+" from az3 (outside its declared subnets")
	routes := c1.nbctl("lr-route-list", "ovn-cluster")
	if strings.Contains(routes, prefix.String()) {
		t.Errorf("c1's router holds az3's refused %s:\n%s", prefix, routes)
	}
	c1.ping("default", "p", victim.String())
	ev, _ := c1.kubectl("get", "events", "-A", "--field-selector", "reason=RouteRefused", "-o", "name")
	if strings.TrimSpace(ev) == "" {
		t.Errorf("c1: no RouteRefused event")
	}
	t.Logf("az3's %s (inside az2's pod CIDR) refused by c1 and not installed; c1 -> c2's pod %s answered", prefix, victim)
}
