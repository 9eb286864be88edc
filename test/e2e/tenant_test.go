package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kovn/kovn/pkg/annotation"
	kovncluster "github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/netattach"
	"github.com/kovn/kovn/test/rig"
)

// The tenant-attack suite (issue 43): a user with the built-in `edit` role in its own
// namespace t1 only, acting through kubectl --as its ServiceAccount, tries to take what other
// namespaces or the nodes own. t2 is the victim namespace.

const (
	tenantNS = "t1"
	victimNS = "t2"
	tenantSA = "system:serviceaccount:" + tenantNS + ":tenant"
)

// tenantAttacks runs the suite's parts that need one cluster with two nodes.
func tenantAttacks(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	setUpTenant(c)
	t.Run("a pod names only networks its namespace is given", func(t *testing.T) {
		c.t = t
		tenantRequestsRefused(c)
	})
	t.Run("a node's join address passes policies only to its own pods", func(t *testing.T) {
		c.t = t
		otherNodesJoinDenied(t, c, st)
	})
	t.Run("outside traffic routed to a node is judged by the victim's policy", func(t *testing.T) {
		c.t = t
		outsideTrafficJudged(t, c, st)
	})
	t.Run("a NodePort is judged by the victim's policy, not passed as the node", func(t *testing.T) {
		c.t = t
		nodePortJudged(t, c, st)
	})
	t.Run("a Service's external IPs capture nothing outside the admin's ranges", func(t *testing.T) {
		c.t = t
		externalIPsCaptureNothing(t, c, st)
	})
	t.Run("an attachment delegate names no node interface the admin did not allow", func(t *testing.T) {
		c.t = t
		delegateOnNodeNICRefused(c)
	})
	t.Run("cluster policy is the admin's: the tenant writes no ClusterNetworkPolicy", func(t *testing.T) {
		c.t = t
		clusterPolicyRefused(c)
	})
}

// clusterPolicyRefused: an Admin-tier ClusterNetworkPolicy would let the tenant accept or deny
// any namespace's traffic above every NetworkPolicy; its `edit` role holds no verb on them.
func clusterPolicyRefused(c *cluster) {
	c.t.Helper()
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		out, _ := c.kubectl("auth", "can-i", verb, "clusternetworkpolicies.policy.networking.k8s.io", "--as="+tenantSA)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := lines[len(lines)-1]; got != "no" {
			c.t.Errorf("kubectl auth can-i %s clusternetworkpolicies as the tenant: %q, want no", verb, got)
		}
	}
	cnp := `{"apiVersion": "policy.networking.k8s.io/v1beta1", "kind": "ClusterNetworkPolicy", "metadata": {"name": "tenant-admin"},
  "spec": {"tier": "Admin", "priority": 0, "subject": {"namespaces": {}},
    "ingress": [{"action": "Accept", "from": [{"namespaces": {}}]}]}}`
	if out, err := c.applyAs(cnp, tenantSA); err == nil || !strings.Contains(out, "forbidden") {
		c.t.Errorf("the tenant creating a ClusterNetworkPolicy: %v %s, want forbidden", err, out)
	}
}

// delegateOnNodeNICRefused: the tenant, allowed by the admin to write NetworkAttachmentDefinitions
// in t1, defines a macvlan on the node's own eth0 (its primary NIC, with an address of its
// own choosing) and asks for it: kovn-controller refuses the definition
// (NetworkRefused naming eth0) and the pod gets no such interface.
func delegateOnNodeNICRefused(c *cluster) {
	c.t.Helper()
	grant := fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: nad-editor, namespace: %[1]s}
rules: [{apiGroups: [k8s.cni.cncf.io], resources: [network-attachment-definitions], verbs: [get, list, create]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: tenant-nad-editor, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: nad-editor}
subjects: [{kind: ServiceAccount, name: tenant, namespace: %[1]s}]
`, tenantNS)
	if out, err := c.apply(grant); err != nil {
		c.t.Fatalf("granting NADs: %v\n%s", err, out)
	}
	nad := fmt.Sprintf(`apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: on-node-nic, namespace: %s}
spec:
  config: '{"cniVersion": "1.0.0", "type": "macvlan", "master": "eth0", "mode": "bridge", "ipam": {"type": "static", "addresses": [{"address": "%s"}]}}'
