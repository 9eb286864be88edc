package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kovn/kovn/test/rig"
)

// kubeProxySemantics checks what a cluster that swaps kube-proxy for kovn relies on, as
// kube-proxy defines it. An ETP=Local LoadBalancer Service whose one backend, be1, runs on
// c1-n1: an outside client of c1-n2's NodePort and a pod on c1-n1 are refused, while a pod on
// c1-n2 and c1-n2 itself reach it there through the Service (internal clients, as kube-proxy's
// detect-local by node has them); a pod on c1-n2 is external at c1-n1's NodePort and gets
// be1 there, masqueraded (its reply comes back through c1-n1); the health check node port
// answers 200 with one local endpoint on c1-n1 and 503 on c1-n2; the proxy health port answers.
// Then a backend on c1-n2 starts terminating (a preStop hook holds it): c1-n2's NodePort still
// answers from outside through it (no ready endpoint left there: the serving terminating one
// carries the traffic) while its health check reads 503 (ready endpoints only). A Service
// labelled for another proxy gets nothing from kovn until the label goes.
func kubeProxySemantics(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	cfg := st.Config
	ext, n1, n2 := cfg.ExtNS(), cfg.NodeIPs(1, 1)[0], cfg.NodeIPs(1, 2)[0]
	c.labelPod("svc", "be1", "lbl", "yes") // its own label: other subtests' Services never see be-term
	lb := serviceSpec("lblocal", map[string]string{"lbl": "yes"})
	lb.Spec.Type, lb.Spec.ExternalTrafficPolicy = corev1.ServiceTypeLoadBalancer, corev1.ServiceExternalTrafficPolicyLocal
	c.createService(lb)
	got, err := c.kc.CoreV1().Services("svc").Get(context.Background(), "lblocal", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.HealthCheckNodePort == 0 {
		t.Fatal("Service lblocal (LoadBalancer, ETP=Local) has no health check node port")
	}
	np, hc := got.Spec.Ports[0].NodePort, got.Spec.HealthCheckNodePort
	at := func(ip fmt.Stringer, port int32) string { return hostPort(ip.String(), int(port)) }

	// be2 runs on c1-n2: a pod of the node is internal there, as the node itself. The client pod
	// runs on c1-n1: at c1-n2 it is external, as Kubernetes' e2e "should fallback to local
	// terminating endpoints ... externalTrafficPolicy=Local" has it.
	c.waitBackendsAt("svc", "be2", at(n2, np), []string{"be1"}, 20*time.Second)
	if out, _ := c.exec("svc", "client", "get", "http://"+at(n2, np)+"/"); !strings.Contains(out, "error") {
		t.Errorf("a pod on c1-n1 -> c1-n2's ETP=Local NodePort (no endpoint there): answered, want refused:\n%s", out)
	}
	if out, _ := c.exec("svc", "be2", "get", "-n", "3", "http://"+at(n1, np)+"/"); len(backendsSeen(out)) != 1 || strings.Contains(out, "error") {
		t.Errorf("a pod on c1-n2 -> c1-n1's ETP=Local NodePort: want be1 (external, masqueraded), got:\n%s", out)
	}
	if out := nodeTestbox(t, st, cfg.NodeNS(1, 2), "get", "-n", "3", "http://"+at(n2, np)+"/"); len(backendsSeen(out)) != 1 || strings.Contains(out, "error") {
		t.Errorf("c1-n2 itself -> its own ETP=Local NodePort %d (no endpoint there): want be1 through the Service, got:\n%s", np, out)
	}
	if out := nodeTestbox(t, st, ext, "get", "http://"+at(n2, np)+"/"); !strings.Contains(out, "error") {
		t.Errorf("outside -> c1-n2's ETP=Local NodePort (no endpoint there): answered, want refused:\n%s", out)
	}
	// c1-n2 itself at c1-n1's ETP=Local NodePort: translated on c1-n2 to c1-n1's endpoint, so be1
	// sees c1-n2's own address and its reply comes back through c1-n2 (Kubernetes' e2e "should
	// support externalTrafficPolicy=Local for type=NodePort"; sent on to c1-n1 untranslated, the
	// reply went from be1 through OVN straight to c1-n2's ovn0 and the connection never opened).
	var out string
	if err := eventually(20*time.Second, func() error {
		out = nodeTestbox(t, st, cfg.NodeNS(1, 2), "get", "http://"+at(n1, np)+"/")
		if f := strings.Fields(out + " - -"); f[0] != "be1" || !strings.HasPrefix(f[1], strings.TrimSuffix(hostPort(n2.String(), 0), "0")) {
			return fmt.Errorf("want be1 seeing %s", n2)
		}
		return nil
	}); err != nil {
		t.Errorf("c1-n2 itself -> c1-n1's ETP=Local NodePort %d: %v, got:\n%s", np, err, out)
	}
	t.Logf("ETP=Local NodePort %d on c1-n2 (no endpoint there): its own pod and the node reach be1 through the Service; "+
		"a pod on c1-n1 and an outside client are refused; c1-n2's pod gets be1 at c1-n1's, and c1-n2 itself too, be1 seeing it as %s",
		np, strings.Fields(out + " - -")[1])

	waitHealth := func(ip fmt.Stringer, port int32, path string, want ...string) string {
		t.Helper()
		var out string
		if err := eventually(20*time.Second, func() error {
			out = nodeTestbox(t, st, ext, "get", "-status", "http://"+at(ip, port)+path)
			for _, w := range want {
				if !strings.Contains(out, w) {
					return fmt.Errorf("no %q", w)
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("outside -> %s%s: %v\n%s", at(ip, port), path, err, out)
		}
		return strings.TrimSpace(out)
	}
	waitHealth(n1, hc, "/healthz", "status 200", `"service":{"namespace":"svc","name":"lblocal"},"localEndpoints":1,"serviceProxyHealthy":true`)
	waitHealth(n2, hc, "/healthz", "status 503", `"localEndpoints":0`)
	t.Logf("health check node port %d: c1-n1 200 with 1 local endpoint, c1-n2 503 with none", hc)
	for _, ip := range []fmt.Stringer{n1, n2} {
		out := waitHealth(ip, 10256, "/healthz", "status 200", `"lastUpdated"`, `"nodeEligible":true`)
		waitHealth(ip, 10256, "/livez", "status 200")
		t.Logf("proxy health port on %s: %s", ip, strings.ReplaceAll(out, "\n", " "))
	}

	terminatingFallback(t, c, st, lb)
	otherProxy(t, c, st)
	hostNetworkHostname(t, c, st)
}

// hostNetworkHostname: a hostNetwork pod shares its node's UTS namespace, as on a real node:
// it answers with the node's name (the rig runs each node under its own hostname). With a
// second one on c1-n1, a Service served from both nodes' host network: each node reaches both
// endpoints through the ClusterIP (Kubernetes' e2e "should function for service endpoints using
// hostNetwork": a node's connection to the other node's endpoint left with ovn0's join address
// and was never answered).
func hostNetworkHostname(t *testing.T, c *cluster, st *rig.State) {
	for i, name := range []string{"hostnet", "hostnet1"} {
		p := testboxPod("svc", name, onNode(rig.NodeName(1, 2-i)))
		p.Labels = map[string]string{"hostnet": "yes", "hostnet-node": rig.NodeName(1, 2-i)}
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Args = []string{"serve", "-http", ":18080", "-tcp", ":19000", "-udp", ":19001"}
		c.createPod(p)
		defer c.deletePod("svc", name)
	}
	c.waitRunning("svc", "hostnet", 90*time.Second)
	c.waitRunning("svc", "hostnet1", 90*time.Second)
	url := "http://" + hostPort(st.Config.NodeIPs(1, 2)[0].String(), 18080) + "/"
	var out string
	if err := eventually(20*time.Second, func() error {
		var err error
		out, err = c.exec("svc", "client", "get", url)
		return err
	}); err != nil {
		t.Fatalf("client -> hostNetwork pod %s: %v %s", url, err, out)
	}
	if host := strings.Fields(out + " -")[0]; host != "c1-n2" {
		t.Errorf("a hostNetwork pod on c1-n2 answers as %q, want its node's name c1-n2:\n%s", host, out)
	}
	t.Logf("hostNetwork pod on c1-n2 answers as %s", strings.TrimSpace(out))

	svc := serviceSpec("hostnet", map[string]string{"hostnet": "yes"})
	svc.Spec.Ports = svc.Spec.Ports[:1]
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(18080)
	cip := c.createService(svc)[0]
	defer func() {
		_ = c.kc.CoreV1().Services("svc").Delete(context.Background(), "hostnet", metav1.DeleteOptions{})
	}()
	for n := 1; n <= 2; n++ {
		// 20 requests, each on a new connection: every one answered, by both endpoints (once the
		// nodes have the new Service: until then OVN may pick the node's own address).
		var seen map[string]int
		var out string
		err := eventually(30*time.Second, func() error {
			seen = map[string]int{}
			out = nodeTestbox(t, st, st.Config.NodeNS(1, n), "get", "-n", "20", "http://"+hostPort(cip, 80)+"/")
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				seen[strings.Fields(l + " -")[0]]++
			}
			if seen["c1-n1"] == 0 || seen["c1-n2"] == 0 || seen["c1-n1"]+seen["c1-n2"] != 20 {
				return fmt.Errorf("answers by first word %v, want 20 by c1-n1 and c1-n2", seen)
			}
			return nil
		})
		if err != nil {
			t.Errorf("c1-n%d -> ClusterIP %s served from both nodes' host network: %v:\n%s", n, cip, err, out)
		} else {
			t.Logf("c1-n%d -> ClusterIP %s served from both nodes' host network: %v", n, cip, seen)
		}
	}
	hostNetworkLocal(t, c, st)
}

// hostNetworkLocal: internalTrafficPolicy=Local over host-network endpoints, from the nodes
// and from a pod (Kubernetes' e2e "should respect internalTrafficPolicy=Local Pod and Node, to
// Pod (hostNetwork: true)", which CI's upstream set leaves to `make upstream-e2e`: its ten
// expected refusals wait 5 s each). With an endpoint on each node, each node and the client
// pod on c1-n1 reach only their own node's; with c1-n2's alone, c1-n1 and its pod get no
// answer while c1-n2 does. Every ClusterIP of each Service, both families.
func hostNetworkLocal(t *testing.T, c *cluster, st *rig.State) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	create := func(name string, sel map[string]string) []string {
		svc := serviceSpec(name, sel)
		svc.Spec.Ports = svc.Spec.Ports[:1]
		svc.Spec.Ports[0].TargetPort = intstr.FromInt32(18080)
		svc.Spec.InternalTrafficPolicy = &local
		t.Cleanup(func() { _ = c.kc.CoreV1().Services("svc").Delete(context.Background(), name, metav1.DeleteOptions{}) })
		return c.createService(svc)
	}
	both := create("hostnet-local", map[string]string{"hostnet": "yes"})
	only2 := create("hostnet-local-n2", map[string]string{"hostnet-node": "c1-n2"})
	// from waits until the client's connections to vip are answered (a probe gives up after
	// 1 s, a request to a VIP not programmed yet would wait 5 s), then asks 10 times (new
	// connections) and wants every answer from node want.
	from := func(who, want string, run func(args ...string) string, vip string) {
		t.Helper()
		var out string
		err := eventually(30*time.Second, func() error {
			if out = run("probe", "-t", "1s", hostPort(vip, 80)); !strings.HasSuffix(strings.TrimSpace(out), " ok") {
				return fmt.Errorf("not answered")
			}
			return nil
		})
		if err == nil {
			err = eventually(10*time.Second, func() error {
				out = run("get", "-n", "10", "http://"+hostPort(vip, 80)+"/")
				n := 0
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					if strings.Fields(l + " -")[0] == want {
						n++
					}
				}
				if n != 10 {
					return fmt.Errorf("%d of 10 answers by %s", n, want)
				}
				return nil
			})
		}
		if err != nil {
			t.Errorf("%s -> ITP=Local ClusterIP %s: %v:\n%s", who, vip, err, out)
		}
	}
	node := func(n int) func(...string) string {
		return func(args ...string) string { return nodeTestbox(t, st, st.Config.NodeNS(1, n), args...) }
	}
	pod := func(args ...string) string { out, _ := c.exec("svc", "client", args...); return out }
	for _, vip := range both {
		from("c1-n1", "c1-n1", node(1), vip)
		from("c1-n2", "c1-n2", node(2), vip)
		from("svc/client (on c1-n1)", "c1-n1", pod, vip)
	}
	probe := []string{"probe", "-t", "2s"}
	for _, vip := range only2 {
		from("c1-n2", "c1-n2", node(2), vip) // programmed: so silence below is the policy
		probe = append(probe, hostPort(vip, 80))
	}
	// Without a local endpoint: no answer within 2 s, to any ClusterIP, from c1-n1 or its pod.
	for who, run := range map[string]func(...string) string{"c1-n1": node(1), "svc/client (on c1-n1)": pod} {
		out := strings.TrimSpace(run(probe...))
		if lines := strings.Split(out, "\n"); len(lines) != len(only2) || slices.ContainsFunc(lines, func(l string) bool { return !strings.HasSuffix(l, " fail") }) {
			t.Errorf("%s -> %v (their only endpoint on c1-n2's host network, ITP=Local): want no answer:\n%s", who, only2, out)
		}
	}
	if !t.Failed() {
		t.Logf("ITP=Local over host-network endpoints %v and %v: each node and the pod reached their own node's only; none without one", both, only2)
	}
}

// terminatingFallback: be-term on c1-n2 joins lblocal, then is deleted with a preStop hook that
// holds it terminating; outside -> c1-n2's NodePort is answered by it, c1-n2's health check
// says 503 (KEP-1669). It is then removed at once.
func terminatingFallback(t *testing.T, c *cluster, st *rig.State, lb *corev1.Service) {
	cfg := st.Config
	ext, n2 := cfg.ExtNS(), cfg.NodeIPs(1, 2)[0]
	got, err := c.kc.CoreV1().Services("svc").Get(context.Background(), lb.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, hc := got.Spec.Ports[0].NodePort, got.Spec.HealthCheckNodePort
	p := backendPod("be-term", "c1-n2", map[string]string{"lbl": "yes"})
	grace := int64(60)
	p.Spec.TerminationGracePeriodSeconds = &grace
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/testbox", "sleep"}}}}
	c.createPod(p)
	c.waitReady("svc", "be-term", 90*time.Second)
	url := "http://" + hostPort(n2.String(), int(np)) + "/"
	waitOutside(t, st, ext, url, []string{"be-term"})
	if err := c.kc.CoreV1().Pods("svc").Delete(context.Background(), "be-term", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		zero := int64(0)
		_ = c.kc.CoreV1().Pods("svc").Delete(context.Background(), "be-term", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	if err := eventually(30*time.Second, func() error {
		out := nodeTestbox(t, st, ext, "get", "-status", "http://"+hostPort(n2.String(), int(hc))+"/healthz")
		if !strings.Contains(out, "status 503") {
			return fmt.Errorf("health check: %s", out)
		}
		return nil
	}); err != nil {
		t.Fatalf("c1-n2's only local endpoint terminating: %v", err)
	}
	out := waitOutside(t, st, ext, url, []string{"be-term"})
	t.Logf("be-term terminating (preStop holds it): c1-n2's health check 503, its NodePort still answered by it from outside (%d answers)", strings.Count(out, "be-term"))
}

// otherProxy: a Service labelled service.kubernetes.io/service-proxy-name belongs to another
// proxy: its ClusterIP and NodePort go unanswered (kovn programs nothing) until the label goes.
func otherProxy(t *testing.T, c *cluster, st *rig.State) {
	s := serviceSpec("other", map[string]string{"app": "echo"})
	s.Spec.Type = corev1.ServiceTypeNodePort
	s.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "another-proxy"}
	vips := c.createService(s)
	got, err := c.kc.CoreV1().Services("svc").Get(context.Background(), "other", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeURL := "http://" + hostPort(st.Config.NodeIPs(1, 1)[0].String(), int(got.Spec.Ports[0].NodePort)) + "/"
	for i := 0; i < 3; i++ { // kovn ignores it from the start: never answered
		for _, vip := range vips {
			if out, err := c.exec("svc", "client", "get", "http://"+hostPort(vip, 80)+"/"); err == nil {
				t.Fatalf("ClusterIP %s of a Service for another proxy answered:\n%s", vip, out)
			}
		}
		if out := nodeTestbox(t, st, st.Config.ExtNS(), "get", nodeURL); !strings.Contains(out, "error") {
			t.Fatalf("NodePort of a Service for another proxy answered:\n%s", out)
		}
		time.Sleep(time.Second)
	}
	if out, err := c.kubectl("label", "service", "-n", "svc", "other", "service.kubernetes.io/service-proxy-name-"); err != nil {
		t.Fatalf("unlabel: %v %s", err, out)
	}
	for _, vip := range vips {
		c.waitBackends("svc", "client", vip, nil, 20*time.Second)
	}
	waitOutside(t, st, st.Config.ExtNS(), nodeURL, nil)
	t.Logf("Service labelled for another proxy: ClusterIPs %v and NodePort unanswered for 3 s; unlabelled, both answer", vips)
}

// streamRequestTimeout bounds one request of rollingUpdate's streams: long enough for TCP to
// retransmit a lost SYN twice (1 s, then 2 s), so a dropped packet delays a request without
// failing it; a request reset, refused or never answered fails.
const streamRequestTimeout = "5s"

// rollingUpdate restarts a 2-replica Deployment on c1-n2 (surge 1, none unavailable; a 3 s
// preStop delay, as a real rollout configures so that a pod leaves the load balancers before
// it stops) under two 20 ms request streams, each request on a new connection: a pod on c1-n1
// to the ClusterIP, and the external host to c1-n2's ETP=Local NodePort. Not one request may
// fail, and both streams must have been answered by the old and the new pods.
func rollingUpdate(t *testing.T, c *cluster, st *rig.State) {
	c.t = t
	replicas, surge, none := int32(2), intstr.FromInt32(1), intstr.FromInt32(0)
	grace := int64(10)
	pod := backendPod("be-roll", "c1-n2", map[string]string{"app": "be-roll"})
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/testbox", "sleep", "3s"}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "svc", Name: "be-roll"}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "be-roll"}},
		Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &none}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: pod.Spec}}}
	if _, err := c.kc.AppsV1().Deployments("svc").Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.kubectlOK("-n", "svc", "rollout", "status", "deployment/be-roll", "--timeout=120s")
	vips := c.createService(serviceSpec("be-roll", map[string]string{"app": "be-roll"}))
	local := serviceSpec("be-roll-local", map[string]string{"app": "be-roll"})
	local.Spec.Type, local.Spec.ExternalTrafficPolicy = corev1.ServiceTypeNodePort, corev1.ServiceExternalTrafficPolicyLocal
	c.createService(local)
	got, err := c.kc.CoreV1().Services("svc").Get(context.Background(), "be-roll-local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeURL := "http://" + hostPort(st.Config.NodeIPs(1, 2)[0].String(), int(got.Spec.Ports[0].NodePort)) + "/"
	inURL := "http://" + hostPort(vips[0], 80) + "/"
	c.waitBackends("svc", "client", vips[0], nil, 20*time.Second)
	waitOutside(t, st, st.Config.ExtNS(), nodeURL, nil)

	stop := fmt.Sprintf("/tmp/getstream-stop-%d", time.Now().UnixNano()) // in the client pod
	extStop := filepath.Join(st.Config.Dir, "getstream-stop")            // the external host runs on the host's files
	outside, inside := make(chan string, 1), make(chan string, 1)
	go func() {
		inside <- func() string {
			out, _ := c.exec("svc", "client", "getstream", "-t", streamRequestTimeout, "-stop-file", stop, inURL)
			return out
		}()
	}()
	go func() {
		outside <- nodeTestbox(t, st, st.Config.ExtNS(), "getstream", "-t", streamRequestTimeout, "-stop-file", extStop, nodeURL)
	}()
	time.Sleep(2 * time.Second)
	start := time.Now()
	c.kubectlOK("-n", "svc", "rollout", "restart", "deployment/be-roll")
	c.kubectlOK("-n", "svc", "rollout", "status", "deployment/be-roll", "--timeout=120s")
	rolled := time.Since(start)
	// The old pods' preStop delay and termination, then a tail on the new pods only.
	if err := eventually(60*time.Second, func() error {
		pods, err := c.kc.CoreV1().Pods("svc").List(context.Background(), metav1.ListOptions{LabelSelector: "app=be-roll"})
		if err != nil || len(pods.Items) != 2 {
			return fmt.Errorf("be-roll pods: %d %v", len(pods.Items), err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if out, err := c.exec("svc", "client", "touch", stop); err != nil {
		t.Fatalf("ending the in-cluster stream: %v %s", err, out)
	}
	if err := os.WriteFile(extStop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for what, ch := range map[string]chan string{"pod -> ClusterIP " + vips[0]: inside, "outside -> c1-n2's ETP=Local NodePort": outside} {
		out := <-ch
		var sent, failed int
		if _, err := fmt.Sscanf(out, "%d requests, %d failed", &sent, &failed); err != nil || sent == 0 || failed != 0 || !strings.Contains(out, "answered by") {
			t.Errorf("%s across the rollout: %d of %d requests failed (want 0):\n%s", what, failed, sent, out)
			continue
		}
		answered := strings.Count(strings.SplitN(strings.SplitN(out, "answered by ", 2)[1], "\n", 2)[0], ",") + 1
		if answered < 4 {
			t.Errorf("%s: answered by %d pods, want the 2 old and the 2 new:\n%s", what, answered, out)
		}
		t.Logf("%s across a rollout of 2 pods (%.1fs): %s", what, rolled.Seconds(), strings.ReplaceAll(strings.TrimSpace(out), "\n", "; "))
	}
}
