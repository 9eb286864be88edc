package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/netattach"
	"github.com/kovn/kovn/test/rig"
)

// attachLab is one cluster of two nodes with attachment networks in namespace "attach":
// blue, a kovn Subnet as an attachment (type kovn), and mv, macvlan on each node's second NIC
// (eth1, the rig's underlay) with addresses from kovn's Subnet mv. Namespace "private" holds
// red, which attach's pods may not use until an admin marks private as shared.
type attachLab struct {
	c         *cluster
	cfg       rig.Config
	blue, mv  []netip.Prefix // the Subnets' CIDRs
	nodeLinks map[int][]string
}

const attachNS = "attach"

func TestAttachmentNetworks(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	l := &attachLab{cfg: cfg, c: newCluster(t, upRig(t, cfg), "c1")}
	l.setUp(t)
	t.Run("eth0 + net1 (kovn Subnet, static IP and MAC) + net2 (macvlan on eth1, kovn IPAM): ping and TCP on each, network-status", l.threeInterfaces)
	t.Run("a MultiNetworkPolicy on net1: b admits a there, not c; eth0 untouched; a macvlan network refused", l.multiPolicy)
	t.Run("a definition of another namespace is refused with an event naming it, until that namespace is shared", l.otherNamespace)
	t.Run("a definition that is not JSON: an event, and the pod gets no interface at all", l.badDefinition)
	t.Run("pods deleted: every address back in its pool, no link or port left on the nodes", l.deleted)
}