`, tenantNS, "192.0.2.250/24")
	if out, err := c.applyAs(nad, tenantSA); err != nil {
		c.t.Fatalf("tenant creating its NetworkAttachmentDefinition: %v\n%s", err, out)
	}
	c.tenantCreatePod(testboxPod(tenantNS, "on-nic", onNode("c1-n1"), withAnnotations(netattach.NetworksAnnotation, "on-node-nic")))
	msg := c.waitEventWith(tenantNS, "on-nic", kovncluster.ReasonNetworkRefused, "eth0", 30*time.Second)
	c.t.Logf("event: %s", msg)
	if p, err := c.kc.CoreV1().Pods(tenantNS).Get(context.Background(), "on-nic", metav1.GetOptions{}); err != nil || p.Status.Phase == corev1.PodRunning {
		c.t.Errorf("the pod with a delegate on the node's eth0: %v, phase %s (want it never started)", err, p.Status.Phase)
	}
}

// outsideTrafficJudged: the external host routes t2's pod v (on c1-n1, behind default-deny)
// through a node. Through v's own node the connection keeps the client's address (the reply
// returns through that node anyway): default-deny refuses it, and an ipBlock naming the
// external host admits it. Through c1-n2 the connection is masqueraded to c1-n2's join address
// for the reply to find its way back: no policy admits that address by default, so it stays
// refused even with the ipBlock (before, every policy admitted the whole join network).
func outsideTrafficJudged(t *testing.T, c *cluster, st *rig.State) {
	cfg := st.Config
	ext := cfg.ExtNS()
	v := c.waitReady(victimNS, "v", 30*time.Second)
	reaches := func(ip netip.Addr, node int) bool {
		t.Helper()
		via := cfg.NodeIPs(1, node)[slices.IndexFunc(cfg.NodeIPs(1, node), func(a netip.Addr) bool { return a.Is4() == ip.Is4() })]
		if out, err := exec.Command("ip", "-n", ext, "route", "replace", ip.String(), "via", via.String()).CombinedOutput(); err != nil {
			t.Fatalf("route %s via c1-n%d on the external host: %v %s", ip, node, err, out)
		}
		target := hostPort(ip.String(), 9000)
		return strings.Contains(nodeTestbox(t, st, ext, "probe", "-t", "2s", target), target+" ok")
	}
	var ips []netip.Addr
	for _, p := range v.Status.PodIPs {
		ips = append(ips, netip.MustParseAddr(p.IP))
	}
	for _, ip := range ips {
		for node := 1; node <= 2; node++ {
			if reaches(ip, node) {
				t.Errorf("the external host reached t2/v %s through c1-n%d behind default-deny", ip, node)
			}
		}
	}
	var blocks []networkingv1.NetworkPolicyPeer
	for _, h := range cfg.ExternalHostIPs() {
		blocks = append(blocks, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(h, h.BitLen()).String()}})
	}
	allow := policy(victimNS, "allow-ext", &metav1.LabelSelector{}, networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: blocks}}})
	if _, err := c.kc.NetworkingV1().NetworkPolicies(victimNS).Create(context.Background(), &allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPolicyPorts(victimNS+"/allow-ext", 1)
	for _, ip := range ips {
		if err := eventually(20*time.Second, func() error {
			if !reaches(ip, 1) {
				return fmt.Errorf("the external host does not reach t2/v %s through its own node c1-n1 with an ipBlock admitting it", ip)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		if reaches(ip, 2) {
			t.Errorf("the external host reached t2/v %s through c1-n2 (masqueraded to c1-n2's join address)", ip)
		}
	}
}

// nodePortJudged: a NodePort Service (externalTrafficPolicy=Cluster) in front of t2's pod v,
// reached by the external host at v's own node c1-n1. The node masquerades such connections to
// its masquerade address, not to its own join address, which reaches the node's own pods past
// every policy (the kubelet's probes): a policy naming the join network admits the NodePort
// (the reply finds its way back through c1-n1), and without it v's default-deny refuses it,
// although the external host itself is admitted by allow-ext.
func nodePortJudged(t *testing.T, c *cluster, st *rig.State) {
	cfg := st.Config
	ctx := context.Background()
	family := corev1.IPFamilyPolicyPreferDualStack
	svc, err := c.kc.CoreV1().Services(victimNS).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "v-np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, IPFamilyPolicy: &family, Selector: map[string]string{"app": "v"},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 9000, TargetPort: intstr.FromInt32(9000)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the families v has an address of (t2's Subnet may be single-stack).
	v := c.waitReady(victimNS, "v", 30*time.Second)
	var targets []string
	for _, ip := range cfg.NodeIPs(1, 1) {
		if slices.ContainsFunc(v.Status.PodIPs, func(p corev1.PodIP) bool { return netip.MustParseAddr(p.IP).Is4() == ip.Is4() }) {
			targets = append(targets, hostPort(ip.String(), int(svc.Spec.Ports[0].NodePort)))
		}
	}
	reached := func() map[string]bool {
		out := nodeTestbox(t, st, cfg.ExtNS(), append([]string{"probe", "-t", "2s"}, targets...)...)
		got := map[string]bool{}
		for _, tg := range targets {
			got[tg] = strings.Contains(out, tg+" ok")
		}
		return got
	}
	joins := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: rig.JoinCIDR.String()}},
		{IPBlock: &networkingv1.IPBlock{CIDR: rig.JoinCIDR6.String()}}}
	allow := policy(victimNS, "allow-join", &metav1.LabelSelector{}, networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: joins}}})
	if _, err := c.kc.NetworkingV1().NetworkPolicies(victimNS).Create(ctx, &allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPolicyPorts(victimNS+"/allow-join", 1)
	if err := eventually(30*time.Second, func() error {
		var missed []string
		for tg, ok := range reached() {
			if !ok {
				missed = append(missed, tg)
			}
		}
		if len(missed) > 0 {
			return fmt.Errorf("the external host does not reach t2/v through c1-n1's NodePort %v with the join network admitted", missed)
		}
		return nil
	}); err != nil {
		for _, tool := range []string{"iptables", "ip6tables"} {
			out, _ := exec.Command("ip", "netns", "exec", cfg.NodeNS(1, 1), tool, "-t", "nat", "-S", "KOVN-NODEPORT-MASQ").CombinedOutput()
			t.Logf("c1-n1 %s:\n%s", tool, out)
		}
		t.Logf("c1-n1's ovn0 port: %s", c.nbctl("lsp-get-addresses", "node-c1-n1"))
		t.Fatal(err)
	}
	if err := c.kc.NetworkingV1().NetworkPolicies(victimNS).Delete(ctx, "allow-join", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPolicyPorts(victimNS+"/allow-join", 0)
	for tg, ok := range reached() {
		if ok {
			t.Errorf("the external host reached t2/v through c1-n1's NodePort %s behind default-deny (passed as the node)", tg)
		}
	}
}

// externalIPsCaptureNothing: the tenant's Service names the control plane's address on SB's
// port and kube-dns's ClusterIP as external IPs, in front of its own TCP echo pod. Both are
// refused with an event and no VIP; the node's own connection to the control plane's SB
// reaches SB (no echo), not the tenant's pod (CVE-2020-8554). An address in the admin's range
// is honoured: a pod reaches the tenant's echo through it.
func externalIPsCaptureNothing(t *testing.T, c *cluster, st *rig.State) {
	echo := testboxPod(tenantNS, "echo", onNode("c1-n2"))
	echo.Labels = map[string]string{"app": "echo"}
	c.tenantCreatePod(echo)
	c.waitRunning(tenantNS, "echo", 90*time.Second)
	cp := st.Config.ControlPlaneIPs(1)[0]
	allowed := "198.51.100.43"
	dns, err := c.kc.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	grab := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: tenantNS, Name: "grab"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "echo"}, ExternalIPs: []string{cp.String(), dns.Spec.ClusterIP, allowed},
		Ports: []corev1.ServicePort{{Name: "sb", Protocol: corev1.ProtocolTCP, Port: 6642, TargetPort: intstr.FromInt32(9000)}}}}
	if _, err := c.tenantClient().CoreV1().Services(tenantNS).Create(context.Background(), grab, metav1.CreateOptions{}); err != nil {
		t.Fatalf("tenant creating Service grab: %v", err)
	}
	msg := c.waitEventWith(tenantNS, "grab", "ServicePartlyProgrammed", cp.String(), 30*time.Second)
	t.Logf("event: %s", msg)
	// Each refusal is an event of its own: the second may be recorded after the first is read.
	t.Logf("event: %s", c.waitEventWith(tenantNS, "grab", "ServicePartlyProgrammed", dns.Spec.ClusterIP+" refused", 30*time.Second))
	// The admin's range works: the tenant's own pod on c1-n1 reaches the echo pod (on c1-n2)
	// through it (OVN's load balancer; the nodes have no route to that range here).
	err = eventually(30*time.Second, func() error {
		if out, _ := c.exec(tenantNS, "plain", "tcp", hostPort(allowed, 6642), "via-allowed"); !strings.Contains(out, "via-allowed") {
			return fmt.Errorf("t1/plain -> %s:6642: %q", allowed, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Programmed by now (same Service, same pass): the control plane's SB is not the echo.
	for n := 1; n <= 2; n++ {
		if out := nodeTestbox(t, st, st.Config.NodeNS(1, n), "tcp", hostPort(cp.String(), 6642), "captured"); strings.Contains(out, "captured") {
			t.Errorf("c1-n%d's connection to the control plane's SB %s:6642 was answered by the tenant's pod", n, cp)
		}
	}
	vips := c.nbctl("--bare", "--columns=vips", "find", "Load_Balancer", `external_ids:"kovn.io/owner"="`+tenantNS+`/grab"`)
	if strings.Contains(vips, cp.String()+":") || !strings.Contains(vips, allowed+":6642") {
		t.Errorf("grab's load balancer VIPs %q: want %s, not the control plane's %s", vips, allowed, cp)
	}
}

// setUpTenant makes t1 with a ServiceAccount bound to `edit` there, and, as the admin, t2
// with a Subnet and an IPPool that are t2's only.
func setUpTenant(c *cluster) {
	c.t.Helper()
	c.createNamespace(tenantNS)
	c.createNamespace(victimNS)
	if out, err := c.kubectl("label", "namespace", tenantNS, "pod-security.kubernetes.io/enforce=baseline"); err != nil {
		c.t.Fatalf("t1's Pod Security level: %v %s", err, out)
	}
	cidr, pool := "10.77.0.0/24", c.plan.pool
	if c.plan.v6 {
		cidr = "fd00:77::/64"
	}
	y := fmt.Sprintf(`apiVersion: v1
