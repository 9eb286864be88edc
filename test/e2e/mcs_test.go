package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/interconnect/mcs"
	"github.com/kovn/kovn/test/rig"
)

// TestMultiClusterServices: three one-node clusters joined by OVN-IC. Service web (HTTP 80 ->
// 8080, in every family of the rig) runs in c1 (backend be1) and c2 (be2) and is exported from
// both; c3 only consumes. Every cluster, the exporters too, gets a ServiceImport whose
// ClusterSetIPs (one per family) are answered by one OVN load balancer with backends in both
// clusters; the backend sees the caller's pod address. Removing c1's backend leaves only be2;
// unexporting in c2 leaves only be1's cluster; the last unexport removes the import everywhere.
// An export into a namespace c3 lacks is imported there only once the namespace exists.
func TestMultiClusterServices(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 3, 1)
	cfg.Kovn = true
	r := upRig(t, cfg)
	var cs []*cluster
	for i := 1; i <= 3; i++ {
		c := newCluster(t, r, fmt.Sprintf("c%d", i))
		c.createNamespace("mcs")
		cs = append(cs, c)
	}
	for i, c := range cs {
		c.applyInterConnect(fmt.Sprintf("az%d", i+1), rig.NodeName(i+1, 1))
	}
	for _, c := range cs {
		c.waitInterConnect(func(s icStatus) error {
			if s.ready != "True" || len(s.peers) != 2 {
				return fmt.Errorf("ready %q (%s), peers %v", s.ready, s.message, s.peers)
			}
			return nil
		})
	}
	c1, c2, c3 := cs[0], cs[1], cs[2]
	for i, c := range cs[:2] {
		c.createPod(mcsBackend(fmt.Sprintf("be%d", i+1), rig.NodeName(i+1, 1)))
		c.createService(mcsService("web", map[string]string{"mcs": "web"}))
	}
	c3.createPod(testboxPod("mcs", "client", onNode(rig.NodeName(3, 1))))
	client := c3.waitRunning("mcs", "client", 90*time.Second)
	for i, c := range cs[:2] {
		c.waitRunning("mcs", fmt.Sprintf("be%d", i+1), 90*time.Second)
	}

	start := time.Now()
	c1.exportService("mcs", "web")
	c2.exportService("mcs", "web")
	var ips []string
	for _, c := range cs {
		si := c.waitImport("mcs", "web", func(si serviceImport) error {
			if len(si.Spec.IPs) != len(cfg.ServiceCIDRs(1)) || !slices.Equal(si.clusters(), []string{"az1", "az2"}) {
				return fmt.Errorf("ips %v, clusters %v", si.Spec.IPs, si.clusters())
			}
			return nil
		})
		if c == c3 {
			ips = si.Spec.IPs
		}
	}
	t.Logf("exported from c1 and c2: ServiceImport with ClusterSetIPs in all three clusters %.1fs later; c3's: %v", time.Since(start).Seconds(), ips)
	for i, c := range cs {
		out, err := c.kubectl("get", "clusterproperties.about.k8s.io", "cluster.clusterset.k8s.io", "-o", "jsonpath={.spec.value}")
		if want := fmt.Sprintf("az%d", i+1); err != nil || out != want {
			t.Errorf("%s: ClusterProperty cluster.clusterset.k8s.io = %q (%v), want %s (the AZ name when kovn created it)", c.info.Name, out, err, want)
		}
	}

	t.Run("metrics: each AZ sees its peers ready with their routes, the IC databases connected, the exports and imports", func(t *testing.T) {
		for i := 1; i <= 3; i++ {
			want := []string{fmt.Sprintf(`kovn_ic_local{az="az%d",item="ready"} 1`, i),
				`kovn_ovsdb_connected{db="ic-nb"} 1`, `kovn_ovsdb_connected{db="ic-sb"} 1`}
			for j := 1; j <= 3; j++ {
				if j != i {
					want = append(want, fmt.Sprintf(`kovn_ic_peer_ready{az="az%d"} 1`, j))
				}
			}
			switch i {
			case 1, 2:
				want = append(want, `kovn_mcs_service_exports{state="exported"} 1`)
			case 3:
				want = append(want, `kovn_mcs_service_exports{state="exported"} 0`)
			}
			want = append(want, `kovn_mcs_service_imports{type="ClusterSetIP"} 1`,
				`kovn_mcs_service_import_clusters{name="web",namespace="mcs"} 2`)
			waitControllerSeries(t, cfg, r, i, want...)
			out := controllerMetrics(t, cfg, r, i)
			for j := 1; j <= 3; j++ {
				// Each AZ advertises its pod and service CIDRs, both families.
				if n := value(out, fmt.Sprintf(`kovn_ic_peer_routes{az="az%d"}`, j)); j != i && n < 2 {
					t.Errorf("c%d: kovn_ic_peer_routes{az=\"az%d\"} = %v, want its pod and service CIDRs", i, j, n)
				}
			}
		}
		checkDashboardSeries(t, "kovn-controller", controllerMetrics(t, cfg, r, 1))
		checkDashboardSeries(t, "kovn-daemon", nodeTestbox(t, r.State, cfg.NodeNS(1, 1), "get", "http://127.0.0.1:9474/metrics"))
	})

	t.Run("a pod in c3 reaches backends in c1 and c2 through the ClusterSetIP, no NAT", func(t *testing.T) {
		c3.t = t
		start := time.Now()
		c3.waitBackendsOn(ips, []string{"be1", "be2"}, 60*time.Second)
		t.Logf("both clusters' backends answered on %v %.1fs after the import was complete", ips, time.Since(start).Seconds())
		for f, ip := range ips {
			out := c3.mustExec("mcs", "client", "get", "-n", "10", "http://"+hostPort(ip, 80)+"/")
			seen := strings.TrimSuffix(hostPort(client.Status.PodIPs[f].IP, 0), "0")
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if strings.HasPrefix(l, "be") && !strings.Contains(l, " "+seen) {
					t.Errorf("%s: backend answered %q, want it to see the client's pod address %s", ip, l, client.Status.PodIPs[f].IP)
				}
			}
		}
		for _, c := range cs[:2] {
			c.t = t
			if got := c.waitExportConditions("mcs", "web", "Valid=True Ready=True Conflict=False"); got != "" {
				t.Errorf("%s export conditions %q", c.info.Name, got)
			}
		}
	})

	t.Run("clusterset.local DNS: the ClusterSetIPs by name; a Service not exported does not resolve", func(t *testing.T) {
		c1.t, c3.t = t, t
		start := time.Now()
		for _, ip := range ips {
			qtype := map[bool]string{false: "A", true: "AAAA"}[strings.Contains(ip, ":")]
			for _, name := range []string{"web.mcs.svc.clusterset.local.", "web.mcs.svc.clusterset.local"} {
				c3.waitMCSLookup("client", name, qtype, []string{ip}, 20*time.Second)
			}
		}
		t.Logf("web.mcs.svc.clusterset.local answered with %v from c3 %.1fs after the import", ips, time.Since(start).Seconds())
		// SRV for the named port: one record, the service port.
		var out string
		if err := eventually(20*time.Second, func() error {
			out, _ = c3.exec("mcs", "client", "dns", "-W", "3s", "_http._tcp.web.mcs.svc.clusterset.local.", "SRV")
			if !strings.Contains(out, "SRV web.mcs.svc.clusterset.local. 80") || strings.Count(out, "\nSRV ") != 1 {
				return fmt.Errorf("no single SRV record for port 80")
			}
			return nil
		}); err != nil {
			t.Errorf("_http._tcp.web.mcs.svc.clusterset.local SRV: %v\n%s", err, out)
		}
		// A headless Service exported from both clusters: the ready pods of both by name.
		var want []string
		for i, c := range cs[:2] {
			hl := mcsService("hl", map[string]string{"mcs": "web"})
			hl.Spec.ClusterIP = corev1.ClusterIPNone
			if _, err := c.kc.CoreV1().Services("mcs").Create(context.Background(), hl, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			c.exportService("mcs", "hl")
			want = append(want, c.waitRunning("mcs", fmt.Sprintf("be%d", i+1), time.Minute).Status.PodIPs[0].IP)
		}
		c3.waitImport("mcs", "hl", func(si serviceImport) error {
			if si.Spec.Type != "Headless" || len(si.Spec.IPs) != 0 || len(si.clusters()) != 2 {
				return fmt.Errorf("type %s ips %v clusters %v", si.Spec.Type, si.Spec.IPs, si.clusters())
			}
			return nil
		})
		qtype := map[bool]string{false: "A", true: "AAAA"}[strings.Contains(want[0], ":")]
		c3.waitMCSLookup("client", "hl.mcs.svc.clusterset.local.", qtype, want, 20*time.Second)
		// Each pod by <hostname>.<cluster id>.hl.mcs.svc.clusterset.local.
		for i, ip := range want {
			c3.waitMCSLookup("client", fmt.Sprintf("be%d.az%d.hl.mcs.svc.clusterset.local.", i+1, i+1), qtype, []string{ip}, 20*time.Second)
		}
		t.Logf("_http._tcp SRV: port 80; headless hl: a Headless import without IPs, its name resolving to both clusters' pods %v, be1.az1.hl... and be2.az2.hl... to each", want)
		// c1 runs Service local-only too, never exported: cluster.local has it, clusterset.local not.
		local := mcsService("local-only", map[string]string{"mcs": "web"})
		localIPs := c1.createService(local)
		qtype = map[bool]string{false: "A", true: "AAAA"}[strings.Contains(localIPs[0], ":")]
		c1.waitMCSLookup("be1", "local-only.mcs.svc.cluster.local.", qtype, localIPs[:1], 20*time.Second)
		out, _ = c1.exec("mcs", "be1", "dns", "-W", "3s", "local-only.mcs.svc.clusterset.local.", qtype)
		if got := dnsAnswers(out, qtype); len(got) != 0 {
			t.Errorf("local-only.mcs.svc.clusterset.local (not exported) resolved to %v:\n%s", got, out)
		}
	})

	t.Run("c1's backend gone: only c2's answers", func(t *testing.T) {
		c1.t, c3.t = t, t
		c1.deletePod("mcs", "be1")
		start := time.Now()
		c3.waitBackendsOn(ips, []string{"be2"}, 60*time.Second)
		t.Logf("be1 deleted in c1: c3's ClusterSetIPs answered by be2 alone %.1fs later", time.Since(start).Seconds())
		recreateBe1(c1, c3, ips)
	})

	t.Run("az2's certificate deletes c1's export from the clusterset store: c1 puts it back and flags it", func(t *testing.T) {
		c1.t = t
		storeTampered(t, c1, cfg)
	})

	t.Run("conflicts: ports unioned and routed only to the clusters exposing them; headless against ClusterSetIP, the oldest wins", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		// c1 (older): {http 80, num 82}; c2: {http 80, alt 81, num 84}. The import unions the
		// ports by name and protocol, the oldest export's number winning (num/82); a cluster
		// serves an import port only where its own export has that port as it is (KEP-1645):
		// :80 both, :81 c2 alone, :82 c1 alone (c2's num is 84).
		mixed := func(inC2 bool) *corev1.Service {
			s := mcsService("mixed", map[string]string{"mcs": "web"})
			port := func(name string, n int32) corev1.ServicePort {
				return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: n, TargetPort: intstr.FromInt32(8080)}
			}
			if inC2 {
				s.Spec.Ports = append(s.Spec.Ports, port("alt", 81), port("num", 84))
			} else {
				s.Spec.Ports = append(s.Spec.Ports, port("num", 82))
			}
			return s
		}
		c1.createService(mixed(false))
		c2.createService(mixed(true))
		c1.exportService("mcs", "mixed")
		c1.waitImport("mcs", "mixed", func(serviceImport) error { return nil })
		c2.exportService("mcs", "mixed")
		si := c3.waitImport("mcs", "mixed", func(si serviceImport) error {
			if got := si.portList(); got != "alt/81,http/80,num/82" || len(si.Spec.IPs) == 0 {
				return fmt.Errorf("ports %s, ips %v", got, si.Spec.IPs)
			}
			return nil
		})
		for _, c := range cs[:2] {
			if got := c.waitExportConditions("mcs", "mixed", "Valid=True Ready=True Conflict=True(PortConflict)"); got != "" {
				t.Errorf("%s: export conditions %s", c.info.Name, got)
			}
		}
		ip := si.Spec.IPs[0]
		c3.waitBackends("mcs", "client", ip, []string{"be1", "be2"}, 60*time.Second)
		c3.waitBackendsAt("mcs", "client", hostPort(ip, 81), []string{"be2"}, 60*time.Second)
		c3.waitBackendsAt("mcs", "client", hostPort(ip, 82), []string{"be1"}, 60*time.Second)
		t.Logf("ports {http 80, num 82} in c1 (older) and {http 80, alt 81, num 84} in c2: import ports %s, :80 answered by be1 and be2, :81 by be2 alone, :82 by be1 alone; PortConflict on both exports", si.portList())

		hl := mcsService("kind", map[string]string{"mcs": "web"})
		c1.createService(hl)
		hl = mcsService("kind", map[string]string{"mcs": "web"})
		hl.Spec.ClusterIP = corev1.ClusterIPNone
		if _, err := c2.kc.CoreV1().Services("mcs").Create(context.Background(), hl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c1.exportService("mcs", "kind")
		c1.waitImport("mcs", "kind", func(serviceImport) error { return nil })
		c2.exportService("mcs", "kind")
		for _, c := range cs[:2] {
			if got := c.waitExportConditions("mcs", "kind", "Valid=True Ready=True Conflict=True(TypeConflict)"); got != "" {
				t.Errorf("%s: export conditions %s", c.info.Name, got)
			}
		}
		si = c3.waitImport("mcs", "kind", func(si serviceImport) error {
			if si.Spec.Type != "ClusterSetIP" || len(si.Spec.IPs) == 0 {
				return fmt.Errorf("type %s ips %v", si.Spec.Type, si.Spec.IPs)
			}
			return nil
		})
		c3.waitBackends("mcs", "client", si.Spec.IPs[0], []string{"be1", "be2"}, 60*time.Second)
		t.Logf("ClusterIP in c1 (older), headless in c2: a ClusterSetIP import answered by both, TypeConflict on both exports")

		// c2's Service mixed deleted, its export kept: NoService there, c2 withdrawn everywhere,
		// the import back to c1's ports, and c1's export no longer in conflict.
		if err := c2.kc.CoreV1().Services("mcs").Delete(context.Background(), "mixed", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c3.waitImport("mcs", "mixed", func(si serviceImport) error {
			if got := si.portList(); got != "http/80,num/82" || !slices.Equal(si.clusters(), []string{"az1"}) {
				return fmt.Errorf("ports %s, clusters %v", got, si.clusters())
			}
			return nil
		})
		if got := c2.waitExportConditions("mcs", "mixed", "Valid=False Ready=False"); got != "" {
			t.Errorf("c2: export of a deleted Service: conditions %s", got)
		}
		if got := c1.waitExportConditions("mcs", "mixed", "Valid=True Ready=True Conflict=False"); got != "" {
			t.Errorf("c1: export conditions once c2 withdrew: %s", got)
		}
		t.Logf("c2's Service mixed deleted: c3's import back to c1's ports and cluster %.1fs later; c2's export Valid=False (NoService), c1's conflict cleared", time.Since(start).Seconds())
	})

	t.Run("locality local-first: c1's client gets c1's endpoint alone, c2's once c1 has none, c1's again once back", func(t *testing.T) {
		mcsLocality(t, c1, c2, c3)
	})

	var peerIPs []string // c2's published x/a, in c1's policy peer sets
	t.Run("NetworkPolicy peers in other clusters: a 3x3 probe matrix over c1 and c2", func(t *testing.T) {
		peerIPs = clustersetPolicy(t, cfg, c1, c2)
	})

	t.Run("c1's kovn-controller killed: the import keeps answering, nothing rewritten, the new leader exports", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		// The conflicts above changed web's ports in c2 just now: c1's import must have settled
		// before the snapshot, or the new leader finishing that change reads as a rewrite.
		before := c1.settledImportVersions("mcs", "web")
		beforeYAML := c1.importYAML("mcs", "web")
		holder, takeover := killLeader(t, c1, c1.st)
		c3.waitBackendsOn(ips, []string{"be1", "be2"}, 10*time.Second)
		time.Sleep(5 * time.Second)
		if after := c1.importVersions("mcs", "web"); after != before {
			t.Errorf("the new leader rewrote c1's import of web:\n%s\nwas\n%s\nlines that changed (- before, + after):\n%s",
				after, before, changedLines(beforeYAML, c1.importYAML("mcs", "web")))
		}
		c1.deletePod("mcs", "be1")
		start := time.Now()
		c3.waitBackendsOn(ips, []string{"be2"}, 30*time.Second)
		t.Logf("new leader %s after %.1fs; c1's import untouched; be1 deleted after the takeover: gone from c3's ClusterSetIPs %.1fs later",
			holder, takeover.Seconds(), time.Since(start).Seconds())
		recreateBe1(c1, c3, ips)
	})

	t.Run("IC-SB (and the clusterset store beside it) restarted: imports kept while it is down, a change made meanwhile converges after", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		st := c1.st
		startICSB := stopICSB(t, st)
		defer func() { _ = startICSB() }()
		waitControllerSeries(t, cfg, r, 1, `kovn_ovsdb_connected{db="ic-sb"} 0`, `kovn_ovsdb_connected{db="ic-nb"} 1`)
		c3.waitBackendsOn(ips, []string{"be1", "be2"}, 10*time.Second)
		c1.deletePod("mcs", "be1") // while the store is down: c3 cannot learn it yet
		time.Sleep(3 * time.Second)
		if si, found, err := c3.getImport("mcs", "web"); err != nil || !found || len(si.Spec.IPs) == 0 {
			t.Fatalf("c3's import while the store is down: found %t, %+v, %v", found, si, err)
		}
		if peerIPs != nil {
			// Once c1 knows the store is away, a policy reconciled meanwhile keeps the last
			// known remote pods.
			c1.waitPeersCurrent("False")
			if out, err := c1.kubectl("annotate", "networkpolicy", "-n", "y", "from-az2-xa", "e2e.kovn.io/poke=while-the-store-is-away", "--overwrite"); err != nil {
				t.Fatalf("annotate: %v %s", err, out)
			}
			c1.stayInPeerSets(peerIPs, 3*time.Second)
		} else {
			t.Log("the clusterset policy subtest did not run: c1's policy peers not checked while IC-SB is down")
		}
		if err := startICSB(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c3.waitBackendsOn(ips, []string{"be2"}, 60*time.Second)
		t.Logf("IC-SB stopped: c3's import stayed and answered; be1 deleted meanwhile left c3's ClusterSetIPs %.1fs after IC-SB started again", time.Since(start).Seconds())
		waitControllerSeries(t, cfg, r, 1, `kovn_ovsdb_connected{db="ic-sb"} 1`)
		if peerIPs != nil {
			c1.waitPeersCurrent("True")
		}
		recreateBe1(c1, c3, ips)
	})

	t.Run("internalTrafficPolicy=Local: a client reaches only its own node's endpoints, none without one", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		local := corev1.ServiceInternalTrafficPolicyLocal
		for i, c := range []*cluster{c1, c2} {
			c.createPod(testboxPod("mcs", "client", onNode(rig.NodeName(i+1, 1))))
			c.waitRunning("mcs", "client", 90*time.Second)
			svc := mcsService("itp", map[string]string{"mcs": "web"})
			svc.Spec.InternalTrafficPolicy = &local
			c.createService(svc)
			c.exportService("mcs", "itp")
		}
		// Each cluster has one node: be1 is c1's client's node-local endpoint, be2 c2's; c3
		// has none. Another cluster's endpoint is never local, whatever its node is called.
		for _, tc := range []struct {
			c    *cluster
			want string
		}{{c1, "be1"}, {c2, "be2"}} {
			si := tc.c.waitImport("mcs", "itp", func(si serviceImport) error {
				if len(si.Spec.IPs) == 0 || !slices.Equal(si.clusters(), []string{"az1", "az2"}) {
					return fmt.Errorf("ips %v clusters %v", si.Spec.IPs, si.clusters())
				}
				return nil
			})
			for _, ip := range si.Spec.IPs {
				tc.c.waitBackends("mcs", "client", ip, []string{tc.want}, 30*time.Second)
				got := backendsSeen(tc.c.mustExec("mcs", "client", "get", "-n", "20", "http://"+hostPort(ip, 80)+"/"))
				if !equalSets(got, []string{tc.want}) {
					t.Fatalf("%s: 20 requests to the ITP=Local ClusterSetIP %s answered by %v, want %s alone", tc.c.info.Name, ip, got, tc.want)
				}
			}
		}
		si := c3.waitImport("mcs", "itp", func(si serviceImport) error {
			if len(si.Spec.IPs) == 0 {
				return fmt.Errorf("no ClusterSetIP yet")
			}
			return nil
		})
		// c3 holds both clusters' endpoints (so its load balancer is programmed), none local.
		if err := eventually(20*time.Second, func() error {
			out, err := c3.kubectl("get", "endpointslices", "-n", "mcs", "-l", "multicluster.kubernetes.io/service-name=itp",
				"-o", "jsonpath={.items[*].metadata.labels.multicluster\\.kubernetes\\.io/source-cluster}")
			if got := strings.Fields(out); err != nil || !slices.Contains(got, "az1") || !slices.Contains(got, "az2") {
				return fmt.Errorf("c3's slices of itp come from %q (%v)", out, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		for _, ip := range si.Spec.IPs {
			if out, _ := c3.exec("mcs", "client", "connect", hostPort(ip, 80)); strings.Contains(out, "connected") || !strings.Contains(out, "timeout") {
				t.Fatalf("c3 (no endpoint of its own) -> ITP=Local ClusterSetIP %s: want no answer: %s", ip, out)
			}
		}
		t.Logf("ITP=Local import: c1's client reached be1 alone, c2's be2 alone, c3's none")
		for _, c := range []*cluster{c1, c2} {
			c.unexportService("mcs", "itp")
		}
	})

	t.Run("unexport: c2's endpoints leave, the last unexport removes the import everywhere", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		c2.unexportService("mcs", "web")
		start := time.Now()
		c3.waitBackendsOn(ips, []string{"be1"}, 60*time.Second)
		t.Logf("unexported in c2: c3 reached be1 alone %.1fs later", time.Since(start).Seconds())
		c1.unexportService("mcs", "web")
		start = time.Now()
		for _, c := range cs {
			c.waitNoImport("mcs", "web", 20*time.Second)
		}
		t.Logf("unexported in c1 too: the import gone from all three clusters %.1fs later", time.Since(start).Seconds())
	})

	t.Run("an export into a namespace c3 lacks: imported there once it exists", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		c1.createNamespace("late")
		late := mcsService("late", map[string]string{"mcs": "web"})
		late.Namespace = "late"
		local := corev1.ServiceInternalTrafficPolicyLocal
		late.Spec.SessionAffinity, late.Spec.InternalTrafficPolicy = corev1.ServiceAffinityClientIP, &local
		late.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		c1.createService(late)
		c1.exportService("late", "late")
		out := ""
		if err := eventually(20*time.Second, func() error {
			var err error
			out, err = c1.kubectl("get", "serviceimports.multicluster.x-k8s.io", "-n", "late", "late", "-o",
				"jsonpath={.spec.sessionAffinity} {.spec.sessionAffinityConfig.clientIP.timeoutSeconds} {.spec.internalTrafficPolicy} {.spec.ipFamilies}")
			if want := "ClientIP 60 Local " + familiesJSON(cfg); err != nil || out != want {
				return fmt.Errorf("%q, want %q", out, want)
			}
			return nil
		}); err != nil {
			t.Fatalf("c1's import of late: affinity, timeout, traffic policy, families: %v", err)
		}
		time.Sleep(3 * time.Second)
		c3.waitNoImport("late", "late", time.Second)
		c3.createNamespace("late")
		start := time.Now()
		c3.waitImport("late", "late", func(si serviceImport) error {
			if len(si.Spec.IPs) == 0 {
				return fmt.Errorf("no ClusterSetIP yet")
			}
			return nil
		})
		t.Logf("namespace created in c3: import there %.1fs later", time.Since(start).Seconds())
	})

	t.Run("c2 leaves the clusterset: its endpoints leave every import, its own imports go", func(t *testing.T) {
		for _, c := range cs {
			c.t = t
		}
		c1.exportService("mcs", "web")
		c2.exportService("mcs", "web")
		c3.waitImport("mcs", "web", func(si serviceImport) error {
			if len(si.Spec.IPs) == 0 || !slices.Equal(si.clusters(), []string{"az1", "az2"}) {
				return fmt.Errorf("ips %v clusters %v", si.Spec.IPs, si.clusters())
			}
			return nil
		})
		si, _, _ := c3.getImport("mcs", "web")
		c3.waitBackends("mcs", "client", si.Spec.IPs[0], []string{"be1", "be2"}, 60*time.Second)
		if out, err := c2.kubectl("delete", "interconnect", "default", "--wait=false"); err != nil {
			t.Fatalf("delete c2's InterConnect: %v %s", err, out)
		}
		start := time.Now()
		c3.waitImport("mcs", "web", func(si serviceImport) error {
			if !slices.Equal(si.clusters(), []string{"az1"}) {
				return fmt.Errorf("clusters %v", si.clusters())
			}
			return nil
		})
		c3.waitBackends("mcs", "client", si.Spec.IPs[0], []string{"be1"}, 30*time.Second)
		t.Logf("c2's InterConnect deleted: c3's import lists az1 alone and only be1 answers %.1fs later", time.Since(start).Seconds())
		c2.waitNoImport("mcs", "web", 20*time.Second)
		c2.waitNoImport("mcs", "mixed", 20*time.Second)
	})
}

