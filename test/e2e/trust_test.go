package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
)

// forgedAnnotations: a pod whose creator writes kovn's result annotations itself, claiming a
// running pod's address, gets events and no network: the controller gives it no IP object and
// no switch port, the daemon does not plumb it, and the victim keeps every packet.
func forgedAnnotations(t *testing.T, c *cluster, victim, peer string) {
	c.t = t
	victimIP := c.podIP("default", victim)
	forged := testboxPod("default", "forger", onNode("c1-n2"), withAnnotations(
		annotation.Allocated, "true", annotation.IPAddress, victimIP, annotation.MACAddress, "0a:58:0a:10:ff:01",
		annotation.CIDR, c.plan.podCIDR.String(), annotation.Gateway, c.plan.forgedGw, annotation.LogicalSwitch, "ovn-default",
		annotation.PortName, "forger.default"))
	c.createPod(forged)
	t.Logf("UntrustedAnnotations: %s", c.waitEvent("default", "forger", "UntrustedAnnotations", 30*time.Second))
	t.Logf("IPConflict: %s", c.waitEvent("default", "forger", "IPConflict", 30*time.Second))
	time.Sleep(5 * time.Second) // long enough for a CNI ADD to have run several times
	p, err := c.kc.CoreV1().Pods("default").Get(context.Background(), "forger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.PodIP != "" {
		t.Fatalf("the forger runs with address %s", p.Status.PodIP)
	}
	if out, _ := c.kubectl("get", "ip", "forger.default", "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("the forger has an IP object: %s", out)
	}
	if out := c.nbctl("--bare", "--columns=name", "find", "Logical_Switch_Port", "name=forger.default"); strings.TrimSpace(out) != "" {
		t.Fatalf("the forger has a switch port: %s", out)
	}
	if out := c.nbctl("--bare", "--columns=addresses", "find", "Logical_Switch_Port", "name="+victim+".default"); !strings.Contains(out, " "+victimIP) {
		t.Fatalf("the victim's port lost its address: %q", out)
	}
	c.pingExact("default", peer, victimIP, 5)
	c.deletePod("default", "forger")
}

// podIP returns a pod's address.
func (c *cluster) podIP(ns, name string) string {
	c.t.Helper()
	p, err := c.kc.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || p.Status.PodIP == "" {
		c.t.Fatalf("pod %s/%s has no address: %v", ns, name, err)
	}
	return p.Status.PodIP
}

// pingExact sends n pings and fails unless all n come back.
func (c *cluster) pingExact(ns, pod, ip string, n int) {
	c.t.Helper()
	out, err := c.exec(ns, pod, "ping", "-c", itoa(n), ip)
	if err != nil || !strings.Contains(out, itoa(n)+" packets transmitted, "+itoa(n)+" received") {
		c.t.Fatalf("ping -c %d %s from %s/%s: want %d of %d replies: %v\n%s", n, ip, ns, pod, n, n, err, out)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
