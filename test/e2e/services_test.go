package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kovn/kovn/test/rig"
)

// TestServices: kovn is the Service implementation (the rig runs no kube-proxy). Every check
// runs over both families of a dual-stack Service. It runs on kovn installed from the chart;
// KOVN_E2E_INSTALL=processes runs it on the rig's supervised processes. Its last step runs
// Kubernetes' own e2e specs of kube-proxy's behaviour (the upstream "ci" set) on the same lab.
func TestServices(t *testing.T) {
	e2eDir, upstreamImages := upstreamInputs(t)
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	cfg.ExtraImages = []string{upstreamImages}
	preferInstall(&cfg, rig.InstallChart)
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	c.createNamespace("svc")
	for _, be := range []struct{ name, node string }{{"be1", "c1-n1"}, {"be2", "c1-n2"}} {
		c.createPod(backendPod(be.name, be.node, map[string]string{"app": "echo"}))
	}
	c.createPod(testboxPod("svc", "client", onNode("c1-n1")))
	c.createPod(namedPortPod("benamed", "c1-n2", 8081))
	for _, p := range []string{"be1", "be2", "benamed", "client"} {
		c.waitReady("svc", p, 90*time.Second)
	}
	echo := c.createService(serviceSpec("echo", map[string]string{"app": "echo"}))
	empty := c.createService(serviceSpec("empty", map[string]string{"app": "nothing"}))
	sticky := serviceSpec("sticky", map[string]string{"app": "echo"})
	sticky.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	stickyIPs := c.createService(sticky)
	solo := c.createService(serviceSpec("solo", map[string]string{"solo": "be1"}))
	c.labelPod("svc", "be1", "solo", "be1")
	t.Logf("ClusterIPs: echo %v, empty %v, sticky %v, solo %v", echo, empty, stickyIPs, solo)

	t.Run("pod to ClusterIP: TCP and UDP reach every backend, both families", func(t *testing.T) {
		c.t = t
		for _, vip := range echo {
			c.waitBackends("svc", "client", vip, []string{"be1", "be2"}, 30*time.Second)
			got := backendsSeen(c.mustExec("svc", "client", "udp", "-each", "-n", "20", "-i", "10ms", hostPort(vip, 53), "hi"))
			if !equalSets(got, []string{"be1", "be2"}) {
				t.Fatalf("UDP to %s answered by %v, want be1 and be2", vip, got)
			}
		}
	})
	t.Run("UDP flows paused past their conntrack timeout resume: pod to pod and through the ClusterIP, no ovs-vswitchd abort", func(t *testing.T) {
		udpPausedPastTimeout(t, c, r.State, echo)
	})
	t.Run("node to ClusterIP through ovn0", func(t *testing.T) {
		c.t = t
		for _, vip := range echo {
			out := nodeTestbox(t, r.State, cfg.NodeNS(1, 2), "get", "-n", "10", "http://"+hostPort(vip, 80)+"/")
			if got := backendsSeen(out); len(got) == 0 || strings.Contains(out, "error") {
				t.Fatalf("node c1-n2 -> %s: %s", vip, out)
			}
		}
	})
	t.Run("control plane to pods and ClusterIPs: through a node, and kube-apiserver's pods/proxy", func(t *testing.T) {
		controlPlaneReach(t, c, r.State, echo)
	})
	t.Run("named targetPort resolved per endpoint", func(t *testing.T) {
		named := serviceSpec("named", map[string]string{"named": "yes"})
		named.Spec.Ports = named.Spec.Ports[:1]
		named.Spec.Ports[0].TargetPort = intstr.FromString("web")
		c.t = t
		c.labelPod("svc", "be1", "named", "yes")
		for _, vip := range c.createService(named) {
			// be1 names port 8080 "web", benamed names port 8081 "web": each is reached on its own.
			c.waitBackends("svc", "client", vip, []string{"be1", "benamed"}, 30*time.Second)
		}
	})
	t.Run("internalTrafficPolicy=Local: only the client's own node's endpoints, dropped without one", func(t *testing.T) {
		internalLocal(t, c, r.State)
	})
	t.Run("an external IP inside a Subnet is refused with an event and captures nothing", func(t *testing.T) {
		refusedExternalIP(t, c)
	})
	t.Run("no endpoints: refused at once", func(t *testing.T) {
		c.t = t
		for _, vip := range empty {
			out, err := c.exec("svc", "client", "connect", hostPort(vip, 80))
			var ms int
			if err == nil || !strings.Contains(out, "connection refused") || !parseAfterMs(out, &ms) || ms >= 100 {
				t.Fatalf("connect to %s (no endpoints): want refused in < 100 ms, got %v: %s", vip, err, out)
			}
			t.Logf("%s: refused after %d ms", vip, ms)
		}
	})
	t.Run("hairpin: a pod reaches itself through its Service", func(t *testing.T) {
		c.t = t
		for _, vip := range solo {
			c.waitBackends("svc", "be1", vip, []string{"be1"}, 30*time.Second)
		}
	})
	t.Run("ClientIP affinity keeps one backend over 20 requests", func(t *testing.T) {
		c.t = t
		for _, vip := range stickyIPs {
			c.waitBackends("svc", "client", vip, nil, 30*time.Second)
			got := backendsSeen(c.mustExec("svc", "client", "get", "-n", "20", "http://"+hostPort(vip, 80)+"/"))
			if len(got) != 1 {
				t.Fatalf("20 requests to sticky %s answered by %v, want one backend", vip, got)
			}
		}
	})
	t.Run("NodePort, externalTrafficPolicy=Local and external IPs from outside the cluster", func(t *testing.T) {
		fromOutside(t, c, r.State)
	})
	t.Run("kube-proxy's semantics: ETP=Local from pods and nodes, health check node ports, the proxy health port, terminating endpoints, another proxy's Service, a hostNetwork pod's hostname, a Service on both nodes' host network", func(t *testing.T) {
		kubeProxySemantics(t, c, r.State)
	})
	t.Run("rolling update under 20 ms request streams, to a ClusterIP and an ETP=Local NodePort: no request fails", func(t *testing.T) {
		rollingUpdate(t, c, r.State)
	})
	t.Run("controller restart: unchanged load balancers untouched, a UDP flow keeps every datagram", func(t *testing.T) {
		serviceControllerRestart(t, c, r.State, echo[0])
	})
	t.Run("endpoint changes reach traffic", func(t *testing.T) { endpointChanges(t, c, echo) })
	// Last: it restarts c1-n2's kovn-daemon.
	t.Run("hostPort: TCP and UDP on one port, per-address hostIP, from outside, nodes and pods, daemon restart", func(t *testing.T) {
		hostPorts(t, c, r.State)
	})
	t.Run("ovs-vswitchd aborts on c1-n2: the node heals (pods across nodes, node to ClusterIP)", func(t *testing.T) {
		vswitchdCrash(t, c, r.State, echo)
	})
	// After the restarts, on the healed lab: upstream's framework first waits for every node and
	// kube-system pod to be ready.
	t.Run("Kubernetes' own e2e specs of kube-proxy's behaviour (upstream set ci)", func(t *testing.T) {
		runUpstreamSet(t, c, e2eDir, upstreamSets["ci"])
	})
}

