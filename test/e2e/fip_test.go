package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kovn/kovn/test/rig"
)

// fipStatefulSet is the floating IP's target: one pod whose name survives its deletion, on
// c1-n2, which does not host the external gateway port (c1-n1 does, by priority): traffic
// between it and the external network crosses the overlay to the gateway and back.
const fipStatefulSet = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: fipweb, namespace: default}
spec:
  serviceName: fipweb
  replicas: 1
  selector: {matchLabels: {app: fipweb}}
  template:
    metadata: {labels: {app: fipweb}}
    spec:
      nodeSelector: {kubernetes.io/hostname: c1-n2}
      terminationGracePeriodSeconds: 1
      containers: [{name: testbox, image: kovn.io/testbox:latest, imagePullPolicy: Never, args: [serve]}]
`

// vlanHost is address n of each of VLAN v's subnets (the last byte set to n).
func (l *underlayLab) vlanHost(n byte) []netip.Addr {
	var out []netip.Addr
	for _, p := range l.cfg.VlanCIDRs(l.vlan100) {
		b := p.Addr().AsSlice()
		b[len(b)-1] = n
		a, _ := netip.AddrFromSlice(b)
		out = append(out, a)
	}
	return out
}

// makeExternal makes VLAN 100's Subnet an external network: the default VPC's router gets
// a port on it (.254 / ::254), hosted by the first of nodes that is alive. It returns the
// Subnet's name; dropExternal undoes it.
func (l *underlayLab) makeExternal(t *testing.T, nodes ...int) string {
	t.Helper()
	var names []string
	for _, n := range nodes {
		names = append(names, `"`+rig.NodeName(1, n)+`"`)
	}
	return l.makeExternalWith(t, `"nodes":[`+strings.Join(names, ",")+`]`)
}

// makeExternalWith is makeExternal with the gateway nodes given as JSON fields of
// externalGateway (nodes or nodeSelector).
func (l *underlayLab) makeExternalWith(t *testing.T, gatewayNodes string) string {
	t.Helper()
	c := l.c
	subnet := fmt.Sprintf("ul%d", l.vlan100)
	// The physical router's MAC on VLAN 100, as an admin would give it: OVN 23.03 cannot
	// resolve an IPv6 next hop on its own (its solicitation goes to the wrong multicast group).
	out, err := exec.Command("ip", "-n", l.cfg.PhysRouterNS(), "-br", "link", "show", fmt.Sprintf("eth0.%d", l.vlan100)).CombinedOutput()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 3 {
		t.Fatalf("physical router's VLAN %d interface: %v %s", l.vlan100, err, out)
	}
	c.kubectlOK("patch", "subnet", subnet, "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"externalGateway":{"addresses":[%s],%s,"gatewayMAC":%q}}}`, quoteAddrs(l.vlanHost(254)), gatewayNodes, f[2]))
	c.waitSubnetReady(subnet)
	return subnet
}

func (l *underlayLab) dropExternal() {
	l.c.kubectlOK("patch", "subnet", fmt.Sprintf("ul%d", l.vlan100), "--type=json", "-p", `[{"op":"remove","path":"/spec/externalGateway"}]`)
}