// portList is the import's ports as "name/port,..." in name order.
func (si serviceImport) portList() string {
	var out []string
	for _, p := range si.Spec.Ports {
		out = append(out, fmt.Sprintf("%s/%d", p.Name, p.Port))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// importVersions are the resourceVersions of the ServiceImport ns/name, its derived Service
// and its EndpointSlices: equal strings mean nothing of that import was rewritten.
func (c *cluster) importVersions(ns, name string) string {
	c.t.Helper()
	cols := "custom-columns=KIND:.kind,NAME:.metadata.name,RV:.metadata.resourceVersion"
	out, err := c.kubectl("get", "serviceimports.multicluster.x-k8s.io/"+name, "services/"+mcs.DerivedName(name), "-n", ns, "-o", cols, "--no-headers")
	if err != nil {
		c.t.Fatalf("%v %s", err, out)
	}
	slices, err := c.kubectl("get", "endpointslices", "-n", ns, "-l", "multicluster.kubernetes.io/service-name="+name, "-o", cols, "--no-headers")
	if err != nil {
		c.t.Fatalf("%v %s", err, slices)
	}
	return out + slices
}

// settledImportVersions is importVersions once it has stayed the same for 3 s (up to 30 s).
func (c *cluster) settledImportVersions(ns, name string) string {
	c.t.Helper()
	last, since := c.importVersions(ns, name), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Since(since) < 3*time.Second; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s's import of %s/%s still changing after 30 s:\n%s", c.info.Name, ns, name, last)
		}
		if now := c.importVersions(ns, name); now != last {
			last, since = now, time.Now()
		}
	}
	return last
}

