package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/test/rig"
)

// TestRBAC: in the rig kovn-controller and every kovn-daemon authenticate as their own
// ServiceAccounts with exactly the RBAC and policy of deploy/, a daemon may change only its own
// Node, its credentials cannot write what only the controller writes, the controller reads
// CRDs and cannot write them (the chart installs them), the speaker reads Secrets only in
// kovn-bgp, pods still get networking and cannot open OVN's database ports. (Every e2e rig also fails on a Forbidden in the kovn logs: assertNoForbidden.)
func TestRBAC(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn = true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")

	t.Run("components authenticate as their ServiceAccounts", func(t *testing.T) {
		u := whoami(t, componentConfig(t, r.State, "c1", "kovn-controller"))
		if u.Username != "system:serviceaccount:kube-system:kovn-controller" {
			t.Errorf("kovn-controller runs as %q", u.Username)
		}
		for _, node := range []string{"c1-n1", "c1-n2"} {
			u := whoami(t, componentConfig(t, r.State, node, "kovn-daemon"))
			if u.Username != "system:serviceaccount:kube-system:kovn-daemon" {
				t.Errorf("kovn-daemon on %s runs as %q", node, u.Username)
			}
			if got := u.Extra[rig.NodeNameExtra]; len(got) != 1 || got[0] != node {
				t.Errorf("kovn-daemon on %s: token's %s = %v, want [%s]", node, rig.NodeNameExtra, got, node)
			}
		}
	})

	n1 := kubeClient(t, componentConfig(t, r.State, "c1-n1", "kovn-daemon"))
	t.Run("a daemon changes only its own Node, never its labels; a kubelet cannot set role labels", func(t *testing.T) {
		c.t = t
		if err := annotateNode(n1, "c1-n1", "own"); err != nil {
			t.Fatalf("daemon of c1-n1 patching its own Node: %v", err)
		}
		defer func() { _ = annotateNode(c.kc, "c1-n1", "") }()
		expectPolicyDenial(t, "daemon of c1-n1 patching Node c1-n2", annotateNode(n1, "c1-n2", "other"))
		// Labels choose node roles (OVN central, speakers, gateways): not even its own Node's.
		for _, label := range []string{`{"node-restriction.kubernetes.io/kovn-ic-gateway":"true"}`, `{"kubernetes.io/hostname":null}`} {
			_, err := n1.CoreV1().Nodes().Patch(context.Background(), "c1-n1", types.MergePatchType,
				[]byte(`{"metadata":{"labels":`+label+`}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			expectDenialBy(t, "daemon of c1-n1 labelling its own Node "+label, "kovn-daemon-own-node", err)
		}
		// Nor can its kubelet: the chart's role labels are under node-restriction.kubernetes.io/,
		// which NodeRestriction keeps from a node's own credentials (a plain label it may set).
		asKubelet := []string{"--as=system:node:c1-n1", "--as-group=system:nodes", "--dry-run=server", "--overwrite"}
		for label, refused := range map[string]bool{rig.OVNCentralLabel + "=true": true, rig.SpeakerLabel + "=true": true, "e2e.kovn.io/plain=true": false} {
			out, err := c.kubectl(append([]string{"label", "node", "c1-n1", label}, asKubelet...)...)
			if refused != (err != nil) || refused && !strings.Contains(out, "is not allowed to modify labels") {
				t.Errorf("c1-n1's kubelet labelling its Node %s: %v %s, want refused=%t by NodeRestriction", label, err, out, refused)
			}
		}
		// A kovn-daemon token bound to no Node names no node: refused everywhere.
		unbound := kubeClient(t, unboundDaemonConfig(t, r.State, c.kc))
		expectPolicyDenial(t, "unbound kovn-daemon token patching Node c1-n1", annotateNode(unbound, "c1-n1", "unbound"))
	})

	t.Run("daemon credentials cannot write pods, IPs or subnets", func(t *testing.T) {
		daemonWritesRefused(t, n1, dynamicClient(t, componentConfig(t, r.State, "c1-n1", "kovn-daemon")))
	})

	t.Run("narrowed rights: the controller reads CRDs only, the speaker reads only kovn-bgp's Secrets", func(t *testing.T) {
		c.t = t
		for _, tc := range []struct {
			sa, want string
			args     []string
		}{
			{"kovn-controller", "yes", []string{"get", "customresourcedefinitions.apiextensions.k8s.io"}},
			{"kovn-controller", "no", []string{"create", "customresourcedefinitions.apiextensions.k8s.io"}},
			{"kovn-controller", "no", []string{"update", "customresourcedefinitions.apiextensions.k8s.io"}},
			{"kovn-controller", "no", []string{"patch", "customresourcedefinitions.apiextensions.k8s.io"}},
			{"kovn-controller", "no", []string{"delete", "customresourcedefinitions.apiextensions.k8s.io"}},
			{"kovn-speaker", "yes", []string{"get", "secrets", "-n", "kovn-bgp"}},
			{"kovn-speaker", "yes", []string{"watch", "secrets", "-n", "kovn-bgp"}},
			{"kovn-speaker", "no", []string{"get", "secrets", "-n", "kube-system"}},
			{"kovn-speaker", "no", []string{"list", "secrets", "-n", "kube-system"}},
			{"kovn-speaker", "no", []string{"list", "secrets", "--all-namespaces"}},
			{"kovn-speaker", "no", []string{"create", "secrets", "-n", "kovn-bgp"}},
		} {
			args := append([]string{"auth", "can-i"}, tc.args...)
			out, _ := c.kubectl(append(args, "--as=system:serviceaccount:kube-system:"+tc.sa)...)
			// The answer is the last line (kubectl warns first that a cluster-scoped
			// resource ignores the namespace).
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if got := lines[len(lines)-1]; got != tc.want {
				t.Errorf("kubectl auth can-i %s as %s: %q, want %q", strings.Join(tc.args, " "), tc.sa, got, tc.want)
			}
		}
		// And with its own token: an update of a CRD it serves from (a dry run) is Forbidden.
		ctrl := dynamicClient(t, componentConfig(t, r.State, "c1", "kovn-controller"))
		crds := ctrl.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
		crd, err := crds.Get(context.Background(), "subnets.kovn.io", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("kovn-controller reading CRD subnets.kovn.io: %v", err)
		}
		_, err = crds.Update(context.Background(), crd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) {
			t.Errorf("kovn-controller updating CRD subnets.kovn.io: %v, want Forbidden", err)
		}
	})

	t.Run("chassis certificates: a node's kovn-daemon gets its own, never another node's", func(t *testing.T) {
		checkChassisCSRs(t, r, c)
	})

	t.Run("controller writes IPPool status", func(t *testing.T) {
		c.t = t
		if out, err := c.apply("apiVersion: kovn.io/v1alpha1\nkind: IPPool\nmetadata: {name: rbac-pool}\n" +
			"spec: {subnet: ovn-default, ips: [\"10.16.210.10..10.16.210.12\"]}\n"); err != nil {
			t.Fatalf("create IPPool: %v %s", err, out)
		}
		err := eventually(30*time.Second, func() error {
			out, err := c.kubectl("get", "ippool", "rbac-pool", "-o", `jsonpath={.status.conditions[?(@.type=="Validated")].status}`)
			if err == nil && out != "True" {
				err = fmt.Errorf("Validated=%q", out)
			}
			return err
		})
		if err != nil {
			t.Fatalf("IPPool status never written by kovn-controller (ippools/status): %v", err)
		}
	})

	t.Run("pods get networking", func(t *testing.T) {
		c.t = t
		c.createPod(testboxPod("default", "ra", onNode("c1-n1")))
		c.createPod(testboxPod("default", "rb", onNode("c1-n2")))
		c.waitRunning("default", "ra", 90*time.Second)
		b := c.waitRunning("default", "rb", 90*time.Second)
		c.ping("default", "ra", b.Status.PodIP)
	})

	t.Run("pods cannot open OVN's database ports: the control plane's, a node's, nor through a Service", func(t *testing.T) {
		c.t = t
		podsCannotReachOVNDatabases(t, c, r.State)
	})

	t.Run("tenant attacks: a namespace user with edit takes nothing of another namespace's or a node's", func(t *testing.T) {
		tenantAttacks(t, c, r.State)
	})

	t.Run("a daemon writes only network-status, only on pods of its own node", func(t *testing.T) {
		ctx, dry := context.Background(), []string{metav1.DryRunAll}
		status := func(ns, pod, patch string) error {
			_, err := n1.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{DryRun: dry}, "status")
			return err
		}
		netStatus := `{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`
		if err := status("default", "ra", netStatus); err != nil {
			t.Errorf("daemon of c1-n1 writing network-status of its pod ra: %v", err)
		}
		const policy = "kovn-daemon-network-status"
		expectDenialBy(t, "daemon of c1-n1 writing network-status of c1-n2's pod rb", policy, status("default", "rb", netStatus))
		expectDenialBy(t, "daemon of c1-n1 writing another annotation of ra", policy,
			status("default", "ra", `{"metadata":{"annotations":{"ovn.kovn.io/ip_address":"10.16.0.99"}}}`))
		expectDenialBy(t, "daemon of c1-n1 labelling ra", policy, status("default", "ra", `{"metadata":{"labels":{"x":"y"}}}`))
		_, err := n1.CoreV1().Pods("default").Patch(ctx, "ra", types.MergePatchType, []byte(netStatus), metav1.PatchOptions{DryRun: dry})
		expectForbidden(t, "patch pod ra itself (not its status)", err)
	})
}

// daemonWritesRefused tries, as a kovn-daemon, what only the controller or users may do. Every
// call is a dry run, so a wrongly granted permission fails the test without changing the rig.
func daemonWritesRefused(t *testing.T, kc kubernetes.Interface, dyn dynamic.Interface) {
	ctx, dry := context.Background(), []string{metav1.DryRunAll}
	_, err := kc.CoreV1().Pods("default").Create(ctx, testboxPod("default", "rbac-probe"), metav1.CreateOptions{DryRun: dry})
	expectForbidden(t, "create pod", err)
	err = kc.CoreV1().Nodes().Delete(ctx, "c1-n1", metav1.DeleteOptions{DryRun: dry})
	expectForbidden(t, "delete own Node", err)
	ips := dyn.Resource(schema.GroupVersionResource{Group: "kovn.io", Version: "v1alpha1", Resource: "ips"})
	ip := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kovn.io/v1alpha1", "kind": "IP",
		"metadata": map[string]any{"name": "rbac-probe"}, "spec": map[string]any{"subnet": "ovn-default", "v4IP": "10.16.0.250"}}}
	_, err = ips.Create(ctx, ip, metav1.CreateOptions{DryRun: dry})
	expectForbidden(t, "create IP", err)
	subnets := dyn.Resource(schema.GroupVersionResource{Group: "kovn.io", Version: "v1alpha1", Resource: "subnets"})
	sn, err := subnets.Get(ctx, "ovn-default", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("daemon reading Subnet ovn-default (it must): %v", err)
	}
	_, err = subnets.Update(ctx, sn, metav1.UpdateOptions{DryRun: dry})
	expectForbidden(t, "update Subnet", err)
	_, err = subnets.UpdateStatus(ctx, sn, metav1.UpdateOptions{DryRun: dry})
	expectForbidden(t, "update Subnet status", err)
}

// componentConfig is the client config of a running kovn component: the kubeconfig named on
// its command line (so the check is about the process, not about a file that might be unused),
// reached through the host forwarder.
func componentConfig(t *testing.T, st *rig.State, supervisor, name string) *rest.Config {
	t.Helper()
	pid := procPid(t, st, supervisor, name)
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range bytes.Split(b, []byte{0}) {
		if path, ok := strings.CutPrefix(string(arg), "--kubeconfig="); ok {
			rc, err := st.RestConfigAs("c1", path)
			if err != nil {
				t.Fatal(err)
			}
			return rc
		}
	}
	t.Fatalf("%s/%s (pid %d) has no --kubeconfig", supervisor, name, pid)
	return nil
}

// unboundDaemonConfig authenticates as kovn-daemon with a token bound to no Node.
func unboundDaemonConfig(t *testing.T, st *rig.State, admin kubernetes.Interface) *rest.Config {
	t.Helper()
	tr, err := admin.CoreV1().ServiceAccounts(rig.KovnNamespace).CreateToken(context.Background(), rig.DaemonServiceAccount,
		&authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var adminConfig string
	for _, ci := range st.Clusters {
		if ci.Name == "c1" {
			adminConfig = ci.Kubeconfig
		}
	}
	rc, err := st.RestConfigAs("c1", adminConfig)
	if err != nil {
		t.Fatal(err)
	}
	rc = rest.AnonymousClientConfig(rc)
	rc.BearerToken = tr.Status.Token
	return rc
}

func whoami(t *testing.T, rc *rest.Config) authnv1.UserInfo {
	t.Helper()
	r, err := kubeClient(t, rc).AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return r.Status.UserInfo
}

// annotateNode sets (or, with an empty value, removes) the e2e.kovn.io/rbac annotation.
func annotateNode(kc kubernetes.Interface, node, value string) error {
	v := strconv.Quote(value)
	if value == "" {
		v = "null"
	}
	patch := []byte(`{"metadata":{"annotations":{"e2e.kovn.io/rbac":` + v + `}}}`)
	_, err := kc.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func expectForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s as kovn-daemon: got %v, want Forbidden", what, err)
	}
}

// expectPolicyDenial wants a refusal by the ValidatingAdmissionPolicy, not by RBAC (which
// lets the daemon patch Nodes: only the policy can tell its own Node from another).
func expectPolicyDenial(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kovn-daemon-own-node") {
		t.Errorf("%s: got %v, want Forbidden by ValidatingAdmissionPolicy kovn-daemon-own-node", what, err)
	}
}

// expectDenialBy wants a refusal by the named ValidatingAdmissionPolicy.
func expectDenialBy(t *testing.T, what, policy string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), policy) {
		t.Errorf("%s: got %v, want Forbidden by ValidatingAdmissionPolicy %s", what, err, policy)
	}
}

func kubeClient(t *testing.T, rc *rest.Config) kubernetes.Interface {
	t.Helper()
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func dynamicClient(t *testing.T, rc *rest.Config) dynamic.Interface {
	t.Helper()
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// assertNoForbidden fails the test if kovn-controller or a kovn-daemon was refused anything by
// the apiserver during the run: the rig grants exactly deploy/'s RBAC, so a Forbidden in their
// logs is a permission missing from the generated roles.
func assertNoForbidden(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (d.Name() != "kovn-controller.log" && d.Name() != "kovn-daemon.log") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "is forbidden") {
				rel, _ := filepath.Rel(dir, p)
				t.Errorf("%s: a kovn component was refused by the apiserver (RBAC gap?): %s", rel, sc.Text())
				return nil
			}
		}
		return nil
	})
}

// podsCannotReachOVNDatabases: from pod ra (c1-n1), TCP to OVN's database ports of the control
// plane (where SB and NB listen), of node c1-n2's own and join addresses, and of a selectorless
// Service whose EndpointSlice points at SB (a tenant's way round an address check) is dropped,
// while a pod serving on 6642 stays reachable from a pod.
func podsCannotReachOVNDatabases(t *testing.T, c *cluster, st *rig.State) {
	c.createPod(testboxPod("default", "dbport", onNode("c1-n2"), func(p *corev1.Pod) {
		p.Spec.Containers[0].Args = []string{"serve", "--tcp=:6642"}
	}))
	server := c.waitRunning("default", "dbport", 90*time.Second)
	node, err := c.kc.CoreV1().Nodes().Get(context.Background(), "c1-n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	joinIPs, err := annotation.ParseAddrs(node.Annotations[annotation.JoinIP])
	if err != nil || len(joinIPs) == 0 {
		t.Fatalf("c1-n2's join addresses %q: %v", node.Annotations[annotation.JoinIP], err)
	}
	cp := st.Config.ControlPlaneIPs(1)
	var svcYAML strings.Builder
	svcYAML.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: sb, namespace: default}\nspec: {ports: [{port: 80, targetPort: 6642}]}\n")
	family := "IPv4" // the Service's, the cluster's primary family
	if !cp[0].Is4() {
		family = "IPv6"
	}
	fmt.Fprintf(&svcYAML, "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: sb-1, namespace: default, labels: {kubernetes.io/service-name: sb}}\n"+
		"addressType: %s\nports: [{port: 6642, protocol: TCP}]\nendpoints: [{addresses: [%q]}]\n", family, cp[0])
	c.applyYAML(svcYAML.String())
	svc, err := c.kc.CoreV1().Services("default").Get(context.Background(), "sb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dropped := []string{hostPort(svc.Spec.ClusterIP, 80)}
	for _, ip := range cp {
		dropped = append(dropped, hostPort(ip.String(), rig.PortSB), hostPort(ip.String(), rig.PortNB))
	}
	for _, ip := range append(st.Config.NodeIPs(1, 2), joinIPs...) {
		dropped = append(dropped, hostPort(ip.String(), rig.PortNB))
	}
	var reachable []string
	for _, ip := range server.Status.PodIPs {
		reachable = append(reachable, hostPort(ip.IP, 6642))
	}
	results := make([]string, len(dropped)+len(reachable))
	var wg sync.WaitGroup
	for i, addr := range append(dropped, reachable...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.exec("default", "ra", "connect", addr)
			results[i] = fmt.Sprintf("%s %v", strings.TrimSpace(out), err)
		}()
	}
	wg.Wait()
	for i, addr := range dropped {
		if strings.Contains(results[i], "connected") || !strings.Contains(results[i], "timeout") {
			t.Errorf("pod ra -> %s: %s, want a timeout (dropped, not refused)", addr, results[i])
		}
	}
	for i, addr := range reachable {
		if r := results[len(dropped)+i]; !strings.Contains(r, "connected") {
			t.Errorf("pod ra -> pod dbport %s: %s, want connected (pods keep the port)", addr, r)
		}
	}
	t.Logf("dropped: %v; reachable: %v", dropped, reachable)
}