// vswitchdCrash aborts c1-n2's ovs-vswitchd (as OVS 3.1's userspace conntrack sometimes does).
// The rig starts it again. Pod traffic across nodes must come back (ovn-controller reinstalls
// the flows; br-phy kept its address) and so must the node's own path into OVN through ovn0.
func vswitchdCrash(t *testing.T, c *cluster, st *rig.State, vips []string) {
	c.t = t
	// benamed (c1-n2, HTTP on 8081) outlives the endpoint-change subtest, which deletes backends.
	target, err := c.kc.CoreV1().Pods("svc").Get(context.Background(), "benamed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	signalComponent(t, c, "c1-n2", "ovs-vswitchd", syscall.SIGABRT)
	time.Sleep(200 * time.Millisecond)
	var podBack, nodeBack time.Duration
	var out string
	err = eventually(30*time.Second, func() error {
		if podBack == 0 {
			if out, err = c.exec("svc", "client", "get", "-n", "1", "http://"+hostPort(target.Status.PodIP, 8081)+"/"); err != nil {
				return fmt.Errorf("c1-n1 pod -> benamed: %v", err)
			}
			podBack = time.Since(start)
		}
		out = nodeTestbox(t, st, st.Config.NodeNS(1, 2), "get", "-n", "1", "http://"+hostPort(vips[0], 80)+"/")
		if len(backendsSeen(out)) == 0 || strings.Contains(out, "error") {
			return fmt.Errorf("c1-n2 -> %s: %s", vips[0], out)
		}
		nodeBack = time.Since(start)
		return nil
	})
	if err != nil {
		t.Fatalf("30 s after ovs-vswitchd aborted on c1-n2: %v\n%s\n%s", err, out, st.Config.NodeDiagnostics(1, 2))
	}
	t.Logf("ovs-vswitchd aborted on c1-n2: pod traffic across nodes back after %.1fs, c1-n2 -> ClusterIP after %.1fs",
		podBack.Seconds(), nodeBack.Seconds())
}

// serviceControllerRestart kills the leading kovn-controller while a UDP flow runs through a
// ClusterIP. The new leader re-reconciles every Service; since nothing changed, no load
// balancer row may be written (OVSDB gives each row a new _version on every write), and the
// flow must not lose a datagram. A Service created after the takeover proves the new leader
// is programming.
func serviceControllerRestart(t *testing.T, c *cluster, st *rig.State, vip string) {
	c.t = t
	answered, timeouts, takeover, nLBs := controllerRestartOnce(t, c, st, vip, "after-restart")
	if timeouts != 0 || answered != 300 {
		t.Fatalf("UDP flow across the controller restart: %d answered, %d timeouts (want 300, 0)", answered, timeouts)
	}
	t.Logf("kill -> new leader after %.1fs; %d load balancers unchanged (same _version); UDP flow 300/300 over 30s",
		takeover.Seconds(), nLBs)
}

// controllerRestartOnce kills the leading kovn-controller while a UDP flow of 300 datagrams
// runs through vip, checks that the new leader programs a new Service (named newSvc) and
// rewrote no load balancer, and returns the flow's answers and timeouts.
func controllerRestartOnce(t *testing.T, c *cluster, st *rig.State, vip, newSvc string) (answered, timeouts int, takeover time.Duration, nLBs int) {
	before := c.lbVersions()
	done := make(chan string, 1)
	go func() {
		out, _ := c.exec("svc", "client", "udp", "-sport", "40100", "-n", "300", "-i", "100ms", "-W", "300ms", hostPort(vip, 53), "restart")
		done <- out
	}()
	time.Sleep(time.Second)
	_, takeover = killLeader(t, c, st)
	c.createService(serviceSpec(newSvc, map[string]string{"app": "echo"}))
	if err := eventually(30*time.Second, func() error {
		if out := c.nbctl("--bare", "--columns=name", "find", "Load_Balancer", "name=\"Service_svc/"+newSvc+"_TCP\""); strings.TrimSpace(out) == "" {
			return fmt.Errorf("no load balancer for the Service created after the takeover")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after := c.lbVersions()
	for name, v := range before {
		if after[name] != v {
			t.Fatalf("load balancer %s was rewritten by the new leader: _version %s -> %s", name, v, after[name])
		}
	}
	for _, l := range strings.Split(<-done, "\n") {
		answered += btoi(strings.HasPrefix(l, "be"))
		timeouts += btoi(l == "timeout")
	}
	return answered, timeouts, takeover, len(before)
}

// lbVersions maps each load balancer's name to its _version, which OVSDB changes on every
// write to the row (ovn-nbctl does not show it; a raw select does).
func (c *cluster) lbVersions() map[string]string {
	c.t.Helper()
	m := c.rowVersions("Load_Balancer")
	if len(m) == 0 {
		c.t.Fatal("no load balancers in NB")
	}
	return m
}

// rowVersions maps each row of an NB table, by name, to its _version.
func (c *cluster) rowVersions(table string) map[string]string {
	c.t.Helper()
	q := fmt.Sprintf(`["OVN_Northbound",{"op":"select","table":%q,"where":[],"columns":["name","_version"]}]`, table)
	out, err := exec.Command("ovsdb-client", "transact", c.info.NBAddr, q).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ovsdb-client transact: %v %s", err, out)
	}
	var res []struct {
		Rows []struct {
			Name    string `json:"name"`
			Version []any  `json:"_version"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 1 {
		c.t.Fatalf("select %s: %v %s", table, err, out)
	}
	m := map[string]string{}
	for _, r := range res[0].Rows {
		m[r.Name] = fmt.Sprint(r.Version...)
	}
	return m
}

// fromOutside: the external host (not a node) reaches Services through every node's address,
// in both families: NodePort (ETP=Cluster: any backend, masqueraded), NodePort with
// externalTrafficPolicy=Local (only the receiving node's backend, which sees the client's
// address) and an external IP the external host routes to c1-n1.
func fromOutside(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	cfg := st.Config
	ext := cfg.ExtNS()
	np := serviceSpec("np", map[string]string{"app": "echo"})
	np.Spec.Type = corev1.ServiceTypeNodePort
	local := serviceSpec("nplocal", map[string]string{"app": "echo"})
	local.Spec.Type, local.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
	extIPs := []string{"198.51.100.10", "2001:db8:ee::10"}
	withExt := serviceSpec("extip", map[string]string{"app": "echo"})
	withExt.Spec.ExternalIPs = extIPs
	for _, s := range []*corev1.Service{np, local, withExt} {
		c.createService(s)
	}
	nodePort := func(name string) string {
		got, err := c.kc.CoreV1().Services("svc").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got.Spec.Ports[0].NodePort)
	}
	npPort, localPort := nodePort("np"), nodePort("nplocal")
	onNode := map[int]string{1: "be1", 2: "be2"}
	for n := 1; n <= 2; n++ {
		for _, nodeIP := range cfg.NodeIPs(1, n) {
			url := "http://" + bracket(nodeIP)
			waitOutside(t, st, ext, url+":"+npPort+"/", nil)
			// ETP=Local: only this node's backend answers, and it sees the external host.
			out := waitOutside(t, st, ext, url+":"+localPort+"/", []string{onNode[n]})
			extIP := cfg.ExternalHostIPs()[0]
			if nodeIP.Is6() {
				extIP = rig.ExternalHostIP6()
			}
			if !strings.Contains(out, " "+bracket(extIP)+":") {
				t.Fatalf("ETP=Local via %s: the backend did not see the client address %s:\n%s", nodeIP, extIP, out)
			}
		}
	}
	for i, ip := range extIPs {
		via := cfg.NodeIPs(1, 1)[i]
		if out, err := exec.Command("ip", "-n", ext, "route", "replace", ip, "via", via.String()).CombinedOutput(); err != nil {
			t.Fatalf("route %s via c1-n1 on the external host: %v %s", ip, err, out)
		}
		waitOutside(t, st, ext, "http://"+hostPort(ip, 80)+"/", nil)
	}
	t.Logf("external host -> NodePort %s (cluster) and %s (local) on both nodes and families, external IPs %v via c1-n1: answered",
		npPort, localPort, extIPs)
}

// bracket writes an address as it appears before ":port".
func bracket(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// waitOutside polls a URL from the external host until 10 requests are all answered (by
// exactly want, when given) and returns the answers.
func waitOutside(t *testing.T, st *rig.State, ns, url string, want []string) string {
	t.Helper()
	var out string
	err := eventually(20*time.Second, func() error {
		out = nodeTestbox(t, st, ns, "get", "-n", "10", url)
		got := backendsSeen(out)
		if strings.Contains(out, "error") || len(got) == 0 || (want != nil && !equalSets(got, want)) {
			return fmt.Errorf("answered by %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("external host -> %s (want %v): %v\n%s", url, want, err, out)
	}
	return out
}

// endpointChanges measures how soon a new backend takes traffic and a backend that turns
// unready or goes stops taking it, UDP flows included.
func endpointChanges(t *testing.T, c *cluster, vips []string) {
	c.t = t
	start := time.Now()
	c.createPod(backendPod("be3", "c1-n2", map[string]string{"app": "echo"}))
	ready := c.waitReady("svc", "be3", 90*time.Second)
	readyAt := podReadyTime(ready)
	for _, vip := range vips {
		c.waitBackends("svc", "client", vip, []string{"be1", "be2", "be3"}, 30*time.Second)
	}
	t.Logf("scale up: be3 Ready %.1fs after create, answering on both families %.2fs after Ready", readyAt.Sub(start).Seconds(), time.Since(readyAt).Seconds())

	// be3 turns unready (its readiness probe fails): it must stop taking traffic.
	touched := time.Now()
	c.mustExec("svc", "be3", "touch", "/tmp/unready")
	for _, vip := range vips {
		c.waitBackends("svc", "client", vip, []string{"be1", "be2"}, 30*time.Second)
	}
	t.Logf("readiness: be3 out of both families' traffic %.2fs after its probe started failing (probe period 1s)", time.Since(touched).Seconds())

	// A UDP flow pinned to one backend moves when that backend goes: its conntrack entry must
	// not keep sending to the deleted pod. The flow's source port is fixed, so a first
	// datagram tells which backend conntrack pinned it to.
	vip, sport := vips[0], "40053"
	first := backendsSeen(c.mustExec("svc", "client", "udp", "-sport", sport, "-n", "1", hostPort(vip, 53), "x"))
	if len(first) != 1 {
		t.Fatalf("UDP probe: %v", first)
	}
	victim, other := first[0], map[string]string{"be1": "be2", "be2": "be1"}[first[0]]
	done := make(chan string, 1)
	go func() {
		out, _ := c.exec("svc", "client", "udp", "-sport", sport, "-n", "100", "-i", "100ms", "-W", "200ms", hostPort(vip, 53), "flow")
		done <- out
	}()
	time.Sleep(2 * time.Second) // about 15 datagrams to the victim first
	c.deletePod("svc", victim)
	// ovn-controller flushes the victim's entries when it leaves the load balancer, but a
	// datagram between that flush and the datapath's revalidation commits a new one to the
	// victim; kovn-daemon's sweeper removes it once the victim leaves the EndpointSlice.
	if err := checkFlowMoved(t, <-done, victim, other); err != nil {
		t.Fatal(err)
	}
}

// checkFlowMoved: the flow's answers start with the victim only and end with the other
// backend only; it logs how many datagrams went unanswered in between.
func checkFlowMoved(t *testing.T, out, victim, other string) error {
	t.Helper()
	answers := udpAnswers(out, victim, other)
	switchAt := slices.Index(answers, other)
	if len(answers) < 20 || answers[0] != victim || switchAt < 5 || slices.Contains(answers[switchAt:], victim) ||
		answers[len(answers)-1] != other {
		return fmt.Errorf("UDP flow: want answers from %s, then (after its deletion) only from %s; got %v", victim, other, answers)
	}
	lost := strings.Count(strings.Join(answers[:switchAt], " "), "timeout")
	t.Logf("UDP flow of %d datagrams 100 ms apart, pinned to %s: %s deleted; %s answered from datagram %d on, %d unanswered before that",
		len(answers), victim, victim, other, switchAt+1, lost)
	return nil
}

// udpAnswers are testbox udp's answers by backend name, "timeout" for none.
func udpAnswers(out, victim, other string) []string {
	var answers []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == victim || f[0] == other || f[0] == "timeout") {
			answers = append(answers, f[0])
		}
	}
	return answers
}

func backendPod(name, node string, labels map[string]string) *corev1.Pod {
	p := testboxPod("svc", name, onNode(node))
	for k, v := range labels {
		p.Labels[k] = v
	}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}}
	return p
}

// namedPortPod is a backend serving HTTP on port, named "web" in its spec, labelled named=yes.
func namedPortPod(name, node string, port int32) *corev1.Pod {
	p := backendPod(name, node, map[string]string{"named": "yes"})
	ctr := &p.Spec.Containers[0]
	ctr.Args = []string{"serve", "-http", fmt.Sprintf(":%d", port)}
	ctr.Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: port, Protocol: corev1.ProtocolTCP}}
	ctr.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(port)
	return p
}

// internalLocal: with internalTrafficPolicy=Local a pod on c1-n1 reaches only be1 and node
// c1-n2 (through ovn0) only be2; a Service whose only endpoint is on c1-n1 does not answer c1-n2.
func internalLocal(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	local := corev1.ServiceInternalTrafficPolicyLocal
	itp := serviceSpec("itp", map[string]string{"app": "echo"})
	itp.Spec.InternalTrafficPolicy = &local
	itpSolo := serviceSpec("itpsolo", map[string]string{"solo": "be1"})
	itpSolo.Spec.InternalTrafficPolicy = &local
	vips, soloVIPs := c.createService(itp), c.createService(itpSolo)
	for _, vip := range vips {
		c.waitBackends("svc", "client", vip, []string{"be1"}, 30*time.Second)
		got := backendsSeen(c.mustExec("svc", "client", "get", "-n", "20", "http://"+hostPort(vip, 80)+"/"))
		if !equalSets(got, []string{"be1"}) {
			t.Fatalf("20 requests from c1-n1 to %s answered by %v, want be1 alone", vip, got)
		}
		var out string
		if err := eventually(20*time.Second, func() error {
			out = nodeTestbox(t, st, st.Config.NodeNS(1, 2), "get", "-n", "20", "http://"+hostPort(vip, 80)+"/")
			if got := backendsSeen(out); !equalSets(got, []string{"be2"}) || strings.Contains(out, "error") {
				return fmt.Errorf("answered by %v", got)
			}
			return nil
		}); err != nil {
			t.Fatalf("node c1-n2 -> %s: want be2 alone: %v\n%s", vip, err, out)
		}
	}
	// Without a local endpoint the traffic is dropped, as kube-proxy does: the chassis's
	// backend variable is empty, and OVN then installs no load-balancing flow for the VIP
	// (rejecting, as for a Service with no endpoint at all, needs the backends known to northd).
	for _, vip := range soloVIPs {
		c.waitBackends("svc", "client", vip, []string{"be1"}, 30*time.Second)
		out := nodeTestbox(t, st, st.Config.NodeNS(1, 2), "connect", hostPort(vip, 80))
		if strings.Contains(out, "connected") || !strings.Contains(out, "timeout") {
			t.Fatalf("node c1-n2 -> %s (its only endpoint is on c1-n1): want no answer: %s", vip, out)
		}
	}
	t.Logf("ITP=Local %v: c1-n1's pod reached be1 only, c1-n2 be2 only; %v not answered on c1-n2", vips, soloVIPs)
}

// refusedExternalIP: a Service claiming be2's pod address as an external IP (port 8080, backend
// be1) would capture traffic to be2. kovn refuses that address with an event and keeps the
// rest of the Service: be2 still answers on its own address, the ClusterIP reaches be1.
func refusedExternalIP(t *testing.T, c *cluster) {
	c.t = t
	be2, err := c.kc.CoreV1().Pods("svc").Get(context.Background(), "be2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thief := serviceSpec("thief", map[string]string{"solo": "be1"})
	thief.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080)}}
	for _, ip := range be2.Status.PodIPs {
		thief.Spec.ExternalIPs = append(thief.Spec.ExternalIPs, ip.IP)
	}
	vips := c.createService(thief)
	msg := c.waitEvent("svc", "thief", "ServicePartlyProgrammed", 30*time.Second)
	if !strings.Contains(msg, "refused: it is inside subnet") {
		t.Fatalf("event: %s", msg)
	}
	for _, vip := range vips {
		c.waitBackendsAt("svc", "client", hostPort(vip, 8080), []string{"be1"}, 30*time.Second)
	}
	for _, ip := range be2.Status.PodIPs {
		got := backendsSeen(c.mustExec("svc", "client", "get", "-n", "10", "http://"+hostPort(ip.IP, 8080)+"/"))
		if !equalSets(got, []string{"be2"}) {
			t.Fatalf("%s:8080 answered by %v, want be2 alone (the Service captured it)", ip.IP, got)
		}
	}
	t.Logf("event: %s", msg)
}

// controlPlaneReach: the control plane host (not a node) reaches ClusterIPs and a pod on
// another node than the one it routes through (c1-n1), and kube-apiserver proxies to a pod.
func controlPlaneReach(t *testing.T, c *cluster, st *rig.State, vips []string) {
	c.t = t
	be2, err := c.kc.CoreV1().Pods("svc").Get(context.Background(), "be2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, vip := range vips {
		targets = append(targets, hostPort(vip, 80))
	}
	for _, ip := range be2.Status.PodIPs {
		targets = append(targets, hostPort(ip.IP, 8080))
	}
	for _, target := range targets {
		out := nodeTestbox(t, st, st.Config.ControlPlaneNS(1), "get", "-n", "5", "http://"+target+"/")
		if got := backendsSeen(out); len(got) == 0 || strings.Contains(out, "error") {
			t.Fatalf("control plane -> %s: %s", target, out)
		}
	}
	body, err := c.kc.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/svc/pods/be2:8080/proxy/").
		DoRaw(context.Background())
	if err != nil || !strings.Contains(string(body), "be2") {
		t.Fatalf("kube-apiserver pods/proxy to be2: %v: %s", err, body)
	}
	t.Logf("control plane reached %v and proxied to be2", targets)
}

// serviceSpec is a dual-stack ClusterIP Service: HTTP 80 -> 8080 (named targetPort "http" is
// not used: the pods have no named ports) and UDP 53 -> 9001.
func serviceSpec(name string, selector map[string]string) *corev1.Service {
	dual := corev1.IPFamilyPolicyPreferDualStack
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: name}, Spec: corev1.ServiceSpec{
		Selector: selector, IPFamilyPolicy: &dual,
		Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(9001)},
		}}}
}

// createService creates a Service and returns its ClusterIPs.
func (c *cluster) createService(s *corev1.Service) []string {
	c.t.Helper()
	got, err := c.kc.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatalf("create Service %s: %v", s.Name, err)
	}
	if want := len(c.st.Config.ServiceCIDRs(1)); len(got.Spec.ClusterIPs) != want {
		c.t.Fatalf("Service %s has ClusterIPs %v, want %d", s.Name, got.Spec.ClusterIPs, want)
	}
	return got.Spec.ClusterIPs
}

func (c *cluster) labelPod(ns, name, k, v string) {
	c.t.Helper()
	if out, err := c.kubectl("label", "pod", "-n", ns, name, k+"="+v); err != nil {
		c.t.Fatalf("label %s: %v %s", name, err, out)
	}
}

// waitBackends polls the VIP's HTTP port from a pod until 10 requests are answered by exactly
// want (any single set of answering backends when want is nil).
func (c *cluster) waitBackends(ns, pod, vip string, want []string, timeout time.Duration) {
	c.t.Helper()
	c.waitBackendsAt(ns, pod, hostPort(vip, 80), want, timeout)
}

// waitBackendsAt is waitBackends for an address with its port ("ip:port", "[ip6]:port").
func (c *cluster) waitBackendsAt(ns, pod, addr string, want []string, timeout time.Duration) {
	c.t.Helper()
	vip := addr
	var last string
	err := eventually(timeout, func() error {
		out, err := c.exec(ns, pod, "get", "-n", "10", "http://"+addr+"/")
		last = out
		got := backendsSeen(out)
		if err != nil || (want != nil && !equalSets(got, want)) || len(got) == 0 {
			return fmt.Errorf("answered by %v", got)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("%s/%s -> %s: want answers from %v: %v\n%s", ns, pod, vip, want, err, last)
	}
}

// backendsSeen lists the distinct hostnames in testbox answers ("HOSTNAME rest").
func backendsSeen(out string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && strings.HasPrefix(f[0], "be") {
			seen[f[0]] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func equalSets(a, b []string) bool {
	a, b = append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a)
	sort.Strings(b)
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// parseAfterMs reads testbox connect's "after Nms" from an error.
func parseAfterMs(out string, ms *int) bool {
	i := strings.Index(out, "after ")
	if i < 0 {
		return false
	}
	_, err := fmt.Sscanf(out[i:], "after %dms", ms)
	return err == nil
}

func podReadyTime(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Time
		}
	}
	return time.Now()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// udpPausedPastTimeout: before OVS 3.1.3 the userspace conntrack aborts ovs-vswitchd when a
// packet of a zero-SNAT connection (ovn-controller's ct_commit with nat(src)) arrives after the
// connection expired and before the sweeper (every 20 s) removed it. kovn-daemon turns zero
// SNAT off on such an OVS (guard.ZeroSNATGuard). The client pauses UDP flows, to be2 directly
// and through the echo ClusterIP in both families, for 31 s (the UDP timeout is 30 s) and
// resumes them together: every datagram is answered and no ovs-vswitchd aborts. With zero SNAT
// on, the same pause took ovs-vswitchd down on both nodes.
func udpPausedPastTimeout(t *testing.T, c *cluster, st *rig.State, vips []string) {
	c.t = t
	be2, err := c.kc.CoreV1().Pods("svc").Get(context.Background(), "be2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, ip := range be2.Status.PodIPs {
		targets = append(targets, hostPort(ip.IP, 9001))
	}
	for _, vip := range vips {
		targets = append(targets, hostPort(vip, 53))
	}
	crashes := len(vswitchdCrashLines(st.Config))
	sport := func(i int) string { return strconv.Itoa(40200 + i) }
	for i, dst := range targets {
		c.mustExec("svc", "client", "udp", "-sport", sport(i), "-n", "1", "-W", "1s", dst, "start")
	}
	time.Sleep(31 * time.Second)
	outs := make([]string, len(targets))
	var wg sync.WaitGroup
	for i, dst := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = c.exec("svc", "client", "udp", "-sport", sport(i), "-n", "20", "-i", "250ms", "-W", "500ms", dst, "resume")
		}()
	}
	wg.Wait()
	if lines := vswitchdCrashLines(st.Config); len(lines) > crashes {
		t.Errorf("ovs-vswitchd aborted when the flows resumed: %v", lines[crashes:])
	}
	for i, dst := range targets {
		if answered := strings.Count(outs[i], "resume"); answered != 20 {
			t.Errorf("%s after a 31 s pause: %d of 20 datagrams answered\n%s", dst, answered, outs[i])
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("after a 31 s pause, %d UDP flows (pod to pod and via the ClusterIP, both families): 20/20 answered each, no ovs-vswitchd abort", len(targets))
}