func (l *attachLab) setUp(t *testing.T) {
	c := l.c
	c.t = t
	for _, p := range []string{"10.215.0.0/24", "fd00:215::/64"} {
		l.blue = appendFamily(l.cfg, l.blue, p)
	}
	for _, p := range []string{"10.216.0.0/24", "fd00:216::/64"} {
		l.mv = appendFamily(l.cfg, l.mv, p)
	}
	c.createNamespace(attachNS)
	c.createNamespace("private")
	c.applyYAML(fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: blue, namespace: attach}
spec:
  config: '{"cniVersion": "1.0.0", "name": "blue", "type": "kovn"}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: mv, namespace: attach}
spec:
  config: '{"cniVersion": "1.0.0", "name": "mv", "type": "macvlan", "master": "%s", "mode": "bridge", "ipam": {"type": "kovn"}}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: red, namespace: private}
spec:
  config: '{"cniVersion": "1.0.0", "name": "red", "type": "kovn"}'
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: blue}
spec: {cidrBlock: %q, provider: attach/blue}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: mv}
spec: {cidrBlock: %q, provider: attach/mv}
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: red}
spec: {cidrBlock: "10.217.0.0/24", provider: private/red}
`, rig.UnderlayNIC, joinPrefixes(l.blue), joinPrefixes(l.mv)))
	for _, sn := range []string{"blue", "mv", "red"} {
		c.waitSubnetReady(sn)
	}
	// The cluster DNS pods start late (unschedulable until the nodes are ready): their links
	// are in the nodes' "before", not mistaken for leftovers.
	c.waitDNSAvailable(2 * time.Minute)
	l.nodeLinks = map[int][]string{}
	for n := 1; n <= 2; n++ {
		l.nodeLinks[n] = l.links(n)
	}
}

func appendFamily(cfg rig.Config, out []netip.Prefix, s string) []netip.Prefix {
	p := netip.MustParsePrefix(s)
	if (p.Addr().Is4() && cfg.HasIPv4()) || (p.Addr().Is6() && cfg.HasIPv6()) {
		out = append(out, p)
	}
	return out
}

// nth is the n-th address of each CIDR (the static addresses a pod asks for).
func nth(cidrs []netip.Prefix, n int) []netip.Addr {
	var out []netip.Addr
	for _, p := range cidrs {
		a := p.Addr()
		for range n {
			a = a.Next()
		}
		out = append(out, a)
	}
	return out
}

// threeInterfaces: pod a (c1-n1) asks in the JSON form, with static addresses and MAC on net1;
// pod b (c1-n2) in the short form, addresses from kovn's IPAM. Each pair reaches the other on
// each interface, in each family, and network-status lists exactly what the pods have.
func (l *attachLab) threeInterfaces(t *testing.T) {
	c := l.c
	c.t = t
	aIPs := nth(l.blue, 10)
	var quoted []string
	for _, a := range aIPs {
		quoted = append(quoted, fmt.Sprintf("%q", a))
	}
	aNetworks := fmt.Sprintf(`[{"name": "blue", "interface": "net1", "ips": [%s], "mac": "0a:58:0a:d7:00:0a"}, {"name": "mv", "interface": "net2"}]`, strings.Join(quoted, ", "))
	c.createPod(testboxPod(attachNS, "a", onNode(rig.NodeName(1, 1)), withAnnotations(netattach.NetworksAnnotation, aNetworks)))
	c.createPod(testboxPod(attachNS, "b", onNode(rig.NodeName(1, 2)), withAnnotations(netattach.NetworksAnnotation, "blue,mv")))
	a, b := c.waitReady(attachNS, "a", 90*time.Second), c.waitReady(attachNS, "b", 90*time.Second)

	as, bs := l.status(t, "a"), l.status(t, "b")
	for _, p := range []struct {
		name string
		st   []netattach.NetworkStatus
		eth0 []string
	}{{"a", as, podIPStrings(a.Status.PodIPs)}, {"b", bs, podIPStrings(b.Status.PodIPs)}} {
		if len(p.st) != 3 || p.st[0].Interface != "eth0" || !p.st[0].Default || !slices.Equal(p.st[0].IPs, p.eth0) ||
			p.st[1].Name != "attach/blue" || p.st[1].Interface != "net1" || p.st[2].Name != "attach/mv" || p.st[2].Interface != "net2" {
			t.Fatalf("pod %s's network-status: %+v, want eth0 %v, attach/blue on net1, attach/mv on net2", p.name, p.st, p.eth0)
		}
		// The addresses listed are the pod's own, as it sees them, and kovn-controller's records.
		shown := c.mustExec(attachNS, p.name, "ip")
		for _, st := range p.st[1:] {
			l.checkRecorded(t, p.name, st)
			for _, ip := range st.IPs {
				if !strings.Contains(shown, ip+"/") {
					t.Errorf("pod %s: network-status lists %s on %s, the pod does not have it:\n%s", p.name, ip, st.Interface, shown)
				}
			}
		}
		t.Logf("pod %s: %s", p.name, statusSummary(p.st))
	}
	if got := strings.Join(as[1].IPs, ","); got != joinAddrs(aIPs) || as[1].MAC != "0a:58:0a:d7:00:0a" {
		t.Errorf("a's net1: %s %s, want the static %s and MAC 0a:58:0a:d7:00:0a", got, as[1].MAC, joinAddrs(aIPs))
	}
	if !inAll(as[2].IPs, l.mv) || !inAll(bs[1].IPs, l.blue) || !inAll(bs[2].IPs, l.mv) {
		t.Errorf("addresses outside their Subnets: a net2 %v, b net1 %v net2 %v", as[2].IPs, bs[1].IPs, bs[2].IPs)
	}
	for i, iface := range []string{"net1", "net2"} {
		for _, ip := range bs[i+1].IPs {
			c.pingNewPeer(attachNS, "a", ip)
			if out := c.mustExec(attachNS, "a", "tcp", netip.AddrPortFrom(netip.MustParseAddr(ip), 9000).String(), "hello-"+iface); !strings.Contains(out, "hello-"+iface) {
				t.Errorf("a -> b %s:9000 over %s: echo %q", ip, iface, out)
			}
		}
		for _, ip := range as[i+1].IPs {
			c.ping(attachNS, "b", ip)
		}
		t.Logf("%s: a <-> b ping (every echo answered) and TCP echo in %d families", iface, len(bs[i+1].IPs))
	}
	// net2 leaves through the node's eth1: the frames carry the pod's macvlan MAC there.
	macB := bs[2].MAC
	ping := func() { _, _ = c.exec(attachNS, "a", "ping", "-c", "2", "-W", "1s", bs[2].IPs[0]) }
	if cap := capture(t, l.cfg.FabricNS(), rig.FabricVlanPort(1, 2), "ether host "+macB, ping); !strings.Contains(cap, macB) {
		t.Errorf("no frame of b's net2 (%s) on c1-n2's eth1 port while a pinged it:\n%s", macB, cap)
	}
}

// otherNamespace: a pod of attach naming private/red waits with an event that names the
// definition; once an admin annotates private as shared, the same pod starts with red.
func (l *attachLab) otherNamespace(t *testing.T) {
	c := l.c
	c.t = t
	c.createPod(testboxPod(attachNS, "c", onNode(rig.NodeName(1, 1)), withAnnotations(netattach.NetworksAnnotation, "private/red")))
	msg := c.waitEventWith(attachNS, "c", "NetworkRefused", "private/red", 30*time.Second)
	t.Logf("kovn-controller: NetworkRefused: %s", msg)
	sandbox := c.waitEventWith(attachNS, "c", "FailedCreatePodSandBox", "private/red", 60*time.Second)
	t.Logf("kubelet: FailedCreatePodSandBox: %s", sandbox)
	if n := l.attachmentIPObjects(t, "c"); n != 0 {
		t.Errorf("%d IP objects for the refused pod's attachments", n)
	}
	c.kubectlOK("annotate", "namespace", "private", netattach.SharedNetworksAnnotation+"=true")
	start := time.Now()
	c.waitReady(attachNS, "c", 90*time.Second)
	st := l.status(t, "c")
	if len(st) != 2 || st[1].Name != "private/red" || len(st[1].IPs) != 1 || !strings.HasPrefix(st[1].IPs[0], "10.217.0.") {
		t.Fatalf("pod c's network-status once private is shared: %+v", st)
	}
	t.Logf("private shared: pod c ran %.1fs later with red on %s %v", time.Since(start).Seconds(), st[1].Interface, st[1].IPs)
}

// badDefinition: a definition whose config is not JSON. The controller says so in an event,
// the kubelet's sandbox fails with the reason, and the node holds nothing of the pod.
func (l *attachLab) badDefinition(t *testing.T) {
	c := l.c
	c.t = t
	c.applyYAML(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: broken, namespace: attach}
spec:
  config: '{"cniVersion": "1.0.0", "type": '
`)
	c.createPod(testboxPod(attachNS, "d", onNode(rig.NodeName(1, 2)), withAnnotations(netattach.NetworksAnnotation, "blue,broken")))
	msg := c.waitEventWith(attachNS, "d", "NetworkRefused", "attach/broken", 30*time.Second)
	t.Logf("kovn-controller: NetworkRefused: %s", msg)
	sandbox := c.waitEventWith(attachNS, "d", "FailedCreatePodSandBox", "not JSON", 60*time.Second)
	t.Logf("kubelet: FailedCreatePodSandBox: %s", sandbox)
	if n := l.attachmentIPObjects(t, "d"); n != 0 {
		t.Errorf("%d IP objects for pod d's attachments: all or none, and one definition is broken", n)
	}
	if ports := l.ovsPorts(t, 2, "d"); len(ports) != 0 {
		t.Errorf("c1-n2 holds OVS ports of pod d: %v", ports)
	}
	c.deletePod(attachNS, "d")
}

