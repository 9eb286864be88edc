package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	leavingSubnet = "leaving"
	leavingCIDR   = "10.210.0.0/24"
	// holdFor is how long the test watches a Subnet held by its finalizer: long enough for a
	// 1 s liveness probe with failureThreshold 2 to restart the pod many times over.
	holdFor = 35 * time.Second
)

// TestSubnetDeletionKeepsPodsReachable deletes a Subnet while a pod with kubelet probes runs in
// it. The Subnet must stay (finalizer, Ready=False InUse) with its node routes and logical
// switch, so kubelet's probes keep passing (no restart) and a pod on another node still
// reaches it; once the pod goes, the Subnet and its routes go too.
func TestSubnetDeletionKeepsPodsReachable(t *testing.T) {
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	nodeNS := map[string]string{"c1-n1": cfg.NodeNS(1, 1), "c1-n2": cfg.NodeNS(1, 2)}

	c.createNamespace(leavingSubnet)
	if out, err := c.apply(fmt.Sprintf("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: %s}\nspec: {cidrBlock: %s, namespaces: [%s]}\n",
		leavingSubnet, leavingCIDR, leavingSubnet)); err != nil {
		t.Fatalf("create subnet: %v %s", err, out)
	}
	c.waitSubnetCondition(leavingSubnet, "Validated", "True", "", 30*time.Second)
	for node, ns := range nodeNS {
		waitNodeRoute(t, node, ns, true, 30*time.Second)
	}
	c.createPod(probedPod(leavingSubnet, "probed", "c1-n1"))
	c.createPod(testboxPod("default", "client", onNode("c1-n2")))
	p := c.waitReady(leavingSubnet, "probed", 90*time.Second)
	c.waitRunning("default", "client", 90*time.Second)
	c.pingNewPeer("default", "client", p.Status.PodIP) // the first packets from c1-n2 to c1-n1

	if out, err := c.kubectl("delete", "subnet", leavingSubnet, "--wait=false"); err != nil {
		t.Fatalf("delete subnet: %v %s", err, out)
	}
	c.waitSubnetCondition(leavingSubnet, "Ready", "False", "InUse", 30*time.Second)
	held := time.Now()
	for time.Since(held) < holdFor {
		c.assertHeld(nodeNS, p)
		time.Sleep(time.Second)
	}
	c.ping("default", "client", p.Status.PodIP)
	if out := c.mustExec("default", "client", "get", "http://"+p.Status.PodIP+":8080/"); !strings.HasPrefix(out, "probed ") {
		t.Fatalf("HTTP from client to the held pod: %q", out)
	}
	t.Logf("subnet %s held %.0fs by its finalizer: routes on both nodes, switch in NB, probes passing, client->pod 5/5",
		leavingSubnet, holdFor.Seconds())

	c.deletePod(leavingSubnet, "probed")
	gone := time.Now()
	if err := eventually(60*time.Second, func() error {
		if exists, _ := c.subnetDeleting(leavingSubnet); exists {
			return fmt.Errorf("subnet still there")
		}
		return nil
	}); err != nil {
		t.Fatalf("subnet not deleted after its last pod went: %v", err)
	}
	for node, ns := range nodeNS {
		waitNodeRoute(t, node, ns, false, 30*time.Second)
	}
	if err := eventually(30*time.Second, func() error {
		if out := c.nbctl("--bare", "--columns=name", "find", "Logical_Switch", "name="+leavingSubnet); strings.TrimSpace(out) != "" {
			return fmt.Errorf("logical switch %s still in NB", leavingSubnet)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("pod deleted: subnet, node routes and logical switch gone %.1fs later", time.Since(gone).Seconds())
}

// assertHeld checks, once, everything that must survive while the finalizer holds the Subnet.
func (c *cluster) assertHeld(nodeNS map[string]string, p *corev1.Pod) {
	c.t.Helper()
	switch exists, deleting := c.subnetDeleting(leavingSubnet); {
	case !exists:
		c.t.Fatalf("subnet %s went while pod %s holds an address in it", leavingSubnet, p.Name)
	case !deleting:
		c.t.Fatalf("subnet %s is not being deleted", leavingSubnet)
	}
	for node, ns := range nodeNS {
		if !hasNodeRoute(c.t, ns) {
			c.t.Fatalf("route to %s removed from %s while pod %s (%s) still uses it", leavingCIDR, node, p.Name, p.Status.PodIP)
		}
	}
	if out := c.nbctl("--bare", "--columns=name", "find", "Logical_Switch", "name="+leavingSubnet); strings.TrimSpace(out) != leavingSubnet {
		c.t.Fatalf("logical switch %s removed from NB while pod %s uses it", leavingSubnet, p.Name)
	}
	q, err := c.kc.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	if len(q.Status.ContainerStatuses) != 1 {
		c.t.Fatalf("pod %s has %d container statuses", p.Name, len(q.Status.ContainerStatuses))
	}
	cs := q.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || !cs.Ready {
		c.t.Fatalf("pod %s lost its probes while the subnet is held: %+v\nevents:\n%s", p.Name, q.Status.ContainerStatuses, c.events(p.Namespace, p.Name))
	}
}

// probedPod serves HTTP on 8080 with kubelet liveness and readiness probes on it every second:
// kubelet probes from the node's network namespace, so they need the node's route to the pod.
func probedPod(ns, name, node string) *corev1.Pod {
	p := testboxPod(ns, name, onNode(node))
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 2}
	p.Spec.Containers[0].LivenessProbe = probe
	p.Spec.Containers[0].ReadinessProbe = probe.DeepCopy()
	return p
}

// waitReady waits for the pod's Ready condition (its readiness probe passed) and returns it.
func (c *cluster) waitReady(ns, name string, timeout time.Duration) *corev1.Pod {
	c.t.Helper()
	var p *corev1.Pod
	err := eventually(timeout, func() error {
		var err error
		if p, err = c.kc.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
				return nil
			}
		}
		return fmt.Errorf("pod not Ready: %+v", p.Status.Conditions)
	})
	if err != nil {
		c.t.Fatalf("pod %s/%s: %v\nevents:\n%s", ns, name, err, c.events(ns, name))
	}
	return p
}

