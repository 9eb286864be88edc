package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// subnetStatus: a Subnet's status shows the effective protocol and gateway and, within a
// second of a pod getting or giving up its address, how many addresses are used.
func subnetStatus(t *testing.T, c *cluster) {
	c.t = t
	used := func() (string, error) {
		return c.kubectl("get", "subnet", "ovn-default", "-o", "jsonpath={.status.protocol} {.status.gateway} {.status."+c.plan.used+"}")
	}
	ips := func() int {
		out, _ := c.kubectl("get", "ips", "-l", "kovn.io/subnet=ovn-default", "-o", "name")
		return len(strings.Fields(out))
	}
	check := func(when string) {
		var last string
		if err := eventually(time.Second, func() error {
			out, err := used()
			last = out
			if want := fmt.Sprintf("%s %s %d", c.plan.protocol, c.plan.gateways, ips()); err != nil || out != want {
				return fmt.Errorf("status %q, want %q (%v)", out, want, err)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: subnet status not current within 1s: %v (last %q)", when, err, last)
		}
	}
	check("steady state")
	c.createPod(testboxPod("default", "counted", onNode("c1-n1")))
	c.waitRunning("default", "counted", 90*time.Second)
	check("after a pod started")
	c.deletePod("default", "counted")
	if err := eventually(60*time.Second, func() error {
		if out, _ := c.kubectl("get", "ip", "counted.default", "--ignore-not-found", "-o", "name"); strings.TrimSpace(out) != "" {
			return fmt.Errorf("IP object still there")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("after the pod went")
	out, _ := c.kubectl("get", "subnet", "ovn-default")
	t.Logf("kubectl get subnet:\n%s", out)
	if !strings.Contains(out, c.plan.protocol) || !strings.Contains(out, c.plan.gateways) {
		t.Fatalf("printer columns miss protocol or gateway:\n%s", out)
	}
}
