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
// ovn-nbctl, VMs as veths in netns): the ForeignAZ agrees c1's IPv4 pod subnet one way and
// the foreign vm-net (10.250.1.0/24) the other; the foreign AZ also advertises vm-private
// (10.250.2.0/24), which is not agreed.
func TestForeignAZ(t *testing.T) {
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
	podCIDR := cfg.PodCIDRs(1)[0]
	start := time.Now()
	if out, err := c.apply(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: ForeignAZ
metadata: {name: openstack}
spec:
  az: %s
  transitSwitch: %s
  transitAddresses: ["169.254.60.1/24"]
  advertiseCIDRs: ["%s"]
  acceptCIDRs: ["%s"]
`, rig.ForeignAZName, rig.ForeignTransitSwitch, podCIDR, rig.ForeignAgreedCIDR)); err != nil {
		t.Fatalf("apply ForeignAZ: %v\n%s", err, out)
	}
	c.waitForeignAZ(func(s fazStatus) error {
		if s.ready != "True" || s.learned != rig.ForeignAgreedCIDR.String() || s.refused != rig.ForeignPrivateCIDR.String() || s.advertised != podCIDR.String() {
			return fmt.Errorf("%+v", s)
		}
		if s.agreed != "False" || !strings.Contains(s.agreedMsg, rig.ForeignPrivateCIDR.String()) {
			return fmt.Errorf("RoutesAgreed %s %q: want False naming %s", s.agreed, s.agreedMsg, rig.ForeignPrivateCIDR)
		}
		return nil
	})
	t.Logf("peered %.1fs after the ForeignAZ was created: learned %s, refused %s (RoutesAgreed=False, event RouteMismatch)",
		time.Since(start).Seconds(), rig.ForeignAgreedCIDR, rig.ForeignPrivateCIDR)
	if ev, _ := c.kubectl("get", "events", "-A", "--field-selector", "reason=RouteMismatch,involvedObject.name=openstack", "-o", "name"); strings.TrimSpace(ev) == "" {
		t.Errorf("no RouteMismatch event for the ForeignAZ")
	}

	c.createPod(testboxPod("default", "a", onNode("c1-n2"))) // not the gateway: its traffic crosses the tunnel to c1-n1
	pa := c.waitRunning("default", "a", 90*time.Second)
	podIP := pa.Status.PodIPs[0].IP
	vm1, vm2 := rig.ForeignVM1IP.String(), rig.ForeignVM2IP.String()

	t.Run("pod and VM reach each other, neither sees NAT", func(t *testing.T) {
		c.t = t
		c.pingNewPeer("default", "a", vm1)
		out, err := cfg.ForeignVMTestbox(1, "ping", "-c", strconv.Itoa(pingCount), "-W", "1s", podIP)
		if _, perr := pingResult(out, pingCount, false); err != nil || perr != nil {
			t.Fatalf("vm1 -> pod %s: %v %v\n%s", podIP, err, perr, out)
		}
		if out := c.mustExec("default", "a", "get", "http://"+hostPort(vm1, 8080)+"/"); !strings.Contains(out, " "+podIP+":") {
			t.Errorf("pod -> vm1 HTTP: the VM saw %q, want the pod's address %s", out, podIP)
		}
		out, err = cfg.ForeignVMTestbox(1, "get", "http://"+hostPort(podIP, 8080)+"/")
		if err != nil || !strings.Contains(out, " "+vm1+":") {
			t.Errorf("vm1 -> pod HTTP: the pod saw %q (%v), want the VM's address %s", out, err, vm1)
		}
		if out := c.mustExec("default", "a", "tcp", hostPort(vm1, 9000), "hello-openstack"); !strings.Contains(out, "hello-openstack") {
			t.Errorf("pod -> vm1 TCP echo: %q", out)
		}
		t.Logf("pod <-> vm1: ping %d/%d both ways, HTTP both ways with the peer's own address, TCP echo", pingCount, pingCount)
	})

	t.Run("only the agreed CIDRs are advertised and learned", func(t *testing.T) {
		c.t = t
		// c1 learned the agreed foreign prefix only, and routes to it by policy.
		if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, []string{podCIDR.String(), rig.ForeignAgreedCIDR.String()}) {
			t.Errorf("c1's peering router routes %v, want its agreed %s and the learned %s only", routes, podCIDR, rig.ForeignAgreedCIDR)
		}
		if pol := c.nbctl("lr-policy-list", "ovn-cluster"); strings.Contains(pol, rig.ForeignPrivateCIDR.String()) || !strings.Contains(pol, rig.ForeignAgreedCIDR.String()) {
			t.Errorf("ovn-cluster policies:\n%s", pol)
		}
		// The foreign AZ learned c1's agreed prefix and nothing else of c1.
		learned := foreignLearned(t, cfg)
		if !slices.Equal(learned, []string{podCIDR.String()}) {
			t.Errorf("the foreign router learned %v from c1, want exactly %s", learned, podCIDR)
		}
		// IC-SB: c1 advertises exactly the agreed prefix on the foreign switch, and no foreign
		// prefix on kovn's own (the clusterset never hears of it).
		if got := icRoutes(t, cfg, "az1", rig.ForeignTransitSwitch); !slices.Equal(got, []string{podCIDR.String()}) {
			t.Errorf("c1's routes on %s: %v, want exactly %s", rig.ForeignTransitSwitch, got, podCIDR)
		}
		for _, p := range icRoutes(t, cfg, "az1", "kovn-ts") {
			if rig.ForeignAgreedCIDR.Overlaps(netip.MustParsePrefix(p)) || rig.ForeignPrivateCIDR.Overlaps(netip.MustParsePrefix(p)) {
				t.Errorf("c1 advertises the foreign %s to the clusterset on kovn-ts", p)
			}
		}
		// vm-private is not reachable from the pod, nor the pod from vm2.
		if out, _ := c.exec("default", "a", "ping", "-c", "3", "-W", "1s", vm2); !strings.Contains(out, "3 packets transmitted, 0 received") {
			t.Errorf("pod -> vm2 (not agreed): %s", out)
		}
		if out, _ := cfg.ForeignVMTestbox(2, "ping", "-c", "3", "-W", "1s", podIP); !strings.Contains(out, "3 packets transmitted, 0 received") {
			t.Errorf("vm2 (not agreed) -> pod: %s", out)
		}
		t.Logf("learned by c1: %s only; learned by the foreign AZ: %v; pod <-> vm2: 0 of 3 both ways", rig.ForeignAgreedCIDR, learned)
	})

	t.Run("a bad spec is reported and the last good peering stays", func(t *testing.T) {
		c.t = t
		if out, err := c.kubectl("patch", "foreignaz", "openstack", "--type=merge", "-p", `{"spec":{"transitAddresses":["169.254.60.0/24"]}}`); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		c.waitForeignAZ(func(s fazStatus) error {
			if s.validated != "False" || !strings.Contains(s.validatedMsg, "169.254.60.0/24") || s.ready != "False" ||
				!strings.Contains(s.readyMsg, "last valid spec stays programmed") || s.learned != rig.ForeignAgreedCIDR.String() {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		c.ping("default", "a", vm1)
		if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, []string{podCIDR.String(), rig.ForeignAgreedCIDR.String()}) {
			t.Errorf("peering router routes %v with the bad spec", routes)
		}
		if out, err := c.kubectl("patch", "foreignaz", "openstack", "--type=merge", "-p", `{"spec":{"transitAddresses":["169.254.60.1/24"]}}`); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		c.waitForeignAZ(func(s fazStatus) error {
			if s.validated != "True" || s.ready != "True" {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		t.Logf("transitAddresses 169.254.60.0/24 refused (Validated=False, Ready=False naming the kept spec); pod -> vm1 %d/%d meanwhile", pingCount, pingCount)
	})

	t.Run("acceptCIDRs widened at run time: vm-private learned", func(t *testing.T) {
		c.t = t
		changed := time.Now()
		if out, err := c.kubectl("patch", "foreignaz", "openstack", "--type=merge", "-p", `{"spec":{"acceptCIDRs":["10.250.0.0/16"]}}`); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		c.waitForeignAZ(func(s fazStatus) error {
			if s.learned != rig.ForeignAgreedCIDR.String()+" "+rig.ForeignPrivateCIDR.String() || s.refused != "" || s.agreed != "True" {
				return fmt.Errorf("%+v", s)
			}
			return nil
		})
		// ovn-ic learns it once the blacklist no longer names it.
		if err := eventually(10*time.Second, func() error {
			if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Contains(routes, rig.ForeignPrivateCIDR.String()) {
				return fmt.Errorf("peering router routes %v", routes)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		learnedAfter := time.Since(changed)
		c.ping("default", "a", vm2)
		t.Logf("%s learned %.1fs after acceptCIDRs became 10.250.0.0/16 (RoutesAgreed=True); pod -> vm2 %d/%d", rig.ForeignPrivateCIDR, learnedAfter.Seconds(), pingCount, pingCount)
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
			if routes := c.routePrefixes("kovn-faz-openstack"); !slices.Equal(routes, []string{podCIDR.String()}) {
				return fmt.Errorf("learned routes still there: %v", routes)
			}
			if pol := c.nbctl("lr-policy-list", "ovn-cluster"); strings.Contains(pol, "10.250.") {
				return fmt.Errorf("policy still there:\n%s", pol)
			}
			gone = time.Since(removed)
			return nil
		}); err != nil {
			t.Fatalf("5 s after the foreign AZ left IC-SB: %v", err)
		}
		t.Logf("c1's route and policy to %s gone %.2fs after the foreign AZ left IC-SB", rig.ForeignAgreedCIDR, gone.Seconds())
		if out, _ := c.exec("default", "a", "ping", "-c", "3", "-W", "1s", vm1); !strings.Contains(out, "3 packets transmitted, 0 received") {
			t.Errorf("pod -> vm1 after the removal: %s", out)
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
		out, err := exec.Command("ip", append([]string{"netns", "exec", cfg.ICNS(), "ovn-ic-sbctl", "--db=" + cfg.ICSBEndpoint(),
			"--no-leader-only", "--timeout=10", "--bare"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ovn-ic-sbctl %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	uuid := sbctl("--columns=_uuid", "find", "Availability_Zone", "name="+az)
	return maskedSorted(strings.Fields(sbctl("--columns=ip_prefix", "find", "Route", "availability_zone="+uuid, "transit_switch="+ts)))
}
