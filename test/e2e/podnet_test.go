package e2e

import (
	"context"
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/test/rig"
)

// TestPodNetwork runs kovn in a dual-stack 1-cluster x 3-node rig and checks single-cluster
// pod networking with real kubelets creating real pods through kovn-cni, over IPv4 and IPv6.
// It runs on kovn installed from the chart (its pods on the rig's kubelets), as users install
// it, and ends with the chart's own checks (chartSuite: mutual TLS and CA rotation, kubectl
// kovn, helm uninstall and install again); KOVN_E2E_INSTALL=processes runs it on the rig's
// supervised processes, without those.
func TestPodNetwork(t *testing.T) { podNetworkSuite(t, rig.Dual, rig.InstallChart) }

// TestPodNetworkIPv6Only runs the same suite on an IPv6-only rig: fabric, nodes, control
// plane, Service range, pods and the external host have no IPv4, so nothing passes over IPv4 by
// accident.
func TestPodNetworkIPv6Only(t *testing.T) { podNetworkSuite(t, rig.IPv6, rig.InstallProcesses) }

// podNetworkSuite: the subtests share the rig and run in order; later ones rely on the pods the
// earlier ones made. Pods run on c1-n1 and c1-n2; c1-n3 is there so the centralized gateway can
// fail over to a node that is not the pod's own (failover and fallback then egress from
// different nodes).
func podNetworkSuite(t *testing.T, family, install string) {
	cfg := rigConfig(t, 1, 3)
	cfg.Kovn, cfg.IPFamily = true, family
	preferInstall(&cfg, install)
	chart := cfg.Chart() && family == rig.Dual
	if chart {
		chartLab(&cfg)
	}
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	plan := c.plan
	if chart {
		chartPodsOnly(t, c, r)
	}

	c.createPod(testboxPod("default", "a", onNode("c1-n1")))
	c.createPod(testboxPod("default", "b", onNode("c1-n2")))
	start := time.Now()
	a := c.waitRunning("default", "a", 90*time.Second)
	b := c.waitRunning("default", "b", 90*time.Second)
	t.Logf("two pods Running in %.1fs: a=%v (c1-n1) b=%v (c1-n2)", time.Since(start).Seconds(), a.Status.PodIPs, b.Status.PodIPs)
	if !plan.podCIDR.Contains(netip.MustParseAddr(a.Status.PodIP)) || len(a.Status.PodIPs) != len(cfg.PodCIDRs(1)) {
		t.Fatalf("pod a got %v, want one address in each of %v (primary in %s)", a.Status.PodIPs, cfg.PodCIDRs(1), plan.podCIDR)
	}

	familyChecks(t, c, r.State, plan.v6, a, b)
	if family == rig.Dual {
		familyChecks(t, c, r.State, true, a, b)
	}

	t.Run("static IP and MAC honoured", func(t *testing.T) {
		c.t = t
		c.createPod(testboxPod("default", "static", onNode("c1-n2"),
			withAnnotations(annotation.IPAddress, plan.static, annotation.MACAddress, plan.mac)))
		p := c.waitRunning("default", "static", 90*time.Second)
		if p.Status.PodIP != plan.static {
			t.Fatalf("static pod IP %s, want %s", p.Status.PodIP, plan.static)
		}
		withLen := netip.PrefixFrom(netip.MustParseAddr(plan.static), plan.podCIDR.Bits()).String()
		if out := c.mustExec("default", "static", "ip"); !strings.Contains(out, "mac="+plan.mac) || !strings.Contains(out, withLen) {
			t.Fatalf("inside the pod, want mac=%s and %s: %s", plan.mac, withLen, out)
		}
		c.ping("default", "a", plan.static)
	})

	t.Run("IPPool honoured", func(t *testing.T) {
		c.t = t
		if out, err := c.apply(`apiVersion: kovn.io/v1alpha1
kind: IPPool
metadata: {name: pool1}
spec: {subnet: ovn-default, ips: ["` + plan.ipRange() + `"]}
`); err != nil {
			t.Fatalf("create IPPool: %v %s", err, out)
		}
		time.Sleep(time.Second) // let the controller register the pool
		c.createPod(testboxPod("default", "pooled", onNode("c1-n1"), withAnnotations(annotation.IPPool, "pool1")))
		p := c.waitRunning("default", "pooled", 90*time.Second)
		ip := netip.MustParseAddr(p.Status.PodIP)
		if ip.Compare(netip.MustParseAddr(plan.pool[0])) < 0 || ip.Compare(netip.MustParseAddr(plan.pool[1])) > 0 {
			t.Fatalf("pooled pod got %s, outside pool1 %s", ip, plan.ipRange())
		}
		c.ping("default", "pooled", b.Status.PodIP)
	})

	t.Run("StatefulSet pod keeps its IP after delete", func(t *testing.T) {
		c.t = t
		if out, err := c.apply(statefulSetYAML); err != nil {
			t.Fatalf("create StatefulSet: %v %s", err, out)
		}
		p := c.waitRunning("default", "web-0", 90*time.Second)
		before := p.Status.PodIP
		c.deletePod("default", "web-0")
		err := eventually(90*time.Second, func() error {
			q, err := c.kc.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if q.UID == p.UID || q.Status.PodIP == "" {
				return fmt.Errorf("not recreated yet")
			}
			if q.Status.PodIP != before {
				return fmt.Errorf("recreated web-0 has %s, had %s", q.Status.PodIP, before)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c.ping("default", "a", before)
		// Once the StatefulSet is gone its address is freed (the IP object goes).
		if out, err := c.kubectl("delete", "statefulset", "web", "--cascade=foreground", "--wait=true"); err != nil {
			t.Fatalf("delete StatefulSet: %v %s", err, out)
		}
		if err := eventually(60*time.Second, func() error {
			if out, _ := c.kubectl("get", "ips", "web-0.default", "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
				return fmt.Errorf("IP object web-0.default still there")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("bad input is rejected and disturbs nothing", func(t *testing.T) { badInput(t, c, a.Status.PodIP, b.Status.PodIP) })

	t.Run("forged result annotations get no network", func(t *testing.T) { forgedAnnotations(t, c, "a", "b") })

	t.Run("custom VPC: own router, isolated from the default VPC", func(t *testing.T) { customVpc(t, c, "a") })

	t.Run("subnet status: protocol, gateway, used addresses", func(t *testing.T) { subnetStatus(t, c) })

	t.Run("controller restart keeps connectivity, no duplicate IP, no stale rows", func(t *testing.T) {
		controllerRestart(t, c, r.State, a.Status.PodIP)
	})

	t.Run("centralized gateway and failover", func(t *testing.T) { centralizedGateway(t, c, r.State) })

	if chart {
		chartSuite(t, c, r, a, b)
	}
}

const statefulSetYAML = `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {clusterIP: None, selector: {app: web}, ports: [{port: 8080}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web}
spec:
  serviceName: web
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: c1-n2} # a tunnel peer c1-n1 already knows
      terminationGracePeriodSeconds: 1
      containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve]}]
`

func badInput(t *testing.T, c *cluster, aIP, bIP string) {
	c.t = t
	// The same static IP twice: the second pod gets an event and never runs with a wrong address.
	c.createPod(testboxPod("default", "dup", onNode("c1-n1"), withAnnotations(annotation.IPAddress, c.plan.static)))
	msg := c.waitEvent("default", "dup", "IPConflict", 30*time.Second)
	t.Logf("duplicate static IP: %s", msg)
	// Malformed annotations.
	c.createPod(testboxPod("default", "badann", onNode("c1-n1"), withAnnotations(annotation.IPAddress, c.plan.badIP)))
	msg = c.waitEvent("default", "badann", "InvalidNetworkRequest", 30*time.Second)
	t.Logf("malformed annotation: %s", msg)
	// A subnet overlapping the default one: condition False with a clear message.
	if out, err := c.apply("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: overlap}\nspec: {cidrBlock: \"" + c.plan.overlap + "\"}\n"); err != nil {
		t.Fatalf("create overlapping subnet: %v %s", err, out)
	}
	err := eventually(30*time.Second, func() error {
		out, _ := c.kubectl("get", "subnet", "overlap", "-o", "jsonpath={.status.conditions[?(@.type==\"Validated\")].reason}")
		if out != "Overlap" {
			return fmt.Errorf("Validated reason %q", out)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("overlapping subnet: %v", err)
	}
	// A gateway outside the CIDR is rejected by the API server.
	out, err := c.apply(fmt.Sprintf("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: badgw}\nspec: {cidrBlock: %q, gateway: %q}\n", c.plan.badGw[0], c.plan.badGw[1]))
	if err == nil || !strings.Contains(out, "gateway") {
		t.Fatalf("subnet with gateway outside its CIDR was accepted: %v %s", err, out)
	}
	time.Sleep(3 * time.Second)
	for _, name := range []string{"dup", "badann"} {
		p, err := c.kc.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.Status.PodIP != "" {
			t.Fatalf("pod %s started with address %q (err %v)", name, p.Status.PodIP, err)
		}
	}
	c.ping("default", "a", bIP)
	c.ping("default", "static", aIP)
	c.deletePod("default", "dup")
	c.deletePod("default", "badann")
	if out, err := c.kubectl("delete", "subnet", "overlap"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
}

// centralizedGateway: the pod runs on c1-n1, which is not a gateway, so its egress source
// tells failover (to c1-n3) from fallback to its own node (c1-n1): only failover passes.
// Failover follows OVN's gateway health (BFD between the chassis), as the interconnect's does:
// c1-n2's fabric link cut, then its ovn-controller killed, each under a 100 ms probe stream
// from the pod to the external host; egress must move to c1-n3 and, once c1-n2 is back, return
// to it. Node readiness could not do this: a node turns NotReady only after the 20 s grace
// period, longer than the stream's tail that must get every answer.
func centralizedGateway(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	c.createNamespace("central")
	if out, err := c.apply(`apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: central}
spec:
  cidrBlock: "` + c.plan.central + `"
  gatewayType: centralized
  gatewayNodes: [c1-n2, c1-n3]
  natOutgoing: true
  namespaces: [central]
`); err != nil {
		t.Fatalf("create centralized subnet: %v %s", err, out)
	}
	time.Sleep(2 * time.Second)
	c.createPod(testboxPod("central", "c", onNode("c1-n1")))
	p := c.waitRunning("central", "c", 90*time.Second)
	if !inPrefix(p.Status.PodIP, c.plan.central) {
		t.Fatalf("pod in namespace central got %s, want one in %s", p.Status.PodIP, c.plan.central)
	}
	ext := "http://" + hostPort(c.plan.ext(), 8080) + "/"
	byIP := map[string]string{}
	for i := 1; i <= 3; i++ {
		byIP[c.plan.nodeIP(i)] = rig.NodeName(1, i)
	}
	waitEgress := func(want string) {
		t.Helper()
		var seen []string
		err := eventually(30*time.Second, func() error {
			got := egressNode(c, "central", "c", byIP, ext)
			if len(seen) == 0 || seen[len(seen)-1] != got {
				seen = append(seen, got)
			}
			if got != want {
				return fmt.Errorf("egress via %q", got)
			}
			return nil
		})
		if err != nil || slices.Contains(seen, "c1-n1") {
			t.Fatalf("centralized egress: want %s; sources seen %v (c1-n1 is the pod's own node: fallback, not failover) %v", want, seen, err)
		}
	}
	waitEgress("c1-n2")
	leaderOn(t, c, "c1-n2")
	cases := []struct {
		what          string
		fail, restore func()
	}{
		{"fabric link", func() { setFabricLink(t, st.Config, 1, 2, false) }, func() { setFabricLink(t, st.Config, 1, 2, true) }},
		{"ovn-controller", func() { stopComponent(t, c, "c1-n2", "ovn-controller", true) },
			func() { startComponent(t, c, "c1-n2", "ovn-controller") }},
	}
	for _, tc := range cases {
		centralFailover(t, c, tc.what, tc.fail, tc.restore, func() { waitEgress("c1-n3") }, func() { waitEgress("c1-n2") })
	}
}

// leaderOn makes the chart's kovn-controller replica on node the leader, if one runs there,
// by deleting the leading pod elsewhere: the gateway that fails must be the leader's node, so
// that failover cannot wait for a new leader (15 s of lease) and pass only when the leader
// happened to run elsewhere. It logs what it found.
func leaderOn(t *testing.T, c *cluster, node string) {
	t.Helper()
	if !c.st.Config.Chart() {
		t.Logf("kovn-controller runs as a process off the nodes: %s's failure cannot take it down", node)
		return
	}
	pods, err := c.kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=kovn-controller"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName == node })
	if i < 0 {
		t.Logf("no kovn-controller replica on %s, whose failure is tested", node)
		return
	}
	here := pods.Items[i]
	leader := leadingControllerPod(t, c)
	if leader.Spec.NodeName == node {
		t.Logf("kovn-controller leader %s runs on %s, the gateway that fails", leader.Name, node)
		return
	}
	// Deleting the leader is not enough: its replacement races the replica on node for the
	// lease (CI saw it win), and cordoning does not hold it back (the chart's pods tolerate
	// every taint). So the Deployment is scaled to one replica with the replica on node made
	// the dearest to delete (pod-deletion-cost): the ReplicaSet removes the leader, the lease
	// expires, the replica on node takes it; then back to two, the new one a standby.
	ns := "kube-system"
	replicas := c.kubectlOK("-n", ns, "get", "deployment", "kovn-controller", "-o", "jsonpath={.spec.replicas}")
	c.kubectlOK("-n", ns, "annotate", "pod", here.Name, "controller.kubernetes.io/pod-deletion-cost=1000", "--overwrite")
	c.kubectlOK("-n", ns, "scale", "deployment", "kovn-controller", "--replicas=1")
	// The standby must be up and watching SB before the gateway fails: it is the replica that
	// moves the egress while the leader's node is cut off (CI once cut the link while the
	// standby was still starting, and egress stayed down until the lease moved).
	defer func() {
		c.kubectlOK("-n", ns, "scale", "deployment", "kovn-controller", "--replicas="+strings.TrimSpace(replicas))
		c.kubectlOK("-n", ns, "rollout", "status", "deployment/kovn-controller", "--timeout=120s")
	}()
	start := time.Now()
	if err := eventually(90*time.Second, func() error {
		if p := leadingControllerPod(t, c); p.Spec.NodeName != node {
			return fmt.Errorf("leader %s on %s", p.Name, p.Spec.NodeName)
		}
		return nil
	}); err != nil {
		t.Fatalf("the kovn-controller replica on %s did not take the lease: %v", node, err)
	}
	t.Logf("kovn-controller leader moved from %s (on %s) to %s, the gateway that fails, in %.1fs",
		leader.Name, leader.Spec.NodeName, node, time.Since(start).Seconds())
}

// maxCentralFailoverLoss bounds the probes (100 ms apart) a centralized gateway's failover may
// lose: 2 s, room for a loaded CI machine above the 0.5-0.7 s BFD's 100 ms x 5 takes.
const maxCentralFailoverLoss = 20

// centralFailover runs one failover and failback of a centralized subnet's gateway under probe
// streams from pod central/c to the external host and logs what each cost.
func centralFailover(t *testing.T, c *cluster, what string, fail, restore, afterFail, afterRestore func()) {
	t.Helper()
	restored := false
	defer func() { // a failed step must not leave c1-n2 down
		if !restored {
			restore()
		}
	}()
	every := 100 * time.Millisecond
	sent, lost, outage := c.measureUntil(t, "central", "c", c.plan.ext(), streamCount, every, fail, afterFail)
	// BFD at 100 ms x 5 (kovn's default) detects the loss in 0.5 s; OVN's default timers (1 s x 3) lost 27 probes
	// here; Node readiness changes 40 s after the event, long after the stream.
	if lost > maxCentralFailoverLoss {
		t.Errorf("gateway c1-n2's %s lost: %d of %d probes lost (longest outage %s), want at most %d", what, lost, sent, outage, maxCentralFailoverLoss)
	}
	t.Logf("gateway c1-n2's %s lost: egress moved to c1-n3; %d of %d probes lost, longest outage %s", what, lost, sent, outage)
	restored = true
	sent, lost, outage = c.measureUntil(t, "central", "c", c.plan.ext(), failbackCount, every, restore, afterRestore)
	t.Logf("c1-n2's %s back: egress back on c1-n2; %d of %d probes lost, longest outage %s", what, lost, sent, outage)
}

// egressNode is the node whose address the external host saw for a request from the pod, or
// what went wrong.
func egressNode(c *cluster, ns, pod string, byIP map[string]string, url string) string {
	out, err := c.exec(ns, pod, "get", url)
	if err != nil {
		return "error: " + strings.TrimSpace(out)
	}
	// kubectl mixes its own stderr (e.g. websocket warnings) into the output: find the answer line.
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l) // "<hostname> <ip>:<port>"
		if len(f) != 2 {
			continue
		}
		if ap, err := netip.ParseAddrPort(f[1]); err == nil {
			if n, ok := byIP[ap.Addr().String()]; ok {
				return n
			}
			return ap.Addr().String()
		}
	}
	return "unexpected answer: " + out
}