// importYAML is the import's objects as YAML, for a failure's diff.
func (c *cluster) importYAML(ns, name string) string {
	out, _ := c.kubectl("get", "serviceimports.multicluster.x-k8s.io/"+name, "services/"+mcs.DerivedName(name), "-n", ns, "-o", "yaml")
	slices, _ := c.kubectl("get", "endpointslices", "-n", ns, "-l", "multicluster.kubernetes.io/service-name="+name, "-o", "yaml")
	return out + slices
}

// changedLines lists the lines only one of two texts has, resourceVersions and managedFields'
// times left out: what a rewrite changed.
func changedLines(before, after string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			if t := strings.TrimSpace(l); !strings.HasPrefix(t, "resourceVersion:") && !strings.HasPrefix(t, "time:") {
				m[l]++
			}
		}
		return m
	}
	b, a := count(before), count(after)
	var out []string
	for l, n := range b {
		if a[l] < n {
			out = append(out, "- "+l)
		}
	}
	for l, n := range a {
		if b[l] < n {
			out = append(out, "+ "+l)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// mcsService is the exported Service: HTTP 80 -> 8080 in every family of the rig.
func mcsService(name string, selector map[string]string) *corev1.Service {
	dual := corev1.IPFamilyPolicyPreferDualStack
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs", Name: name}, Spec: corev1.ServiceSpec{
		Selector: selector, IPFamilyPolicy: &dual,
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
}

func (c *cluster) exportService(ns, name string) {
	c.t.Helper()
	y := fmt.Sprintf("apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {namespace: %s, name: %s}\n", ns, name)
	if out, err := c.apply(y); err != nil {
		c.t.Fatalf("export %s/%s: %v\n%s", ns, name, err, out)
	}
}

// exportServiceAnnotated exports ns/name with the annotations given as YAML flow entries
// ("key: value, ...").
func (c *cluster) exportServiceAnnotated(ns, name, annotations string) {
	c.t.Helper()
	y := fmt.Sprintf("apiVersion: multicluster.x-k8s.io/v1beta1\nkind: ServiceExport\nmetadata: {namespace: %s, name: %s, annotations: {%s}}\n", ns, name, annotations)
	if out, err := c.apply(y); err != nil {
		c.t.Fatalf("export %s/%s: %v\n%s", ns, name, err, out)
	}
}

func (c *cluster) unexportService(ns, name string) {
	c.t.Helper()
	if out, err := c.kubectl("delete", "serviceexports.multicluster.x-k8s.io", "-n", ns, name); err != nil {
		c.t.Fatalf("unexport %s/%s: %v\n%s", ns, name, err, out)
	}
}

// serviceImport is what the tests read of a ServiceImport.
type serviceImport struct {
	Spec struct {
		IPs   []string `json:"ips"`
		Type  string   `json:"type"`
		Ports []struct {
			Name string `json:"name"`
			Port int    `json:"port"`
		} `json:"ports"`
	} `json:"spec"`
	Status struct {
		Clusters []struct {
			Cluster string `json:"cluster"`
		} `json:"clusters"`
	} `json:"status"`
}

func (si serviceImport) clusters() []string {
	var out []string
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

func (c *cluster) getImport(ns, name string) (serviceImport, bool, error) {
	var si serviceImport
	out, err := c.kubectl("get", "serviceimports.multicluster.x-k8s.io", "-n", ns, name, "-o", "json", "--ignore-not-found")
	if err != nil || strings.TrimSpace(out) == "" {
		return si, false, err
	}
	return si, true, json.Unmarshal([]byte(out), &si)
}

// waitImport waits (20 s, the mcs-api conformance limit) for the ServiceImport to exist and
// satisfy ok.
func (c *cluster) waitImport(ns, name string, ok func(serviceImport) error) serviceImport {
	c.t.Helper()
	var si serviceImport
	err := eventually(20*time.Second, func() error {
		var found bool
		var err error
		if si, found, err = c.getImport(ns, name); err != nil || !found {
			return fmt.Errorf("no ServiceImport (%v)", err)
		}
		return ok(si)
	})
	if err != nil {
		c.t.Fatalf("%s: ServiceImport %s/%s: %v", c.info.Name, ns, name, err)
	}
	return si
}

func (c *cluster) waitNoImport(ns, name string, timeout time.Duration) {
	c.t.Helper()
	err := eventually(timeout, func() error {
		if _, found, err := c.getImport(ns, name); err != nil || found {
			return fmt.Errorf("ServiceImport still there (%v)", err)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("%s: %s/%s: %v", c.info.Name, ns, name, err)
	}
}

// waitExportConditions waits (20 s) until the ServiceExport's Valid, Ready and Conflict
// conditions read want ("Valid=True Ready=True Conflict=True(PortConflict)": a True Conflict
// with its reason); it returns "" or what they read last.
func (c *cluster) waitExportConditions(ns, name, want string) string {
	c.t.Helper()
	var last string
	err := eventually(20*time.Second, func() error {
		var se struct {
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		out, err := c.kubectl("get", "serviceexports.multicluster.x-k8s.io", "-n", ns, name, "-o", "json")
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(out), &se); err != nil {
			return err
		}
		var parts []string
		for _, t := range []string{"Valid", "Ready", "Conflict"} {
			for _, cond := range se.Status.Conditions {
				if cond.Type == t {
					p := t + "=" + string(cond.Status)
					if t == "Conflict" && cond.Status == metav1.ConditionTrue {
						p += "(" + cond.Reason + ")"
					}
					parts = append(parts, p)
				}
			}
		}
		if last = strings.Join(parts, " "); last != want {
			return fmt.Errorf("%s", last)
		}
		return nil
	})
	if err != nil {
		return last
	}
	return ""
}

// familiesJSON is how kubectl's jsonpath prints the import's ipFamilies: the rig's families,
// primary first.
func familiesJSON(cfg rig.Config) string {
	var fs []string
	for _, p := range cfg.ServiceCIDRs(1) {
		if p.Addr().Is4() {
			fs = append(fs, `"IPv4"`)
		} else {
			fs = append(fs, `"IPv6"`)
		}
	}
	return "[" + strings.Join(fs, ",") + "]"
}

// waitMCSLookup repeats a lookup from pod (namespace mcs) until its records are exactly want.
func (c *cluster) waitMCSLookup(pod, name, qtype string, want []string, timeout time.Duration) {
	c.t.Helper()
	var out string
	err := eventually(timeout, func() error {
		var err error
		out, err = c.exec("mcs", pod, "dns", "-W", "3s", name, qtype)
		if got := dnsAnswers(out, qtype); err != nil || !equalSets(got, want) {
			return fmt.Errorf("got %v (%v), want %v", got, err, want)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("%s: lookup %s %s: %v\n%s", c.info.Name, name, qtype, err, out)
	}
}

// waitBackendsOn waits until the client pod in namespace mcs is answered on every one of
// ips by exactly the backends want.
func (c *cluster) waitBackendsOn(ips, want []string, timeout time.Duration) {
	c.t.Helper()
	for _, ip := range ips {
		c.waitBackends("mcs", "client", ip, want, timeout)
	}
}

// recreateBe1 starts c1's backend be1 again and waits until c3's client reaches both
// clusters' backends through the ClusterSetIPs again.
func recreateBe1(c1, c3 *cluster, ips []string) {
	c1.t.Helper()
	c1.createPod(mcsBackend("be1", rig.NodeName(1, 1)))
	c1.waitRunning("mcs", "be1", 90*time.Second)
	c3.waitBackendsOn(ips, []string{"be1", "be2"}, 60*time.Second)
}

// mcsBackend is a testbox backend of Service web in namespace mcs.
func mcsBackend(name, node string) *corev1.Pod {
	p := backendPod(name, node, map[string]string{"mcs": "web"})
	p.Namespace = "mcs"
	p.Spec.Hostname, p.Spec.Subdomain = name, "hl" // a name of its own under the headless Service hl
	return p
}