kind: ServiceAccount
metadata: {name: tenant, namespace: %[1]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: tenant-edit, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{kind: ServiceAccount, name: tenant, namespace: %[1]s}]
---
apiVersion: kovn.io/v1alpha1
kind: Subnet
metadata: {name: t2net}
spec: {cidrBlock: %[3]q, namespaces: [%[2]s]}
---
apiVersion: kovn.io/v1alpha1
kind: IPPool
metadata: {name: t2pool}
spec: {subnet: ovn-default, ips: [%[4]q], namespaces: [%[2]s]}
`, tenantNS, victimNS, cidr, pool[0]+".."+pool[1])
	if out, err := c.apply(y); err != nil {
		c.t.Fatalf("tenant set-up: %v\n%s", err, out)
	}
	// The tenant really is a tenant: it may create pods in t1 and nothing in t2.
	for ns, want := range map[string]string{tenantNS: "yes", victimNS: "no"} {
		if out, _ := c.kubectl("auth", "can-i", "create", "pods", "-n", ns, "--as="+tenantSA); strings.TrimSpace(out) != want {
			c.t.Fatalf("tenant can-i create pods -n %s: %q, want %s", ns, out, want)
		}
	}
}

// tenantRequestsRefused: the tenant's pods asking for the join network, t2's subnet, t2's pool
// or a router port's MAC each get a NetworkRequestDenied event and no IP object (no network);
// the same tenant asking for nothing is networked.
func tenantRequestsRefused(c *cluster) {
	c.t.Helper()
	routerMAC := strings.TrimSpace(c.nbctl("--bare", "--columns=mac", "find", "Logical_Router_Port",
		fmt.Sprintf("networks{>=}%q", c.plan.gateways+"/"+fmt.Sprint(c.plan.podCIDR.Bits()))))
	if strings.Contains(c.plan.gateways, ",") || routerMAC == "" {
		routerMAC = "0a:12:34:56:78:9a" // any MAC of the router range kovn keeps
	}
	requests := map[string][2]string{
		"on-join":   {annotation.LogicalSwitch, "join"},
		"on-t2net":  {annotation.LogicalSwitch, "t2net"},
		"in-t2pool": {annotation.IPPool, "t2pool"},
		"gw-mac":    {annotation.MACAddress, routerMAC},
	}
	for name, kv := range requests {
		c.tenantCreatePod(testboxPod(tenantNS, name, onNode("c1-n1"), withAnnotations(kv[0], kv[1])))
	}
	c.tenantCreatePod(testboxPod(tenantNS, "plain", onNode("c1-n1")))
	// The node's own address is not the network's to refuse: t1's Pod Security level (baseline,
	// as docs/tenants.md asks of tenant namespaces) refuses a hostNetwork pod at the API.
	hostNet := testboxPod(tenantNS, "host-net", onNode("c1-n1"))
	hostNet.Spec.HostNetwork = true
	if _, err := c.tenantClient().CoreV1().Pods(tenantNS).Create(context.Background(), hostNet, metav1.CreateOptions{}); err == nil ||
		!strings.Contains(err.Error(), "hostNetwork") {
		c.t.Errorf("tenant creating a hostNetwork pod in t1 (Pod Security baseline): %v, want refused naming hostNetwork", err)
	}
	c.waitRunning(tenantNS, "plain", 90*time.Second)
	for name, kv := range requests {
		msg := c.waitEvent(tenantNS, name, kovncluster.ReasonNetworkRequestDenied, 30*time.Second)
		c.t.Logf("%s=%s: %s", kv[0], kv[1], msg)
		if out, err := c.kubectl("get", "ips", kovncluster.IPObjectName(tenantNS, name)); err == nil {
			c.t.Errorf("pod asking for %s=%s got an IP object:\n%s", kv[0], kv[1], out)
		}
		p, err := c.kc.CoreV1().Pods(tenantNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || p.Status.PodIP != "" || p.Annotations[annotation.Allocated] != "" {
			c.t.Errorf("pod asking for %s=%s: %v, pod IP %q, annotations %v", kv[0], kv[1], err, p.Status.PodIP, p.Annotations)
		}
	}
}

// otherNodesJoinDenied: t2's pod on c1-n1 behind a default-deny ingress policy stays Ready (its
// kubelet probes come from c1-n1's own join address), c1-n1 itself connects, and c1-n2's
// host network (a hostNetwork pod there, or a node masquerading) does not.
func otherNodesJoinDenied(t *testing.T, c *cluster, st *rig.State) {
	p := testboxPod(victimNS, "v", onNode("c1-n1"))
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2,
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}
	c.createPod(p)
	c.waitReady(victimNS, "v", 90*time.Second)
	deny := policy(victimNS, "deny-in", &metav1.LabelSelector{}, networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}})
	if _, err := c.kc.NetworkingV1().NetworkPolicies(victimNS).Create(context.Background(), &deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitPolicyPorts(victimNS+"/deny-in", 1)
	v := c.waitReady(victimNS, "v", 30*time.Second)
	for _, ip := range v.Status.PodIPs {
		target := hostPort(ip.IP, 9000)
		if out := nodeTestbox(t, st, st.Config.NodeNS(1, 1), "connect", target); !strings.Contains(out, "connected") {
			t.Errorf("c1-n1 (the pod's own node) -> %s: %s", target, out)
		}
		if out := nodeTestbox(t, st, st.Config.NodeNS(1, 2), "connect", target); strings.Contains(out, "connected") {
			t.Errorf("c1-n2 reached %s behind a default-deny policy: %s", target, out)
		}
	}
	// The failed connects above took 5 s each: the kubelet probed (every 2 s) under the policy
	// all along, and one failed probe would have left an Unhealthy event.
	if evs := c.events(victimNS, "v"); strings.Contains(evs, "Unhealthy") {
		t.Errorf("the victim's kubelet probes failed under the policy:\n%s", evs)
	}
}

// tenantClient acts as the tenant: the admin's credentials impersonating its ServiceAccount,
// so RBAC judges each request as the tenant's.
func (c *cluster) tenantClient() kubernetes.Interface {
	c.t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", c.info.Kubeconfig)
	if err != nil {
		c.t.Fatal(err)
	}
	rc.Impersonate = rest.ImpersonationConfig{UserName: tenantSA}
	return kubeClient(c.t, rc)
}

// applyAs applies objects as user (kubectl --as).
func (c *cluster) applyAs(yaml, user string) (string, error) {
	cmd := exec.Command(filepath.Join(c.st.Config.K8sBinDir, "kubectl"), "--kubeconfig", c.info.Kubeconfig, "--as="+user, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(yaml)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cluster) tenantCreatePod(p *corev1.Pod) {
	c.t.Helper()
	if _, err := c.tenantClient().CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("tenant creating pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}