// subnetDeleting reads whether the Subnet exists and whether its deletion has begun.
func (c *cluster) subnetDeleting(name string) (exists, deleting bool) {
	c.t.Helper()
	out, err := c.kubectl("get", "subnet", name, "--ignore-not-found", "-o", "jsonpath={.metadata.name}/{.metadata.deletionTimestamp}")
	if err != nil {
		c.t.Fatalf("get subnet %s: %v %s", name, err, out)
	}
	n, ts, _ := strings.Cut(strings.TrimSpace(out), "/")
	return n == name, ts != ""
}

// waitSubnetCondition waits until the Subnet's condition has the status (and reason, if set).
func (c *cluster) waitSubnetCondition(name, typ, status, reason string, timeout time.Duration) {
	c.t.Helper()
	path := fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].status}/{.status.conditions[?(@.type=="%s")].reason}`, typ, typ)
	err := eventually(timeout, func() error {
		out, err := c.kubectl("get", "subnet", name, "-o", path)
		got, gotReason, _ := strings.Cut(strings.TrimSpace(out), "/")
		if err != nil || got != status || (reason != "" && gotReason != reason) {
			return fmt.Errorf("%s=%s/%s (%v), want %s/%s", typ, got, gotReason, err, status, reason)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("subnet %s: %v", name, err)
	}
}

// hasNodeRoute reports whether the node's netns routes leavingCIDR through ovn0.
func hasNodeRoute(t *testing.T, ns string) bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "ip", "-4", "route", "show", leavingCIDR).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route in %s: %v %s", ns, err, out)
	}
	return strings.Contains(string(out), "dev ovn0")
}

func waitNodeRoute(t *testing.T, node, ns string, want bool, timeout time.Duration) {
	t.Helper()
	if err := eventually(timeout, func() error {
		if hasNodeRoute(t, ns) != want {
			return fmt.Errorf("route to %s on %s present=%v, want %v", leavingCIDR, node, !want, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
