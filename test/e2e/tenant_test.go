package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kovn/kovn/pkg/annotation"
	kovncluster "github.com/kovn/kovn/pkg/cluster"
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
}

// setUpTenant makes t1 with a ServiceAccount bound to `edit` there, and, as the admin, t2
// with a Subnet and an IPPool that are t2's only.
func setUpTenant(c *cluster) {
	c.t.Helper()
	c.createNamespace(tenantNS)
	c.createNamespace(victimNS)
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

// tenantCreatePod creates a pod as the tenant: the admin's credentials impersonating its
// ServiceAccount, so RBAC judges the request as the tenant's.
func (c *cluster) tenantCreatePod(p *corev1.Pod) {
	c.t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", c.info.Kubeconfig)
	if err != nil {
		c.t.Fatal(err)
	}
	rc.Impersonate = rest.ImpersonationConfig{UserName: tenantSA}
	if _, err := kubeClient(c.t, rc).CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("tenant creating pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}
