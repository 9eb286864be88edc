package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// customVpc: a Vpc is its own router. Its pods reach each other across nodes; pods of the
// default VPC cannot reach them and they cannot reach the default VPC's pods; its static
// routes land on its router.
func customVpc(t *testing.T, c *cluster, defaultPod string) {
	c.t = t
	c.createNamespace("blue")
	if out, err := c.apply(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: Vpc
metadata: {name: blue}
spec:
  namespaces: [blue]
  staticRoutes: [{cidr: %q, nextHopIP: %q}]
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: blue-net}
spec: {vpc: blue, cidrBlock: %q, namespaces: [blue]}
`, c.plan.route[0], c.plan.route[1], c.plan.vpc)); err != nil {
		t.Fatalf("create Vpc and Subnet: %v %s", err, out)
	}
	if err := eventually(30*time.Second, func() error {
		out, _ := c.kubectl("get", "vpc", "blue", "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.subnets}")
		if out != "True [\"blue-net\"]" {
			return fmt.Errorf("vpc blue: %q", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.createPod(testboxPod("blue", "blue1", onNode("c1-n1")))
	c.createPod(testboxPod("blue", "blue2", onNode("c1-n2")))
	b1 := c.waitRunning("blue", "blue1", 90*time.Second).Status.PodIP
	b2 := c.waitRunning("blue", "blue2", 90*time.Second).Status.PodIP
	if !inPrefix(b1, c.plan.vpc) || !inPrefix(b2, c.plan.vpc) {
		t.Fatalf("blue pods got %s and %s, want addresses in %s", b1, b2, c.plan.vpc)
	}
	c.ping("blue", "blue1", b2) // the first packet to a new tunnel peer may be lost (RIG-NOTES)
	c.pingExact("blue", "blue1", b2, 5)
	if out := c.mustExec("blue", "blue2", "tcp", hostPort(b1, 9000), "blue"); !strings.Contains(out, "blue") {
		t.Fatalf("TCP echo blue2->blue1: %q", out)
	}
	defIP := c.podIP("default", defaultPod)
	for _, probe := range []struct{ ns, pod, ip string }{{"default", defaultPod, b1}, {"blue", "blue1", defIP}} {
		out, _ := c.exec(probe.ns, probe.pod, "ping", "-c", "3", "-W", "1s", probe.ip)
		if !strings.Contains(out, "3 packets transmitted, 0 received") {
			t.Fatalf("VPC isolation: %s/%s -> %s: %s", probe.ns, probe.pod, probe.ip, out)
		}
	}
	if out := c.nbctl("lr-route-list", "blue"); !strings.Contains(out, c.plan.route[0]) || !strings.Contains(out, c.plan.route[1]) {
		t.Fatalf("blue's static route not on its router:\n%s", out)
	}
	for _, p := range []string{"blue1", "blue2"} {
		c.deletePod("blue", p)
	}
}