// deleted: every attachment pod goes; their IP objects go, the Subnets' available counts come
// back to what they were before the pods, and each node has exactly its links of before.
func (l *attachLab) deleted(t *testing.T) {
	c := l.c
	c.t = t
	pods, err := c.kc.CoreV1().Pods(attachNS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		c.deletePod(attachNS, p.Name)
	}
	for _, p := range pods.Items {
		c.waitPodGone(attachNS, p.Name)
	}
	if err := eventually(30*time.Second, func() error {
		for _, p := range []string{"a", "b", "c"} {
			if n := l.attachmentIPObjects(t, p); n != 0 {
				return fmt.Errorf("pod %s: %d attachment IP objects left", p, n)
			}
		}
		for _, sn := range []string{"blue", "mv", "red"} {
			out := c.kubectlOK("get", "subnet", sn, "-o", "jsonpath={.status.v4AvailableIPs}/{.status.v6AvailableIPs}/{.status.v4UsedIPs}/{.status.v6UsedIPs}")
			if !strings.HasSuffix(out, "/0/0") {
				return fmt.Errorf("subnet %s: available/using %s, want nothing in use", sn, out)
			}
		}
		for n := 1; n <= 2; n++ {
			if now := l.links(n); !slices.Equal(now, l.nodeLinks[n]) {
				return fmt.Errorf("c1-n%d's links:\nnow    %v\nbefore %v", n, now, l.nodeLinks[n])
			}
			if ports := l.ovsPorts(t, n, ""); len(ports) != 0 {
				return fmt.Errorf("c1-n%d holds OVS ports of attach's pods: %v", n, ports)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("all attachment addresses free again, nodes' links as before the pods")
}

// waitPodGone waits until the pod no longer exists and returns when it saw that.
func (c *cluster) waitPodGone(ns, name string) time.Time {
	c.t.Helper()
	var at time.Time
	if err := pollEvery(50*time.Millisecond, 60*time.Second, func() error {
		_, err := c.kc.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			at = time.Now()
			return nil
		}
		return fmt.Errorf("pod %s/%s still there (%v)", ns, name, err)
	}); err != nil {
		c.t.Fatal(err)
	}
	return at
}

// status reads a pod's network-status annotation.
func (l *attachLab) status(t *testing.T, pod string) []netattach.NetworkStatus {
	t.Helper()
	var st []netattach.NetworkStatus
	if err := eventually(20*time.Second, func() error {
		p, err := l.c.kc.CoreV1().Pods(attachNS).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		v, ok := p.Annotations[netattach.NetworkStatusAnnotation]
		if !ok {
			return fmt.Errorf("pod %s has no %s", pod, netattach.NetworkStatusAnnotation)
		}
		st, err = netattach.ParseStatus(v)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// checkRecorded compares an attachment's network-status entry with kovn-controller's record.
func (l *attachLab) checkRecorded(t *testing.T, pod string, st netattach.NetworkStatus) {
	t.Helper()
	name := pod + "." + attachNS + "." + st.Interface
	out := l.c.kubectlOK("get", "ip", name, "-o", "jsonpath={.spec.network} {.spec.v4IP} {.spec.v6IP}")
	f := strings.Fields(out)
	if len(f) == 0 || f[0] != st.Name || !slices.Equal(slices.Sorted(slices.Values(f[1:])), slices.Sorted(slices.Values(st.IPs))) {
		t.Errorf("IP %s records %q; network-status says %s %v", name, out, st.Name, st.IPs)
	}
}

func (l *attachLab) attachmentIPObjects(t *testing.T, pod string) int {
	t.Helper()
	out := l.c.kubectlOK("get", "ips", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	n := 0
	for _, name := range strings.Fields(out) {
		if strings.HasPrefix(name, pod+"."+attachNS+".") {
			n++
		}
	}
	return n
}

// links are node n's interface names, sorted.
func (l *attachLab) links(n int) []string {
	out, _ := exec.Command("ip", "-n", l.cfg.NodeNS(1, n), "-o", "link", "show").CombinedOutput()
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			names = append(names, strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
		}
	}
	slices.Sort(names)
	return names
}

// ovsPorts are node n's OVS interfaces of pods of attach (of pod, when not empty).
func (l *attachLab) ovsPorts(t *testing.T, n int, pod string) []string {
	t.Helper()
	args := []string{"--db=unix:" + l.cfg.OVSDBSocket(1, n), "--bare", "--columns=name", "find", "Interface", "external_ids:kovn.io/pod-namespace=" + attachNS}
	if pod != "" {
		args = append(args, "external_ids:kovn.io/pod-name="+pod)
	}
	out, err := exec.Command("ovs-vsctl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-vsctl %v: %v %s", args, err, out)
	}
	return strings.Fields(string(out))
}

func podIPStrings(ips []corev1.PodIP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.IP)
	}
	return out
}

func inAll(ips []string, cidrs []netip.Prefix) bool {
	if len(ips) != len(cidrs) {
		return false
	}
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || !containsAddr(cidrs, a) {
			return false
		}
	}
	return true
}

func statusSummary(st []netattach.NetworkStatus) string {
	var parts []string
	for _, s := range st {
		parts = append(parts, fmt.Sprintf("%s=%s %v %s", s.Interface, s.Name, s.IPs, s.MAC))
	}
	return strings.Join(parts, "; ")
}

// multiPolicy: a MultiNetworkPolicy for attach/blue selecting b admits a on net1 and refuses c
// (also on blue), both families, while c still reaches b's eth0; one naming the macvlan
// network is refused with an event. The policy and c are gone afterwards.
func (l *attachLab) multiPolicy(t *testing.T) {
	c := l.c
	c.t = t
	for _, p := range []string{"a", "b"} {
		if out, err := c.kubectl("label", "pod", "-n", attachNS, p, "pod="+p, "--overwrite"); err != nil {
			t.Fatalf("label %s: %v %s", p, err, out)
		}
	}
	c.createPod(testboxPod(attachNS, "c", onNode(rig.NodeName(1, 1)), withAnnotations(netattach.NetworksAnnotation, "blue")))
	cPod := c.waitReady(attachNS, "c", 90*time.Second)
	bs := l.status(t, "b")
	b, _ := c.kc.CoreV1().Pods(attachNS).Get(context.Background(), "b", metav1.GetOptions{})
	var net1, eth0 []string
	for _, ip := range bs[1].IPs {
		net1 = append(net1, netip.AddrPortFrom(netip.MustParseAddr(ip), 9000).String())
	}
	for _, ip := range b.Status.PodIPs {
		eth0 = append(eth0, netip.AddrPortFrom(netip.MustParseAddr(ip.IP), 9000).String())
	}
	probe := func(from string, targets []string, want bool) error {
		out, _ := c.exec(attachNS, from, append([]string{"probe", "-t", "500ms"}, targets...)...)
		for _, tg := range targets {
			if got := strings.Contains(out, tg+" ok"); got != want {
				return fmt.Errorf("%s -> %s: reached %t, want %t\n%s", from, tg, got, want, out)
			}
		}
		return nil
	}
	if err := eventually(20*time.Second, func() error { return probe("c", net1, true) }); err != nil {
		t.Fatalf("before any policy: %v", err)
	}
	c.applyYAML(`apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: b-from-a
  namespace: attach
  annotations: {k8s.v1.cni.cncf.io/policy-for: blue}
spec:
  podSelector: {matchLabels: {pod: b}}
  ingress:
  - from:
    - podSelector: {matchLabels: {pod: a}}
`)
	start := time.Now()
	if err := eventually(20*time.Second, func() error {
		return errors.Join(probe("c", net1, false), probe("a", net1, true), probe("c", eth0, true))
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("MultiNetworkPolicy b-from-a on blue: c (net1 %v, eth0 %v) refused on b's net1 %v, a admitted, c still reaches b's eth0 %v; %.1fs after the create",
		l.status(t, "c")[1].IPs, podIPStrings(cPod.Status.PodIPs), bs[1].IPs, podIPStrings(b.Status.PodIPs), time.Since(start).Seconds())
	c.applyYAML(`apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: on-macvlan
  namespace: attach
  annotations: {k8s.v1.cni.cncf.io/policy-for: mv}
spec:
  podSelector: {}
`)
	msg := c.waitEventWith(attachNS, "on-macvlan", "PolicyNotProgrammed", "not as an OVN port", 30*time.Second)
	t.Logf("on-macvlan: %s", msg)
	for _, name := range []string{"b-from-a", "on-macvlan"} {
		if out, err := c.kubectl("delete", "multi-networkpolicies.k8s.cni.cncf.io", "-n", attachNS, name); err != nil {
			t.Fatalf("delete %s: %v %s", name, err, out)
		}
	}
	if err := eventually(20*time.Second, func() error { return probe("c", net1, true) }); err != nil {
		t.Errorf("policy deleted: %v", err)
	}
	c.deletePod(attachNS, "c")
	c.waitPodGone(attachNS, "c")
}