// floatingIP: VLAN 100's Subnet becomes an external network (the default VPC's router gets a
// port on it, hosted by c1-n1), a FloatingIP binds one address per family of it to a
// StatefulSet's pod on c1-n2. The external host reaches the pod on them and sees them as the
// source of the pod's own connections; the pod deleted and recreated is reachable again on
// the same addresses; a second FloatingIP claiming them is refused and changes nothing.
func (l *underlayLab) floatingIP(t *testing.T) {
	c := l.c
	c.t = t
	subnet, fip := l.makeExternal(t, 1, 2), l.vlanHost(200)
	defer l.dropExternal()
	c.applyYAML(fipStatefulSet)
	defer c.kubectlOK("delete", "statefulset", "fipweb", "--wait=false")
	pod := c.waitRunning("default", "fipweb-0", 90*time.Second)
	c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: FloatingIP
metadata: {name: web}
spec: {subnet: %s, addresses: [%s], pod: {namespace: default, name: fipweb-0}}
`, subnet, quoteAddrs(fip)))
	defer c.kubectlOK("delete", "floatingip", "web", "--ignore-not-found")
	c.waitFIP("web", "True", "Reconciled")
	t.Logf("FloatingIP web: %s", c.kubectlOK("get", "floatingip", "web", "-o", "jsonpath={.status.conditions[0].message}"))

	reach := func(why string) {
		t.Helper()
		for i, f := range fip {
			start := time.Now()
			var out string
			err := eventually(60*time.Second, func() error {
				var err error
				out, err = underlayHostExec(l.cfg, "get", fmt.Sprintf("http://%s/", hostPort(f.String(), 8080)))
				if err != nil || !strings.HasPrefix(out, "fipweb-0 ") {
					return fmt.Errorf("%v: %s", err, out)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: external host -> floating IP %s: %v", why, f, err)
			}
			// 1:1 NAT: the pod sees the external host's own address.
			if host := l.cfg.UnderlayHostIPs()[i].String(); !strings.Contains(out, host) {
				t.Errorf("%s: the pod saw %q, want the external host's %s", why, strings.TrimSpace(out), host)
			}
			t.Logf("%s: external host -> %s answered by %s after %.1fs", why, f, strings.TrimSpace(out), time.Since(start).Seconds())
		}
	}
	reach("bound")
	// c1-n2 is on the external network: the translation is distributed there, so the pod's
	// traffic leaves through c1-n2's own NIC (its port on the underlay switch), never c1-n1's.
	// Broadcasts are left out: c1-n2's gratuitous ARPs for the address flood every port.
	if d := c.kubectlOK("get", "floatingip", "web", "-o", "jsonpath={.status.distributed}"); d != "true" {
		t.Errorf("FloatingIP web on c1-n2 (on the external network): distributed %q, want true", d)
	}
	var onN1 string
	onN2 := capture(t, l.cfg.FabricNS(), rig.FabricVlanPort(1, 2), "not ether multicast and vlan and host "+fip[0].String(), func() {
		onN1 = capture(t, l.cfg.FabricNS(), rig.FabricVlanPort(1, 1), "not ether multicast and vlan and host "+fip[0].String(), func() {
			for i, host := range l.cfg.UnderlayHostIPs() {
				out := c.mustExec("default", "fipweb-0", "get", fmt.Sprintf("http://%s/", hostPort(host.String(), 8080)))
				if !strings.Contains(out, fip[i].String()) {
					t.Errorf("pod -> external host %s: seen as %q, want the floating IP %s", host, strings.TrimSpace(out), fip[i])
				}
				t.Logf("pod -> external host %s: seen as %s", host, strings.TrimSpace(out))
			}
		})
	})
	if !strings.Contains(onN2, fip[0].String()) || strings.Contains(onN1, fip[0].String()) {
		t.Errorf("distributed floating IP: want its frames on c1-n2's NIC only\nc1-n2: %s\nc1-n1: %s", onN2, onN1)
	}
	// A pod on c1-n3, which is not on the external network: translated on the gateway (c1-n1).
	c.createPod(testboxPod("default", "farpod", onNode(rig.NodeName(1, l.badNode))))
	defer c.deletePod("default", "farpod")
	c.waitRunning("default", "farpod", 90*time.Second)
	far := l.vlanHost(201)
	c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: FloatingIP
metadata: {name: far}
spec: {subnet: %s, addresses: [%s], pod: {namespace: default, name: farpod}}
`, subnet, quoteAddrs(far)))
	defer c.kubectlOK("delete", "floatingip", "far", "--ignore-not-found")
	t.Logf("FloatingIP far: %s", c.waitFIP("far", "True", "Reconciled"))
	if d := c.kubectlOK("get", "floatingip", "far", "-o", "jsonpath={.status.distributed}"); d == "true" {
		t.Errorf("FloatingIP far on c1-n3 (not on the external network): distributed")
	}
	for i, f := range far {
		if err := eventually(30*time.Second, func() error {
			out, err := underlayHostExec(l.cfg, "get", fmt.Sprintf("http://%s/", hostPort(f.String(), 8080)))
			if err != nil || !strings.HasPrefix(out, "farpod ") || !strings.Contains(out, l.cfg.UnderlayHostIPs()[i].String()) {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		}); err != nil {
			t.Errorf("external host -> farpod's floating IP %s (through the gateway on c1-n1): %v", f, err)
		}
	}
	c.kubectlOK("delete", "floatingip", "far")
	if err := eventually(30*time.Second, func() error {
		if n := len(strings.Fields(c.nbctl("--bare", "--columns=external_ip", "list", "NAT"))); n != len(fip) {
			return fmt.Errorf("%d NAT rows after far was deleted, want %d", n, len(fip))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Pods still reach the pod, and it them, on pod addresses.
	for _, ip := range podAddrs(pod.Status.PodIPs) {
		c.ping("default", "overlay", ip.String())
	}

	c.deletePod("default", "fipweb-0")
	c.waitPodReplaced("default", "fipweb-0", pod.UID, 90*time.Second)
	reach("pod recreated")

	c.applyYAML(fmt.Sprintf(`apiVersion: kovn.io/v1alpha1
kind: FloatingIP
metadata: {name: thief}
spec: {subnet: %s, addresses: [%s], pod: {namespace: default, name: overlay}}
`, subnet, quoteAddrs(fip)))
	defer c.kubectlOK("delete", "floatingip", "thief", "--ignore-not-found")
	msg := c.waitFIP("thief", "False", "AddressInUse")
	t.Logf("a second FloatingIP claiming the addresses: %s", msg)
	if n := len(strings.Fields(c.nbctl("--bare", "--columns=external_ip", "list", "NAT"))); n != len(fip) {
		t.Errorf("%d NAT rows with the thief present, want %d (web's only)", n, len(fip))
	}
	reach("after the refused claim")

	c.kubectlOK("delete", "floatingip", "web", "thief")
	if err := eventually(30*time.Second, func() error {
		if out := strings.TrimSpace(c.nbctl("--bare", "--columns=external_ip", "list", "NAT")); out != "" {
			return fmt.Errorf("NAT rows left: %s", out)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

func quoteAddrs(as []netip.Addr) string {
	var q []string
	for _, a := range as {
		q = append(q, `"`+a.String()+`"`)
	}
	return strings.Join(q, ",")
}

// waitFIP waits until FloatingIP name's Ready condition has status and reason, and returns
// its message.
func (c *cluster) waitFIP(name, status, reason string) string {
	c.t.Helper()
	var msg string
	if err := eventually(60*time.Second, func() error {
		out, _ := c.kubectl("get", "floatingip", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason} {.status.conditions[?(@.type=="Ready")].message}`)
		f := strings.SplitN(out, " ", 3)
		if len(f) == 3 && f[0] == status && f[1] == reason {
			msg = f[2]
			return nil
		}
		return fmt.Errorf("FloatingIP %s Ready: %q, want %s %s", name, out, status, reason)
	}); err != nil {
		c.t.Fatal(err)
	}
	return msg
}

// waitPodReplaced waits until pod ns/name exists again with another UID and an address.
func (c *cluster) waitPodReplaced(ns, name string, old types.UID, timeout time.Duration) *corev1.Pod {
	c.t.Helper()
	var p *corev1.Pod
	if err := eventually(timeout, func() error {
		q, err := c.kc.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q.UID == old || q.Status.Phase != corev1.PodRunning || q.Status.PodIP == "" {
			return fmt.Errorf("%s/%s not recreated and running yet", ns, name)
		}
		p = q
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return p
}
