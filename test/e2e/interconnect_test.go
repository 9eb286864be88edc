package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/test/rig"
)

// TestInterconnect: two clusters of three nodes, each joined to the clusterset by an
// InterConnect (nodes 1 and 2 gateways, 1 preferred). Pods on node 3 reach pods of the other
// cluster in every family the rig carries, by ping and HTTP, and the server sees the client's
// pod address (no NAT); each cluster learns exactly the other's pod subnets (the join subnet,
// node addresses and transit network never cross); the active gateway's fabric link cut,
// traffic resumes through the standby (outage printed from a 100 ms probe stream), and comes
// back when the link does; one InterConnect deleted takes its cluster out: the other forgets
// its routes.
func TestInterconnect(t *testing.T) {
	cfg := rigConfig(t, 2, 3)
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
	clustersetServed(t, cfg)
	// Every pod of the rig's own runs before the probes start: a DNS pod scheduled late (the
	// scheduler backs off while the nodes are not ready) adds a port to a gateway's userspace
	// datapath, which can drop a tunnelled packet crossing it in that instant (a rig artifact,
	// rig.Config.DatapathPortChanges).
	for _, c := range clusters {
		c.waitDNSAvailable(90 * time.Second)
	}

	a := clusters[0]
	a.createPod(testboxPod("default", "a", onNode("c1-n3")))
	pa := a.waitRunning("default", "a", 90*time.Second)
	b := clusters[1]
	b.createPod(testboxPod("default", "b", onNode("c2-n3")))
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

	t.Run("kovn-daemon exports the BFD sessions OVN runs toward the gateways", func(t *testing.T) {
		bfdSessionsUp(t, r.State, 1, 3, []int{1, 2})
	})

	// failover measures a 20 ms probe stream from a to b across fail (c1-n1, the active
	// gateway, lost: c1-n2 must take over, and c1-n1 is held at the lowest priority) and
	// across restore (c1-n1 back: it takes the port back once its ovn-controller is in step
	// with SB, as a planned switchover; a 100 ms stream). The bounds are loose (the goals are printed): they
	// catch OVN's default BFD timers (2.3-2.8 s) and a failback to a gateway that is not
	// connected to SB yet (5-8 s), not noise on a loaded host.
	failover := func(t *testing.T, what, goal string, fail, restore func()) {
		a.t, b.t = t, t
		a.waitActiveGateway("c1-n1")
		bIP := pb.Status.PodIPs[0].IP
		restored := false
		defer func() { // a failed step must not leave c1-n1 down for the next one
			if !restored {
				restore()
			}
		}()
		// Probes every 20 ms for the failure (the goal is in tenths of a second), 20 s as
		// the 100 ms streams.
		sent, lost, outage := a.measureUntil(t, "default", "a", bIP, fineStreamCount, 20*time.Millisecond, fail, func() {
			a.waitInterConnect(func(s icStatus) error {
				if s.active != "c1-n2" || s.held != "c1-n1" {
					return fmt.Errorf("active %q, held %q: want c1-n2 active, c1-n1 held", s.active, s.held)
				}
				return nil
			})
		})
		t.Logf("c1-n1's %s lost: %d of %d probes at 20 ms lost, longest outage %s (goal %s); c1-n2 active, c1-n1 held", what, lost, sent, outage, goal)
		if lost > 100 {
			t.Errorf("failover lost %d probes at 20 ms (%.1f s), want at most 100 (2 s)", lost, float64(lost)*0.02)
		}
		// c1-n1 comes back and, first by priority once released, takes the port again.
		restored = true
		var released <-chan time.Duration
		sent, lost, outage = a.measureUntil(t, "default", "a", bIP, failbackCount, 100*time.Millisecond, func() {
			restore()
			released = a.timeUntil(func(s icStatus) bool { return s.active == "c1-n1" && s.held == "" })
		}, func() {
			a.waitInterConnect(func(s icStatus) error {
				if s.active != "c1-n1" || s.held != "" {
					return fmt.Errorf("active %q, held %q: want c1-n1 active, none held", s.active, s.held)
				}
				return nil
			})
		})
		t.Logf("c1-n1's %s back: released and active again %.1fs later; %d of %d probes lost, longest outage %s",
			what, (<-released).Seconds(), lost, sent, outage)
		if lost > 10 {
			t.Errorf("failback lost %d probes, want at most 10", lost)
		}
	}
	t.Run("active gateway's fabric link cut: traffic resumes through the standby, then fails back", func(t *testing.T) {
		failover(t, "fabric link", "< 0.7 s", func() { setFabricLink(t, cfg, 1, 1, false) }, func() { setFabricLink(t, cfg, 1, 1, true) })
	})
	t.Run("active gateway's ovn-controller crashed: the standby takes over, then fails back", func(t *testing.T) {
		failover(t, "ovn-controller", "< 1 s", func() {
			if err := r.State.CrashDaemon("c1-n1", "ovn-controller"); err != nil {
				t.Fatal(err)
			}
		}, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := r.State.StartDaemon(ctx, "c1-n1", "ovn-controller"); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("gateway order changed at run time: reconciled in place, c1-n2 takes over", func(t *testing.T) {
		a.t, b.t = t, t
		lrp := func() string {
			return strings.TrimSpace(a.nbctl("--bare", "--columns=_uuid", "find", "Logical_Router_Port", "name=az1-kovn-ts"))
		}
		before := lrp()
		sent, lost, outage := a.measureUntil(t, "default", "a", pb.Status.PodIPs[0].IP, streamCount, 100*time.Millisecond, func() {
			a.applyInterConnect("az1", "c1-n2", "c1-n1")
		}, func() { a.waitActiveGateway("c1-n2") })
		if after := lrp(); after != before || after == "" {
			t.Errorf("transit router port %q replaced by %q: not reconciled in place", before, after)
		}
		t.Logf("gatewayNodes [c1-n1, c1-n2] -> [c1-n2, c1-n1]: %d of %d probes lost, longest outage %s; same router port", lost, sent, outage)
	})

	t.Run("IC-SB down, then every gateway of c2 cut off: c2's imported endpoints leave c1's load balancers within 1 s (peer BFD), and come back", func(t *testing.T) {
		a.t, b.t = t, t
		peerHealthRemoval(t, a, b, cfg, r.State)
	})

	t.Run("ECMP mode: traffic spreads over both gateways, one lost costs < 1 s", func(t *testing.T) {
		a.t, b.t = t, t
		ecmpMode(t, a, b, cfg, pa, pb)
	})

	t.Run("AZ renamed at run time: the peer follows, no stale row, traffic back", func(t *testing.T) {
		a.t, b.t = t, t
		renameAZ(t, a, b, cfg, pb)
	})

	t.Run("an azName another cluster holds, or one its certificate lacks: refused, neither AZ changed, traffic untouched", func(t *testing.T) {
		a.t, b.t = t, t
		azNameTaken(t, a, b, cfg, pa, pb)
	})

	t.Run("another AZ's certificate rewrites this AZ's join record and declared subnets: put back, Degraded, still joined", func(t *testing.T) {
		a.t, b.t = t, t
		tamperedRecord(t, a, cfg)
	})

	t.Run("another AZ's certificate writes a route and a gateway under this AZ's name in IC-SB: removed, Degraded", func(t *testing.T) {
		a.t, b.t = t, t
		tamperedICSB(t, a, cfg)
	})

	t.Run("every OVN CA and certificate rotated under a 100 ms cross-cluster stream: none lost, the old CA refused", func(t *testing.T) {
		a.t, b.t = t, t
		rotatedEverything(t, a, b, r.State, pb)
	})

	t.Run("kovn-controller restarted with a leader change: nothing rewritten, traffic untouched, the new leader programs", func(t *testing.T) {
		a.t, b.t = t, t
		icControllerRestart(t, a, r.State, pb)
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
	c.applyInterConnectMode(az, "ActiveStandby", gateways...)
}

func (c *cluster) applyInterConnectMode(az, mode string, gateways ...string) {
	c.t.Helper()
	y := fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: InterConnect
metadata: {name: default}
spec:
  azName: %s
  mode: %s
  icNorthbound: [%s]
  icSouthbound: [%s]
  gatewayNodes: [%s]
  insecurePlainTCP: %t
`, az, mode, quotedList(c.st.Config.ICNBEndpoints()), quotedList(c.st.Config.ICSBEndpoints()), strings.Join(gateways, ", "),
		c.st.Config.InsecurePlainTCP)
	if out, err := c.apply(y); err != nil {
		c.t.Fatalf("apply InterConnect: %v\n%s", err, out)
	}
}

// quotedList writes ss as the items of a YAML flow sequence.
func quotedList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// icStatus is what `kubectl get interconnect default` reports.
type icStatus struct {
	ready, reason, message, active string
	peers, peerRoutes              []string
	held                           string // gateways held after a failure
}

func (c *cluster) interConnectStatus() icStatus {
	c.t.Helper()
	out, _ := c.kubectl("get", "interconnect", "default", "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].reason}|`+
			`{.status.conditions[?(@.type=="Ready")].message}|{.status.activeGateways[*]}|{.status.peers[*].az}|{.status.peers[*].routes[*]}|{.status.gateways[?(@.held)].node}`)
	f := strings.Split(out, "|")
	for len(f) < 7 {
		f = append(f, "")
	}
	routes := strings.Fields(f[5])
	slices.Sort(routes)
	return icStatus{ready: f[0], reason: f[1], message: f[2], active: f[3], peers: strings.Fields(f[4]), peerRoutes: routes, held: f[6]}
}

// timeUntil polls the status (up to 60 s) in the background and sends how long it took ok to
// hold (-1 s: never), so a probe stream can run meanwhile.
func (c *cluster) timeUntil(ok func(icStatus) bool) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		for time.Since(start) < 60*time.Second {
			if ok(c.interConnectStatus()) {
				out <- time.Since(start)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		out <- -time.Second
	}()
	return out
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

// Probe streams at 100 ms, the event 3 s in, each ended streamSettle after its test saw the
// event settle; bounded at 20 s around a failure, 30 s around a return (a returning chassis
// may need seconds to reconnect to the southbound database).
const (
	streamCount     = 200
	failbackCount   = 300
	fineStreamCount = 1000 // at 20 ms
	// preEventProbes are the 100 ms probes surely sent before a stream's event (3 s in).
	preEventProbes = 29
	// streamSettle is how long a stream goes on after its event visibly settled: long enough
	// for a late flap to show (its probes count as lost) and for a stream that ends inside an
	// outage to be told from one that came back (parseStreamSent).
	streamSettle = 5 * time.Second
)

// streamUntil runs a stream of at most count probes, every interval, from pod to ip, does event
// 3 s into it and, given settled, ends the stream streamSettle after settled returned (settled
// waits until what the event changes is seen in its new state, e.g. the egress moved). A stream ended so covers the event, the
// recovery and a loss-free tail, without waiting out a length sized for the slowest case.
func (c *cluster) streamUntil(ns, pod, ip string, count int, every time.Duration, event, settled func()) string {
	c.t.Helper()
	stop := fmt.Sprintf("/tmp/stream-stop-%d", time.Now().UnixNano())
	done := make(chan string, 1)
	go func() {
		out, _ := c.exec(ns, pod, "pingstream", "-c", fmt.Sprint(count), "-i", every.String(), "-W", "2s", "-stop-file", stop, ip)
		done <- out
	}()
	time.Sleep(3 * time.Second)
	event()
	if settled != nil {
		settled()
		time.Sleep(streamSettle)
		if out, err := c.exec(ns, pod, "touch", stop); err != nil {
			c.t.Fatalf("ending the probe stream: %v %s", err, out)
		}
	}
	return <-done
}

// measureUntil runs streamUntil and returns the probes sent and lost and the longest outage;
// it fails the test if traffic did not come back.
func (c *cluster) measureUntil(t *testing.T, ns, pod, ip string, count int, every time.Duration, event, settled func()) (sent, lost int, outage string) {
	t.Helper()
	out := c.streamUntil(ns, pod, ip, count, every, event, settled)
	// At least the 3 s before the event and the settled tail, at most count.
	sent, lost, outage, err := parseStreamSent(out, int((3*time.Second+streamSettle)/every), count, every)
	if err != nil {
		t.Fatal(err)
	}
	return sent, lost, outage
}

// parseStream parses pingstream's summary of a 100 ms stream; an error says traffic did not
// come back (a lost run reaching the stream's last probe) or the stream broke.
func parseStream(out string, count int) (lost int, outage string, err error) {
	return parseStreamEvery(out, count, 100*time.Millisecond)
}

// parseStreamEvery is parseStream for probes every interval.
func parseStreamEvery(out string, count int, every time.Duration) (lost int, outage string, err error) {
	_, lost, outage, err = parseStreamSent(out, count, count, every)
	return lost, outage, err
}

// parseStreamSent is parseStreamEvery for a stream that sent between minSent and maxSent probes.
func parseStreamSent(out string, minSent, maxSent int, every time.Duration) (sent, lost int, outage string, err error) {
	sent, lost, err = pingLoss(out)
	if err != nil || sent < minSent || sent > maxSent {
		return sent, 0, "", fmt.Errorf("probe stream: %v (%d sent, want %d to %d)\n%s", err, sent, minSent, maxSent, out)
	}
	// A lost run that ends before the last probe had answers after it: traffic came back, and
	// its probes count in lost (a late flap, bounded by each test's loss limit). A run reaching
	// the last probe (seq sent-1) means the stream ended inside an outage. (A 3 s loss-free
	// tail was asked before: CI failed a failback whose 149-probe stream lost seq 144 alone.)
	for _, l := range strings.Split(out, "\n") {
		var from, to int
		if _, err := fmt.Sscanf(l, "lost seq %d-%d", &from, &to); err == nil && to >= sent-1 {
			return sent, lost, "", fmt.Errorf("probes still lost at the end of the stream (seq %d-%d of %d): traffic did not come back\n%s", from, to, sent, out)
		}
		if v, ok := strings.CutPrefix(l, "longest outage "); ok {
			outage = v + outage
		}
		if strings.HasPrefix(l, "lost seq ") { // where the probes were lost, for the log
			outage += " [" + strings.Fields(l)[2] + "]"
		}
	}
	return sent, lost, outage, nil
}

// lostSplit counts a stream's lost probes (its "lost seq a-b" runs) at sequence numbers up to
// last and after it.
func lostSplit(out string, last int) (within, after int) {
	for _, l := range strings.Split(out, "\n") {
		var from, to int
		if _, err := fmt.Sscanf(l, "lost seq %d-%d", &from, &to); err != nil {
			continue
		}
		for seq := from; seq <= to; seq++ {
			if seq <= last {
				within++
			} else {
				after++
			}
		}
	}
	return within, after
}

// setFabricLink takes node n of cluster cl off the fabric (or back): its port on the rig's
// fabric bridge, inside the rig's own fabric namespace.
func setFabricLink(t *testing.T, cfg rig.Config, cl, n int, up bool) {
	t.Helper()
	state := map[bool]string{true: "up", false: "down"}[up]
	if out, err := exec.Command("ip", "-n", cfg.FabricNS(), "link", "set", fmt.Sprintf("c%dn%d", cl, n), state).CombinedOutput(); err != nil {
		t.Fatalf("fabric link of c%d-n%d %s: %v %s", cl, n, state, err, out)
	}
}

func (c *cluster) waitActiveGateway(node string) {
	c.t.Helper()
	c.waitInterConnect(func(s icStatus) error {
		if s.active != node {
			return fmt.Errorf("active gateway %q, want %s", s.active, node)
		}
		return nil
	})
}

// ecmpMode switches c1 (a) to ECMP over c1-n1 and c1-n2 (c2 stays active/standby): both
// gateways become active, c2 routes each of c1's pod subnets over two transit switches, 400
// TCP connections from a to b leave c1 through both gateways (Geneve packets each sent to
// c2's gateways, counted by OVS), and the fabric link of the gateway carrying a's probe stream
// cut, the stream moves to the other (outage printed, goal < 1 s).
func ecmpMode(t *testing.T, a, b *cluster, cfg rig.Config, pa, pb *corev1.Pod) {
	start := time.Now()
	a.applyInterConnectMode("az1", "ECMP", "c1-n1", "c1-n2")
	a.waitInterConnect(func(s icStatus) error {
		if s.ready != "True" || s.active != "c1-n1 c1-n2" {
			return fmt.Errorf("ready %q, active %q: want both gateways active", s.ready, s.active)
		}
		return nil
	})
	if err := eventually(30*time.Second, func() error { return b.routesOverTwoTransitSwitches(cfg.PodCIDRs(1)) }); err != nil {
		t.Fatal(err)
	}
	t.Logf("ECMP on: both gateways active, c2 routes each of c1's subnets over 2 transit switches, %.1fs after the change", time.Since(start).Seconds())

	bIP := pb.Status.PodIPs[0].IP
	remotes := []netip.Addr{rig.NodeIP(2, 1), rig.NodeIP(2, 2)}
	sent := func() [2]uint64 {
		return [2]uint64{tunnelTxPackets(t, cfg, 1, 1, remotes), tunnelTxPackets(t, cfg, 1, 2, remotes)}
	}
	before := sent()
	a.mustExec("default", "a", "get", "-n", "400", "http://"+hostPort(bIP, 8080)+"/")
	time.Sleep(6 * time.Second) // OVS writes interface statistics every 5 s
	after := sent()
	d1, d2 := after[0]-before[0], after[1]-before[1]
	t.Logf("400 TCP connections c1-n3 -> c2: c1-n1 sent %d Geneve packets to c2's gateways, c1-n2 %d (BFD included)", d1, d2)
	if d1*4 < d1+d2 || d2*4 < d1+d2 {
		t.Errorf("traffic not spread: c1-n1 %d, c1-n2 %d packets (each should carry at least a quarter)", d1, d2)
	}

	// The gateway carrying a's probes (one ICMP flow: one hash, one gateway) is the one to cut.
	before = sent()
	a.mustExec("default", "a", "pingstream", "-c", "100", "-i", "50ms", "-W", "1s", bIP)
	time.Sleep(6 * time.Second)
	after = sent()
	carrier := 1
	if after[1]-before[1] > after[0]-before[0] {
		carrier = 2
	}
	other := 3 - carrier
	n, lost, outage := a.measureUntil(t, "default", "a", bIP, streamCount, 100*time.Millisecond, func() { setFabricLink(t, cfg, 1, carrier, false) }, func() {
		a.waitInterConnect(func(s icStatus) error {
			if want := fmt.Sprintf("c1-n%d", other); s.active != want || s.held != fmt.Sprintf("c1-n%d", carrier) {
				return fmt.Errorf("active %q, held %q: want %s alone active, c1-n%d held", s.active, s.held, want, carrier)
			}
			return nil
		})
	})
	t.Logf("c1-n%d (carrying the stream) lost its fabric link: %d of %d probes lost, longest outage %s (goal < 1 s); c1-n%d carries on",
		carrier, lost, n, outage, other)
	if lost > 20 {
		t.Errorf("ECMP gateway lost: %d probes lost, want at most 20", lost)
	}
	// The link comes back: once its ovn-controller is in step with SB again, the held gateway
	// is released and takes its transit port back, measured the same way.
	bothBack := func(s icStatus) bool { return s.active == "c1-n1 c1-n2" && s.held == "" }
	var released <-chan time.Duration
	n, lost, outage = a.measureUntil(t, "default", "a", bIP, failbackCount, 100*time.Millisecond, func() {
		setFabricLink(t, cfg, 1, carrier, true)
		released = a.timeUntil(bothBack)
	}, func() {
		a.waitInterConnect(func(s icStatus) error {
			if !bothBack(s) {
				return fmt.Errorf("active %q, held %q: want both gateways back, none held", s.active, s.held)
			}
			return nil
		})
	})
	t.Logf("c1-n%d's link back: released, both gateways active %.1fs later; %d of %d probes lost, longest outage %s",
		carrier, (<-released).Seconds(), lost, n, outage)
	if lost > 10 {
		t.Errorf("ECMP failback lost %d probes, want at most 10", lost)
	}
}

// tunnelTxPackets sums what node n of cluster cl sent through its Geneve tunnels to remotes.
func tunnelTxPackets(t *testing.T, cfg rig.Config, cl, n int, remotes []netip.Addr) uint64 {
	t.Helper()
	var sum uint64
	db := "--db=unix:" + cfg.OVSDBSocket(cl, n)
	for _, ip := range remotes {
		out, err := exec.Command("ovs-vsctl", db, "--bare", "--columns=name", "find", "Interface", "type=geneve",
			"options:remote_ip="+ip.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("ovs-vsctl on c%d-n%d: %v %s", cl, n, err, out)
		}
		for _, name := range strings.Fields(string(out)) {
			v, err := exec.Command("ovs-vsctl", db, "get", "Interface", name, "statistics:tx_packets").CombinedOutput()
			if err != nil {
				t.Fatalf("tx_packets of %s on c%d-n%d: %v %s", name, cl, n, err, v)
			}
			var x uint64
			fmt.Sscan(strings.TrimSpace(string(v)), &x)
			sum += x
		}
	}
	return sum
}

// renameAZ renames c1's AZ az1 -> az1r (still ECMP over c1-n1 and c1-n2) under a probe stream:
// c2 sees the peer az1r only, IC-SB holds no row of az1 (AZ, gateways, routes, transit ports)
// and every route c2 learned from c1 is again there, over both transit switches.
func renameAZ(t *testing.T, a, b *cluster, cfg rig.Config, pb *corev1.Pod) {
	start := time.Now()
	sent, lost, outage := a.measureUntil(t, "default", "a", pb.Status.PodIPs[0].IP, streamCount, 100*time.Millisecond, func() {
		a.applyInterConnectMode("az1r", "ECMP", "c1-n1", "c1-n2")
	}, func() {
		b.waitInterConnect(func(s icStatus) error {
			if !slices.Equal(s.peers, []string{"az1r"}) || !slices.Equal(s.peerRoutes, prefixStrings(cfg.PodCIDRs(1))) {
				return fmt.Errorf("peers %v with routes %v, want az1r with %v", s.peers, s.peerRoutes, prefixStrings(cfg.PodCIDRs(1)))
			}
			return nil
		})
	})
	if err := eventually(30*time.Second, func() error {
		for _, table := range []string{"Availability_Zone", "Port_Binding", "Route", "Gateway"} {
			out, err := exec.Command("ip", "netns", "exec", cfg.ICNS(), "ovn-ic-sbctl", "--db="+cfg.ICSBLocal(), "--no-leader-only", "list", table).CombinedOutput()
			if err != nil {
				return fmt.Errorf("ovn-ic-sbctl list %s: %v %s", table, err, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				_, v, _ := strings.Cut(strings.ReplaceAll(l, `"`, ""), ":")
				if v = strings.TrimSpace(v); v == "az1" || strings.HasSuffix(v, "-az1") {
					return fmt.Errorf("IC-SB %s still names az1: %s", table, l)
				}
			}
		}
		return b.routesOverTwoTransitSwitches(cfg.PodCIDRs(1))
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("AZ az1 renamed az1r 3 s into a probe stream that ended %s after c2 followed: %d of %d probes lost, longest outage %s; IC-SB is clean and c2 routes over both transit switches (checked %.1fs after the change)",
		streamSettle, lost, sent, outage, time.Since(start).Seconds()-3)
}

// azNameTaken sets c2's azName to c1's (az1r, after renameAZ): ovn-ic keys AZs by name, so
// the two would share one AZ row, and kovn would remove c1's AZ when c2 renamed away or left.
// c2 must be refused with AZNameTaken and stay az2; IC-SB keeps exactly az1r and az2, c1 still
// learns c2's routes, and a 100 ms probe stream from c1's pod to c2's loses nothing across the
// refusal and c2's return to az2. The same for az2x, a name c2's certificate does not carry
// (AZNameNotCertified).
func azNameTaken(t *testing.T, a, b *cluster, cfg rig.Config, pa, pb *corev1.Pod) {
	setAZ := func(az string) {
		t.Helper()
		if out, err := b.kubectl("patch", "interconnect", "default", "--type=merge", "-p", `{"spec":{"azName":"`+az+`"}}`); err != nil {
			t.Fatalf("patch azName: %v %s", err, out)
		}
	}
	azRows := func() string {
		out, err := exec.Command("ip", "netns", "exec", cfg.ICNS(), "ovn-ic-sbctl", "--db="+cfg.ICSBLocal(), "--no-leader-only",
			"--timeout=10", "--bare", "--columns=name", "list", "Availability_Zone").CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-ic-sbctl: %v %s", err, out)
		}
		f := strings.Fields(string(out))
		slices.Sort(f)
		return strings.Join(f, " ")
	}
	// az1r is c1's; az2x is no name c2's certificate (az2, az2r) acts for, so the IC-SB relay
	// would refuse c2's writes under it.
	for _, refused := range []struct{ name, reason string }{
		{"az1r", kovnv1.ReasonAZNameTaken}, {"az2x", kovnv1.ReasonAZNameNotCertified}} {
		var message string
		sent, lost, outage := a.measureUntil(t, "default", "a", pb.Status.PodIPs[0].IP, streamCount, 100*time.Millisecond, func() { setAZ(refused.name) }, func() {
			b.waitInterConnect(func(s icStatus) error {
				if s.ready != "False" || s.reason != refused.reason {
					return fmt.Errorf("ready %s (%s): %s", s.ready, s.reason, s.message)
				}
				message = s.message
				return nil
			})
		})
		if lost > 0 {
			t.Errorf("c1 -> c2 while c2 was refused %s: %d of %d probes lost, longest outage %s", refused.name, lost, sent, outage)
		}
		if got := azRows(); got != "az1r az2" {
			t.Errorf("IC-SB's AZs while c2 asks for %s: %s, want az1r az2", refused.name, got)
		}
		a.waitInterConnect(func(s icStatus) error {
			if !slices.Equal(s.peers, []string{"az2"}) || !slices.Equal(s.peerRoutes, prefixStrings(cfg.PodCIDRs(2))) {
				return fmt.Errorf("peers %v with routes %v, want az2 with %v", s.peers, s.peerRoutes, prefixStrings(cfg.PodCIDRs(2)))
			}
			return nil
		})
		setAZ("az2")
		b.waitInterConnect(func(s icStatus) error {
			if s.ready != "True" || !slices.Equal(s.peers, []string{"az1r"}) {
				return fmt.Errorf("ready %s (%s), peers %v", s.ready, s.reason, s.peers)
			}
			return nil
		})
		b.ping("default", "b", pa.Status.PodIPs[0].IP)
		t.Logf("c2 asked for %s: %s %q; IC-SB kept az1r and az2; %d of %d probes c1 -> c2 lost; back to az2: Ready", refused.name, refused.reason, message, lost, sent)
	}
}

// routesOverTwoTransitSwitches checks that the cluster learned each prefix over two next hops.
func (c *cluster) routesOverTwoTransitSwitches(prefixes []netip.Prefix) error {
	for _, p := range prefixes {
		if hops := c.learnedNexthops(p); len(hops) != 2 {
			return fmt.Errorf("%s routes %s via %v, want two next hops (one per transit switch)", c.info.Name, p, hops)
		}
	}
	return nil
}

// learnedNexthops are the next hops of the routes ovn-ic learned for prefix (it keeps the
// advertised network as written, host bits included, so prefixes are compared masked).
func (c *cluster) learnedNexthops(prefix netip.Prefix) []string {
	c.t.Helper()
	out := c.nbctl("--format=csv", "--no-headings", "--data=bare", "--columns=ip_prefix,nexthop", "find", "Logical_Router_Static_Route",
		"external_ids:ic-learned-route!=\"\"")
	var hops []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, ",")
		if len(f) != 2 {
			continue
		}
		if p, err := netip.ParsePrefix(f[0]); err == nil && p.Masked() == prefix.Masked() {
			hops = append(hops, f[1])
		}
	}
	slices.Sort(hops)
	return hops
}

// icControllerRestart kills c1's leading kovn-controller under a 30 s probe stream to c2. The
// data path does not depend on the controller: no probe may be lost. The new leader (after
// the dead one's lease expires) re-reconciles the InterConnect; nothing changed, so it rewrites
// no transit router port and leaves NB_Global alone (OVSDB gives a row a new _version on every
// write). A BFD change made after the takeover proves the new leader programs the interconnect.
func icControllerRestart(t *testing.T, a *cluster, st *rig.State, pb *corev1.Pod) {
	ports, global := a.rowVersions("Logical_Router_Port"), a.rowVersions("NB_Global")
	var takeover time.Duration
	// The stream ends streamSettle after the takeover, past the new leader's first reconcile
	// of the InterConnect.
	sent, lost, outage := a.measureUntil(t, "default", "a", pb.Status.PodIPs[0].IP, failbackCount, 100*time.Millisecond, func() {
		_, takeover = killLeader(t, a, st)
	}, func() {})
	if lost != 0 {
		t.Errorf("probes across the controller restart: %d of %d lost (longest outage %s), want none", lost, sent, outage)
	}
	if after := a.rowVersions("Logical_Router_Port"); !maps.Equal(after, ports) {
		t.Errorf("router ports rewritten by the new leader:\nbefore %v\nafter  %v", ports, after)
	}
	if after := a.rowVersions("NB_Global"); !maps.Equal(after, global) {
		t.Errorf("NB_Global rewritten by the new leader: %v -> %v", global, after)
	}
	changed := time.Now()
	if out, err := a.kubectl("patch", "interconnect", "default", "--type=merge", "-p", `{"spec":{"bfd":{"multiplier":4}}}`); err != nil {
		t.Fatalf("patch bfd: %v %s", err, out)
	}
	if err := eventually(20*time.Second, func() error {
		if m := strings.Trim(strings.TrimSpace(a.nbctl("get", "NB_Global", ".", "options:bfd-mult")), `"`); m != "4" {
			return fmt.Errorf("NB_Global bfd-mult %q, want 4", m)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill -> new leader after %.1fs; %d of %d probes lost; %d transit/router ports and NB_Global unchanged (same _version); bfd multiplier 4 programmed %.1fs after the patch",
		takeover.Seconds(), lost, sent, len(ports), time.Since(changed).Seconds())
}

// bfdSessionsUp: node n of cluster cl (a chassis with ports on the router the gateways serve)
// runs BFD toward gateway nodes gws over their tunnels, and kovn-daemon's metrics say each is
// up (kovn_node_tunnel_bfd_up by remote address, kovn_node_tunnels_bfd by state), as OVS's
// Interface rows have them.
func bfdSessionsUp(t *testing.T, st *rig.State, cl, n int, gws []int) {
	t.Helper()
	cfg := st.Config
	var out string
	err := eventually(30*time.Second, func() error {
		out = nodeTestbox(t, st, cfg.NodeNS(cl, n), "get", "http://127.0.0.1:9474/metrics")
		for _, gw := range gws {
			want := fmt.Sprintf(`remote_ip="%s"} 1`, cfg.NodeIPs(cl, gw)[0])
			if !regexp.MustCompile(`(?m)^kovn_node_tunnel_bfd_up\{interface="[^"]+",` + regexp.QuoteMeta(want) + `$`).MatchString(out) {
				return fmt.Errorf("no BFD session up toward %s", rig.NodeName(cl, gw))
			}
		}
		if up := value(out, `kovn_node_tunnels_bfd{state="up"}`); up < float64(len(gws)) {
			return fmt.Errorf("%v BFD sessions up", up)
		}
		for _, s := range []string{"down", "init", "admin_down"} {
			if v := value(out, `kovn_node_tunnels_bfd{state="`+s+`"}`); v != 0 {
				return fmt.Errorf("%v BFD sessions %s", v, s)
			}
		}
		return nil
	})
	if err != nil {
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "kovn_node_tunnel") {
				lines = append(lines, l)
			}
		}
		t.Fatalf("%s: %v\n%s", rig.NodeName(cl, n), err, strings.Join(lines, "\n"))
	}
	t.Logf("%s: BFD up toward %d gateways, %v tunnels", rig.NodeName(cl, n), len(gws), value(out, "kovn_node_tunnels"))
}

// A stream that ends inside an outage did not come back; one with a late lost probe and answers
// after it did (its loss is counted).
func TestParseStreamTail(t *testing.T) {
	for _, tc := range []struct {
		out  string
		lost int
		err  bool
	}{
		{"lost seq 31-33 (3 x 100ms = 300ms)\nlost seq 144-144 (1 x 100ms = 100ms)\n149 packets transmitted, 145 received\n", 4, false},
		{"lost seq 31-33 (3 x 100ms = 300ms)\nlost seq 140-148 (9 x 100ms = 900ms)\n149 packets transmitted, 137 received\n", 12, true},
		{"lost seq 148-148 (1 x 100ms = 100ms)\n149 packets transmitted, 148 received\n", 1, true},
	} {
		_, lost, _, err := parseStreamSent(tc.out, 80, 300, 100*time.Millisecond)
		if (err != nil) != tc.err || !tc.err && lost != tc.lost {
			t.Errorf("%q: lost %d, err %v; want lost %d, an error %t", tc.out, lost, err, tc.lost, tc.err)
		}
	}
}

func TestLostSplit(t *testing.T) {
	out := "lost seq 31-33 (3 x 100ms = 300ms)\nlost seq 240-240 (1 x 100ms = 100ms)\n300 packets transmitted, 296 received\n"
	if within, after := lostSplit(out, 100); within != 3 || after != 1 {
		t.Errorf("lostSplit = %d, %d; want 3 within, 1 after", within, after)
	}
	if within, after := lostSplit(out, 32); within != 2 || after != 2 {
		t.Errorf("a run across the window's end: %d, %d; want 2, 2", within, after)
	}
}
