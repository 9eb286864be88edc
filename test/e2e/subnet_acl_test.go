package e2e

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// subnetACLs: an admin's drop on TCP 8080 from Subnet acla into Subnet aclb (spec.acls of
// aclb, both families) refuses exactly acla's connections to aclb's port 8080: the same pod
// still reaches port 9000, aclb's own pod and outside (a default-subnet pod) still reach 8080.
// A change of the rules costs one NB transaction. A match OVN would refuse makes aclb
// Validated=False (InvalidACL) and changes nothing: the same ACL rows, the same matrix.
// Removing the rules opens the port again.
func subnetACLs(t *testing.T, c *cluster, st *rig.State, outside probePod) {
	c.t = t
	fams := families(st.Config)
	a4, a6 := netip.MustParsePrefix("10.211.0.0/24"), netip.MustParsePrefix("fd00:211::/64")
	var aCIDRs, bCIDRs []netip.Prefix
	if st.Config.HasIPv4() {
		aCIDRs, bCIDRs = append(aCIDRs, a4), append(bCIDRs, netip.MustParsePrefix("10.212.0.0/24"))
	}
	if st.Config.HasIPv6() {
		aCIDRs, bCIDRs = append(aCIDRs, a6), append(bCIDRs, netip.MustParsePrefix("fd00:212::/64"))
	}
	for _, s := range []struct {
		name  string
		cidrs []netip.Prefix
	}{{"acla", aCIDRs}, {"aclb", bCIDRs}} {
		c.createNamespace(s.name)
		c.applyYAML(fmt.Sprintf("apiVersion: kovn.io/v1alpha1\nkind: Subnet\nmetadata: {name: %s}\nspec: {cidrBlock: %q, namespaces: [%s]}\n",
			s.name, joinPrefixes(s.cidrs), s.name))
		c.waitSubnetReady(s.name)
	}
	a := c.aclPod("acla", "a", "c1-n1")
	b := c.aclPod("aclb", "b", "c1-n2")
	b2 := c.aclPod("aclb", "b2", "c1-n1")
	sources := []probePod{a, b2, outside}
	matrix := func() map[string]bool { // the sources probe side by side, one exec each
		got := map[string]bool{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, src := range sources {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := c.probeOnce(src, append(targets(b, fams, 8080), targets(b, fams, 9000)...))
				mu.Lock()
				defer mu.Unlock()
				for addr, ok := range res {
					got[src.ns+"/"+src.name+" -> "+addr] = ok
				}
			}()
		}
		wg.Wait()
		return got
	}
	denied := func(src probePod, port uint16) bool { return src.ns == "acla" && port == 8080 }
	// waitMatrix waits until every pair is as deny says, then checks it twice more.
	waitMatrix := func(deny func(probePod, uint16) bool) map[string]bool {
		c.t.Helper()
		want := map[string]bool{}
		for _, src := range sources {
			for _, port := range []uint16{8080, 9000} {
				for _, tg := range targets(b, fams, port) {
					want[src.ns+"/"+src.name+" -> "+tg] = !deny(src, port)
				}
			}
		}
		var got map[string]bool
		diff := func() []string {
			var d []string
			for k, w := range want {
				if got[k] != w {
					d = append(d, fmt.Sprintf("%s: ok=%t, want %t", k, got[k], w))
				}
			}
			sort.Strings(d)
			return d
		}
		if err := eventually(20*time.Second, func() error {
			if got = matrix(); len(diff()) > 0 {
				return fmt.Errorf("%s", strings.Join(diff(), "; "))
			}
			return nil
		}); err != nil {
			c.t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			time.Sleep(500 * time.Millisecond)
			if got = matrix(); len(diff()) > 0 {
				c.t.Fatalf("the matrix changed: %s", strings.Join(diff(), "; "))
			}
		}
		return got
	}
	logMatrix := func(what string, m map[string]bool) {
		var lines []string
		for k, ok := range m {
			lines = append(lines, fmt.Sprintf("%-8s %s", map[bool]string{true: "allowed", false: "DENIED"}[ok], k))
		}
		sort.Strings(lines)
		c.t.Logf("%s:\n  %s", what, strings.Join(lines, "\n  "))
	}
	setACLs := func(acls string) {
		c.t.Helper()
		c.kubectlOK("patch", "subnet", "aclb", "--type=merge", "-p", `{"spec":{"acls":`+acls+`}}`)
	}
	var rules []string
	for _, p := range aCIDRs {
		f := "ip4"
		if p.Addr().Is6() {
			f = "ip6"
		}
		rules = append(rules, fmt.Sprintf(`{"direction":"to-lport","priority":100,"match":"%s.src == %s && tcp.dst == 8080","action":"drop"}`, f, p))
	}
	drop := "[" + strings.Join(rules, ",") + "]"

	t.Run("no rule: every pair connects", func(t *testing.T) {
		c.t = t
		logMatrix("before", waitMatrix(func(probePod, uint16) bool { return false }))
	})
	t.Run("drop TCP 8080 from acla: exactly acla's pairs to 8080 refused, in one NB transaction", func(t *testing.T) {
		c.t = t
		txns := func() float64 {
			out := nodeTestbox(t, st, st.Config.ControlPlaneNS(1), "get", fmt.Sprintf("http://127.0.0.1:%d/metrics", rig.PortControllerMetrics))
			return value(out, `kovn_nb_transactions_total{owner_type="Subnet"}`)
		}
		before := txns()
		setACLs(drop)
		logMatrix("with aclb's drop", waitMatrix(denied))
		if n := txns() - before; n != 1 {
			t.Errorf("the rules cost %v NB transactions, want 1", n)
		}
		if rows := c.subnetACLRows("aclb"); len(rows) != len(aCIDRs) {
			t.Errorf("aclb's switch holds %d kovn Subnet ACLs, want %d: %v", len(rows), len(aCIDRs), rows)
		}
	})
	t.Run("a match OVN would refuse: InvalidACL, the last rules stay", func(t *testing.T) {
		c.t = t
		rows := c.subnetACLRows("aclb")
		setACLs(`[{"direction":"to-lport","priority":100,"match":"ip4.src == 10.211.0.1/24 && tcp.dst == 8080","action":"drop"}]`)
		c.waitSubnetCondition("aclb", "Validated", "False", "InvalidACL", 20*time.Second)
		msg, _ := c.kubectl("get", "subnet", "aclb", "-o", `jsonpath={.status.conditions[?(@.type=="Validated")].message}`)
		if !strings.Contains(msg, "spec.acls[0].match") || !strings.Contains(msg, "host bits set") {
			t.Errorf("Validated message %q does not say which match and why", msg)
		}
		t.Logf("aclb Validated=False: %s", msg)
		setACLs(`[{"direction":"to-lport","priority":100,"match":"ip4.src == $no_such_set && tcp.dst == 8080","action":"drop"}]`)
		if err := eventually(20*time.Second, func() error {
			if m, _ := c.kubectl("get", "subnet", "aclb", "-o", `jsonpath={.status.conditions[?(@.type=="Validated")].message}`); !strings.Contains(m, "address set $no_such_set does not exist") {
				return fmt.Errorf("Validated message %q", m)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		waitMatrix(denied)
		if now := c.subnetACLRows("aclb"); strings.Join(now, "\n") != strings.Join(rows, "\n") {
			t.Errorf("ACL rows changed under an invalid spec:\n was %v\n now %v", rows, now)
		}
	})
	t.Run("rules removed: every pair connects again", func(t *testing.T) {
		c.t = t
		setACLs("null")
		c.waitSubnetCondition("aclb", "Validated", "True", "Valid", 20*time.Second)
		waitMatrix(func(probePod, uint16) bool { return false })
		if rows := c.subnetACLRows("aclb"); len(rows) != 0 {
			t.Errorf("Subnet ACL rows left: %v", rows)
		}
	})
}

// aclPod creates a testbox pod (HTTP on 8080, TCP echo on 9000) and waits until it is Ready.
func (c *cluster) aclPod(ns, name, node string) probePod {
	c.t.Helper()
	c.createPod(testboxPod(ns, name, onNode(node)))
	p := c.waitReady(ns, name, 90*time.Second)
	return probePod{ns: ns, name: name, ips: p.Status.PodIPs}
}

// subnetACLRows lists the uuid, priority, match and action of every kovn Subnet ACL of subnet
// (its spec.acls rows, the subnet not being private), sorted.
func (c *cluster) subnetACLRows(subnet string) []string {
	c.t.Helper()
	out := c.nbctl("--bare", "--columns=_uuid,priority,match,action", "find", "ACL",
		fmt.Sprintf(`external_ids:"kovn.io/subnet"=%q`, subnet))
	var rows []string
	for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
		if block = strings.TrimSpace(block); block != "" {
			rows = append(rows, strings.ReplaceAll(block, "\n", " | "))
		}
	}
	sort.Strings(rows)
	return rows
}
