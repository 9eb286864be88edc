package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// TestForeignAZ peers cluster c1 with an OVN AZ kovn does not run (kovn-rig up --foreign-az:
// its own NB/SB/northd/ovn-controller/ovn-ic, a router "neutron-router" written by
// ovn-nbctl, VMs as veths in netns): the ForeignAZ agrees c1's pod subnets one way and the
// foreign vm-net (10.250.1.0/24, fd00:250:1::/64) the other; the foreign AZ also advertises
// vm-private (10.250.2.0/24, fd00:250:2::/64), which is not agreed.
func TestForeignAZ(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn, cfg.ForeignAZ = true, true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	defer func() {
		if t.Failed() {
			t.Logf("foreign AZ:\n%s", cfg.ForeignAZDiagnostics())
			for _, args := range [][]string{{"lr-route-list", "kovn-faz-openstack"}, {"lr-policy-list", "ovn-cluster"}, {"show"}} {
				out, _ := exec.Command("ovn-nbctl", append([]string{"--db=" + c.info.NBAddr, "--timeout=10"}, args...)...).CombinedOutput()
				t.Logf("c1 $ ovn-nbctl %s\n%s", strings.Join(args, " "), out)
			}
			out, _ := c.kubectl("get", "foreignaz", "-o", "yaml")
			t.Logf("ForeignAZs:\n%s", out)
		}
	}()
	c.applyInterConnect("az1", rig.NodeName(1, 1))
	c.waitInterConnect(func(s icStatus) error {
		if s.ready != "True" || len(s.peers) != 0 {
			return fmt.Errorf("ready %q (%s), peers %v: want ready with no clusterset peer (the foreign AZ is none)", s.ready, s.message, s.peers)
		}
		return nil
	})
	f := foreignPlan(cfg)
	start := time.Now()
	c.applyForeignAZ(f.transit, f.podCIDRs, f.agreed)
	c.waitForeignAZ(func(s fazStatus) error {
		if s.ready != "True" || s.learned != spaced(f.agreed) || s.refused != spaced(f.private) || s.advertised != spaced(f.podCIDRs) {
			return fmt.Errorf("%+v", s)
		}
		if s.agreed != "False" || !strings.Contains(s.agreedMsg, rig.ForeignPrivateCIDR.String()) {
			return fmt.Errorf("RoutesAgreed %s %q: want False naming %s", s.agreed, s.agreedMsg, rig.ForeignPrivateCIDR)
		}
		if len(f.unblocked) > 0 && !strings.Contains(s.agreedMsg, "ovn-ic still learns "+fmt.Sprint(f.unblocked)) {
			return fmt.Errorf("RoutesAgreed %q: want it to say ovn-ic still learns %v", s.agreedMsg, f.unblocked)
		}
		return nil
	})
	t.Logf("peered %.1fs after the ForeignAZ was created: learned %v, refused %v (RoutesAgreed=False, event RouteMismatch)",
		time.Since(start).Seconds(), f.agreed, f.private)
	if ev, _ := c.kubectl("get", "events", "-A", "--field-selector", "reason=RouteMismatch,involvedObject.name=openstack", "-o", "name"); strings.TrimSpace(ev) == "" {
		t.Errorf("no RouteMismatch event for the ForeignAZ")
	}

	c.createPod(testboxPod("default", "a", onNode("c1-n2"))) // not the gateway: its traffic crosses the tunnel to c1-n1
	pa := c.waitRunning("default", "a", 90*time.Second)
	podIPs := make([]string, len(f.vm1))
	for i := range f.vm1 {
		podIPs[i] = pa.Status.PodIPs[i].IP
	}
	// The peering router's routes: the agreed local prefixes, the learned agreed foreign
	// ones, and any refused prefix the blacklist cannot carry (IPv6, f.unblocked).
	agreedRoutes := maskedSorted(slices.Concat(f.podCIDRs, f.agreed, f.unblocked))

	t.Run("pod and VM reach each other, neither sees NAT", func(t *testing.T) {
		c.t = t
		for i, vm1 := range f.vm1 {
			podIP := podIPs[i]
			c.pingNewPeer("default", "a", vm1)
			out, err := cfg.ForeignVMTestbox(1, "ping", "-c", strconv.Itoa(pingCount), "-W", "1s", podIP)
			if _, perr := pingResult(out, pingCount, false); err != nil || perr != nil {
				t.Fatalf("vm1 -> pod %s: %v %v\n%s", podIP, err, perr, out)
			}
			seen := func(ip string) string { return " " + strings.TrimSuffix(hostPort(ip, 0), "0") }
			if out := c.mustExec("default", "a", "get", "http://"+hostPort(vm1, 8080)+"/"); !strings.Contains(out, seen(podIP)) {
				t.Errorf("pod -> vm1 HTTP: the VM saw %q, want the pod's address %s", out, podIP)
			}
			out, err = cfg.ForeignVMTestbox(1, "get", "http://"+hostPort(podIP, 8080)+"/")
			if err != nil || !strings.Contains(out, seen(vm1)) {
				t.Errorf("vm1 -> pod HTTP: the pod saw %q (%v), want the VM's address %s", out, err, vm1)
			}
			if out := c.mustExec("default", "a", "tcp", hostPort(vm1, 9000), "hello-openstack"); !strings.Contains(out, "hello-openstack") {
				t.Errorf("pod -> vm1 TCP echo: %q", out)
			}
			t.Logf("pod %s <-> vm1 %s: ping %d/%d both ways, HTTP both ways with the peer's own address, TCP echo", podIP, vm1, pingCount, pingCount)
		}
	})

	t.Run("only the agreed CIDRs are advertised and learned", func(t *testing.T) {
		c.t = t
		// c1 learned the agreed foreign prefixes, and routes to them (only) by policy.
		if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, agreedRoutes) {
			t.Errorf("c1's peering router routes %v, want %v", routes, agreedRoutes)
		}
		pol := c.nbctl("lr-policy-list", "ovn-cluster")
		for _, p := range f.agreed {
			if !strings.Contains(pol, p) {
				t.Errorf("ovn-cluster has no policy to %s:\n%s", p, pol)
			}
		}
		for _, p := range f.private {
			if strings.Contains(pol, p) {
				t.Errorf("ovn-cluster routes the refused %s:\n%s", p, pol)
			}
		}
		// The foreign AZ learned c1's agreed prefixes and nothing else of c1.
		learned := foreignLearned(t, cfg)
		if !slices.Equal(learned, maskedSorted(f.podCIDRs)) {
			t.Errorf("the foreign router learned %v from c1, want exactly %v", learned, f.podCIDRs)
		}
		// IC-SB: c1 advertises exactly the agreed prefixes on the foreign switch, and no
		// foreign prefix on kovn's own (the clusterset never hears of them).
		if got := icRoutes(t, cfg, "az1", rig.ForeignTransitSwitch); !slices.Equal(got, maskedSorted(f.podCIDRs)) {
			t.Errorf("c1's routes on %s: %v, want exactly %v", rig.ForeignTransitSwitch, got, f.podCIDRs)
		}
		for _, p := range icRoutes(t, cfg, "az1", "kovn-ts") {
			for _, foreign := range slices.Concat(f.agreed, f.private) {
				if netip.MustParsePrefix(foreign).Overlaps(netip.MustParsePrefix(p)) {
					t.Errorf("c1 advertises the foreign %s to the clusterset on kovn-ts", p)
				}
			}
		}
		// vm-private is not reachable from the pod, nor the pod from vm2.
		for i, vm2 := range f.vm2 {
			if out, _ := c.exec("default", "a", "ping", "-c", "3", "-W", "1s", vm2); !strings.Contains(out, "3 packets transmitted, 0 received") {
				t.Errorf("pod -> vm2 %s (not agreed): %s", vm2, out)
			}
			if out, _ := cfg.ForeignVMTestbox(2, "ping", "-c", "3", "-W", "1s", podIPs[i]); !strings.Contains(out, "3 packets transmitted, 0 received") {
				t.Errorf("vm2 (not agreed) -> pod %s: %s", podIPs[i], out)
			}
		}
		t.Logf("learned by c1 and routed to: %v; learned by the foreign AZ: %v; pod <-> vm2: 0 of 3 both ways in %d families",
			f.agreed, learned, len(f.vm2))
	})

	t.Run("a bad spec is reported and the last good peering stays", func(t *testing.T) {
		c.t = t
		bad := slices.Clone(f.transit)
		bad[0] = "169.254.60.0/24"
		c.applyForeignAZ(bad, f.podCIDRs, f.agreed)
		c.waitForeignAZ(func(s fazStatus) error {
			if s.validated != "False" || !strings.Contains(s.validatedMsg, "169.254.60.0/24") || s.ready != "False" ||
				!strings.Contains(s.readyMsg, "last valid spec stays programmed") || s.learned != spaced(f.agreed) {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		for _, vm1 := range f.vm1 {
			c.ping("default", "a", vm1)
		}
		if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, agreedRoutes) {
			t.Errorf("peering router routes %v with the bad spec, want %v", routes, agreedRoutes)
		}
		c.applyForeignAZ(f.transit, f.podCIDRs, f.agreed)
		c.waitForeignAZ(func(s fazStatus) error {
			if s.validated != "True" || s.ready != "True" {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		t.Logf("transitAddresses 169.254.60.0/24 refused (Validated=False, Ready=False naming the kept spec); pod -> vm1 %d/%d meanwhile", pingCount, pingCount)
	})

	t.Run("every OVN database takes mutual TLS only; SB RBAC per chassis", func(t *testing.T) { ovsdbIdentity(t, cfg) })
	t.Run("a broken clusterset Secret is reported and the last good certificate stays", func(t *testing.T) {
		brokenClustersetSecret(t, c)
	})

	t.Run("acceptCIDRs widened at run time: vm-private learned", func(t *testing.T) {
		c.t = t
		changed := time.Now()
		c.applyForeignAZ(f.transit, f.podCIDRs, f.wide)
		all := maskedSorted(slices.Concat(f.agreed, f.private))
		c.waitForeignAZ(func(s fazStatus) error {
			if s.learned != spaced(all) || s.refused != "" || s.agreed != "True" {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		// ovn-ic learns them once the blacklist no longer names them.
		want := maskedSorted(slices.Concat(f.podCIDRs, all))
		if err := eventually(10*time.Second, func() error {
			if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, want) {
				return fmt.Errorf("peering router routes %v, want %v", routes, want)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		learnedAfter := time.Since(changed)
		for _, vm2 := range f.vm2 {
			c.ping("default", "a", vm2)
		}
		t.Logf("%v learned %.1fs after acceptCIDRs became %v (RoutesAgreed=True); pod -> vm2 %d/%d in %d families",
			f.private, learnedAfter.Seconds(), f.wide, pingCount, pingCount, len(f.vm2))
	})

	t.Run("the foreign AZ removed: its routes go within 5 s", func(t *testing.T) {
		c.t = t
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		removed := time.Now()
		if err := r.RemoveForeignAZ(ctx); err != nil {
			t.Fatal(err)
		}
		var gone time.Duration
		if err := eventually(5*time.Second, func() error {
			if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, maskedSorted(f.podCIDRs)) {
				return fmt.Errorf("learned routes still there: %v", routes)
			}
			if pol := c.nbctl("lr-policy-list", "ovn-cluster"); strings.Contains(pol, "10.250.") || strings.Contains(pol, "fd00:250:") {
				return fmt.Errorf("policy still there:\n%s", pol)
			}
			gone = time.Since(removed)
			return nil
		}); err != nil {
			t.Fatalf("5 s after the foreign AZ left IC-SB: %v", err)
		}
		t.Logf("c1's routes and policies to the foreign AZ gone %.2fs after it left IC-SB", gone.Seconds())
		for _, vm1 := range f.vm1 {
			if out, _ := c.exec("default", "a", "ping", "-c", "3", "-W", "1s", vm1); !strings.Contains(out, "3 packets transmitted, 0 received") {
				t.Errorf("pod -> vm1 %s after the removal: %s", vm1, out)
			}
		}
		c.waitForeignAZ(func(s fazStatus) error {
			if s.learned != "" || !strings.Contains(s.agreedMsg, "advertises nothing inside") {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
	})

	t.Run("ForeignAZ deleted: the peering is gone", func(t *testing.T) {
		c.t = t
		if out, err := c.kubectl("delete", "foreignaz", "openstack", "--wait"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if err := eventually(10*time.Second, func() error {
			if lrs := c.nbctl("lr-list"); strings.Contains(lrs, "kovn-faz-openstack") {
				return fmt.Errorf("peering router still there: %s", lrs)
			}
			if ports := c.nbctl("lrp-list", "ovn-cluster"); strings.Contains(ports, "kovn-faz") {
				return fmt.Errorf("link port still on ovn-cluster: %s", ports)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// foreignFamilies is the ForeignAZ test's plan, per family the rig's pods have (IPv4 first):
// the ForeignAZ's fields, the VMs' addresses, and which foreign prefixes are agreed.
type foreignFamilies struct {
	transit, podCIDRs, agreed, private, wide []string
	vm1, vm2                                 []string
	// unblocked are the refused prefixes OVN 23.03's blacklist cannot carry (IPv6 ones no
	// longer than the pod subnet): learned onto the peering router, routed to by nothing.
	unblocked []string
}

func foreignPlan(cfg rig.Config) foreignFamilies {
	var f foreignFamilies
	for _, p := range cfg.PodCIDRs(1) {
		f.podCIDRs = append(f.podCIDRs, p.String())
		if p.Addr().Is4() {
			f.transit = append(f.transit, "169.254.60.1/24")
			f.agreed, f.private = append(f.agreed, rig.ForeignAgreedCIDR.String()), append(f.private, rig.ForeignPrivateCIDR.String())
			f.wide = append(f.wide, "10.250.0.0/16")
			f.vm1, f.vm2 = append(f.vm1, rig.ForeignVM1IP.String()), append(f.vm2, rig.ForeignVM2IP.String())
			continue
		}
		f.transit = append(f.transit, "fd00:a9fe:3c::1/64")
		f.agreed, f.private = append(f.agreed, rig.ForeignAgreedCIDR6.String()), append(f.private, rig.ForeignPrivateCIDR6.String())
		f.wide = append(f.wide, "fd00:250::/32")
		f.vm1, f.vm2 = append(f.vm1, rig.ForeignVM1IP6.String()), append(f.vm2, rig.ForeignVM2IP6.String())
		if rig.ForeignPrivateCIDR6.Bits() <= p.Bits() {
			f.unblocked = append(f.unblocked, rig.ForeignPrivateCIDR6.String())
		}
	}
	return f
}

// applyForeignAZ writes the ForeignAZ "openstack" with these fields.
func (c *cluster) applyForeignAZ(transit, advertise, accept []string) {
	c.t.Helper()
	if out, err := c.apply(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: ForeignAZ
metadata: {name: openstack}
spec:
  az: %s
  transitSwitch: %s
  transitAddresses: [%s]
  advertiseCIDRs: [%s]
  acceptCIDRs: [%s]
`, rig.ForeignAZName, rig.ForeignTransitSwitch, quotedList(transit), quotedList(advertise), quotedList(accept))); err != nil {
		c.t.Fatalf("apply ForeignAZ: %v\n%s", err, out)
	}
}

// spaced is how kubectl's jsonpath prints a sorted list: space-separated.
func spaced(ps []string) string { return strings.Join(maskedSorted(ps), " ") }

// fazStatus is what `kubectl get foreignaz openstack` reports.
type fazStatus struct {
	ready, readyMsg, agreed, agreedMsg, advertised, learned, refused, validated, validatedMsg string
}

func (c *cluster) foreignAZStatus() fazStatus {
	c.t.Helper()
	out, _ := c.kubectl("get", "foreignaz", "openstack", "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status}|{.status.conditions[?(@.type=="Ready")].message}|`+
			`{.status.conditions[?(@.type=="RoutesAgreed")].status}|{.status.conditions[?(@.type=="RoutesAgreed")].message}|`+
			`{.status.advertised[*]}|{.status.learned[*]}|{.status.refused[*]}|`+
			`{.status.conditions[?(@.type=="Validated")].status}|{.status.conditions[?(@.type=="Validated")].message}`)
	f := strings.Split(out, "|")
	for len(f) < 9 {
		f = append(f, "")
	}
	return fazStatus{ready: f[0], readyMsg: f[1], agreed: f[2], agreedMsg: f[3], advertised: f[4], learned: f[5], refused: f[6],
		validated: f[7], validatedMsg: f[8]}
}

func (c *cluster) waitForeignAZ(ok func(fazStatus) error) {
	c.t.Helper()
	if err := eventually(60*time.Second, func() error { return ok(c.foreignAZStatus()) }); err != nil {
		out, _ := c.kubectl("get", "foreignaz", "openstack", "-o", "yaml")
		c.t.Fatalf("ForeignAZ: %v\n%s", err, out)
	}
}

// foreignLearned are the routes ovn-ic learned onto the foreign router, sorted.
func foreignLearned(t *testing.T, cfg rig.Config) []string {
	t.Helper()
	out, err := exec.Command("ovn-nbctl", "--db="+cfg.ForeignNBDB(), "--timeout=10", "--bare", "--columns=ip_prefix",
		"find", "Logical_Router_Static_Route", "external_ids:ic-learned-route!=\"\"").CombinedOutput()
	if err != nil {
		t.Fatalf("foreign NB: %v %s", err, out)
	}
	return maskedSorted(strings.Fields(string(out)))
}

// maskedSorted masks each prefix (ovn-ic 23.03 writes a connected network as its router
// port's address with the length: 10.250.1.1/24) and sorts them.
func maskedSorted(ps []string) []string {
	var out []string
	for _, s := range ps {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked().String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// routePrefixes are the prefixes of router's static routes in c's NB, masked and sorted.
func (c *cluster) routePrefixes(router string) []string {
	c.t.Helper()
	var ps []string
	for _, l := range strings.Split(c.nbctl("lr-route-list", router), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.Contains(f[0], "/") {
			ps = append(ps, f[0])
		}
	}
	return maskedSorted(ps)
}

// icRoutes are the prefixes AZ az advertises on transit switch ts in IC-SB, sorted.
func icRoutes(t *testing.T, cfg rig.Config, az, ts string) []string {
	t.Helper()
	sbctl := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", cfg.ICNS(), "ovn-ic-sbctl", "--db=" + cfg.ICSBLocal(),
			"--no-leader-only", "--timeout=10", "--bare"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-ic-sbctl %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	uuid := sbctl("--columns=_uuid", "find", "Availability_Zone", "name="+az)
	return maskedSorted(strings.Fields(sbctl("--columns=ip_prefix", "find", "Route", "availability_zone="+uuid, "transit_switch="+ts)))
}
