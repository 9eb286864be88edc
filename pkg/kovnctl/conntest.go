package kovnctl

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kovn/kovn/pkg/kovnctl/probe"
)

// TestCluster is one cluster the connectivity test runs in.
type TestCluster struct {
	Name   string
	Kube   kubernetes.Interface // pods' logs
	Client client.Client
}

// ConnTestOptions tune the connectivity test.
type ConnTestOptions struct {
	Image    string        // holds /kovn-probe (kovn's image does)
	Nodes    int           // nodes per cluster with a server and a client (the first Ready ones by name)
	Timeout  time.Duration // for the pods to run and the checks to finish
	Keep     bool          // leave the namespace for a look
	Progress io.Writer
}

// RunConnectivityTest deploys an echo server and a client on Nodes nodes of each cluster, a
// Service (exported with MCS when several clusters have the CRDs), runs every client's
// checks and returns their results.
func RunConnectivityTest(ctx context.Context, clusters []TestCluster, opt ConnTestOptions) ([]probe.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	say := func(format string, a ...any) {
		fmt.Fprintf(opt.Progress, "[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
	}
	views := make([]ClusterView, len(clusters))
	mcs := len(clusters) > 1
	for i, c := range clusters {
		nodes, err := testNodes(ctx, c.Client, opt.Nodes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		views[i] = ClusterView{Name: c.Name, ClientNodes: nodes}
		if err := deployServers(ctx, c, nodes, opt.Image); err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		if mcs {
			mcs = exportEcho(ctx, c.Client) == nil
		}
		say("%s: echo servers on %v", c.Name, nodes)
	}
	if !opt.Keep {
		defer func() {
			for _, c := range clusters {
				_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TestNamespace}})
			}
		}()
	}
	var results []probe.Result
	for i, c := range clusters {
		servers, ips, err := waitServers(ctx, c.Client, len(views[i].ClientNodes))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		views[i].Servers, views[i].ServiceIPs, views[i].MCS = servers, ips, mcs
		if mcs {
			csIPs, err := waitImport(ctx, c.Client, len(clusters))
			if err != nil {
				results = append(results, probe.Result{Target: probe.Target{Check: "ServiceImport", To: TestNamespace + "/" + TestService},
					From: c.Name, Detail: err.Error()})
			}
			views[i].ClusterSetIPs = csIPs
		}
	}
	say("servers ready; clients checking")
	plan := Plan(views)
	for _, c := range clusters {
		for node, targets := range plan[c.Name] {
			if err := runClient(ctx, c, node, targets, opt.Image); err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
		}
	}
	for _, c := range clusters {
		for node := range plan[c.Name] {
			rs, err := clientResults(ctx, c, ClientName(node))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			results = append(results, rs...)
		}
	}
	slices.SortStableFunc(results, func(a, b probe.Result) int {
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.Check, b.Check), strings.Compare(a.To, b.To))
	})
	say("%d checks done", len(results))
	return results, nil
}

// testNodes are the first n Ready, schedulable nodes by name.
func testNodes(ctx context.Context, c client.Client, n int) ([]string, error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var out []string
	for _, nd := range nodes.Items {
		if c := nodeCondition(&nd, corev1.NodeReady); c != nil && c.Status == corev1.ConditionTrue && !nd.Spec.Unschedulable {
			out = append(out, nd.Name)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return nil, fmt.Errorf("no Ready node")
	}
	return out[:min(n, len(out))], nil
}

func testPod(name, node, image string, args []string) *corev1.Pod {
	grace := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: TestNamespace, Name: name, Labels: map[string]string{"app.kubernetes.io/name": "kovn-connectivity-test"}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace, RestartPolicy: corev1.RestartPolicyNever,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "agent", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: append([]string{"/kovn-probe"}, args...)}}},
	}
}

func createOrKeep(ctx context.Context, c client.Client, o client.Object) error {
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func deployServers(ctx context.Context, c TestCluster, nodes []string, image string) error {
	// The namespace of an earlier run may still be going away.
	if err := poll(ctx, "the previous run's namespace to go", func(ctx context.Context) (bool, error) {
		var ns corev1.Namespace
		err := c.Client.Get(ctx, client.ObjectKey{Name: TestNamespace}, &ns)
		if apierrors.IsNotFound(err) || err == nil && ns.DeletionTimestamp == nil {
			return true, nil
		}
		return false, err
	}); err != nil {
		return err
	}
	if err := createOrKeep(ctx, c.Client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TestNamespace}}); err != nil {
		return err
	}
	for _, node := range nodes {
		p := testPod(ServerName(node), node, image, []string{"serve", "--name", c.Name + "/" + ServerName(node)})
		p.Labels["role"] = "server"
		p.Spec.RestartPolicy = corev1.RestartPolicyAlways
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(TestPort)}}}
		if err := createOrKeep(ctx, c.Client, p); err != nil {
			return err
		}
	}
	policy := corev1.IPFamilyPolicyPreferDualStack
	return createOrKeep(ctx, c.Client, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: TestNamespace, Name: TestService},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"role": "server"}, IPFamilyPolicy: &policy,
			Ports: []corev1.ServicePort{{Name: "http", Port: TestPort, TargetPort: intstr.FromInt32(TestPort)}}},
	})
}

// exportEcho exports the Service; an error (no MCS CRDs) means the test runs without MCS.
func exportEcho(ctx context.Context, c client.Client) error {
	return createOrKeep(ctx, c, &mcsv1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: TestNamespace, Name: TestService}})
}

func poll(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("%s: %w", what, last)
		}
		return fmt.Errorf("%s: timed out", what)
	}
	return nil
}

// waitServers waits for n Ready servers and the Service's ClusterIPs.
func waitServers(ctx context.Context, c client.Client, n int) ([]ServerPod, []string, error) {
	var servers []ServerPod
	var ips []string
	err := poll(ctx, "waiting for the echo servers", func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(TestNamespace), client.MatchingLabels{"role": "server"}); err != nil {
			return false, err
		}
		servers = nil
		for _, p := range pods.Items {
			if rc := podCondition(&p, corev1.PodReady); rc == nil || rc.Status != corev1.ConditionTrue {
				return false, fmt.Errorf("pod %s is %s, not Ready", p.Name, p.Status.Phase)
			}
			s := ServerPod{Name: p.Name, Node: p.Spec.NodeName}
			for _, ip := range p.Status.PodIPs {
				s.IPs = append(s.IPs, ip.IP)
			}
			servers = append(servers, s)
		}
		var svc corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: TestNamespace, Name: TestService}, &svc); err != nil {
			return false, err
		}
		ips = svc.Spec.ClusterIPs
		return len(servers) == n, fmt.Errorf("%d of %d servers", len(servers), n)
	})
	return servers, ips, err
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// waitImport waits up to a minute for the ServiceImport with every cluster's backends.
func waitImport(ctx context.Context, c client.Client, clusters int) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var ips []string
	err := poll(ctx, "ServiceImport "+TestService, func(ctx context.Context) (bool, error) {
		var si mcsv1.ServiceImport
		if err := c.Get(ctx, client.ObjectKey{Namespace: TestNamespace, Name: TestService}, &si); err != nil {
			return false, err
		}
		ips = si.Spec.IPs
		if len(ips) == 0 || len(si.Status.Clusters) != clusters {
			return false, fmt.Errorf("IPs %v, clusters %d of %d", ips, len(si.Status.Clusters), clusters)
		}
		return true, nil
	})
	return ips, err
}

func runClient(ctx context.Context, c TestCluster, node string, targets []probe.Target, image string) error {
	b, err := json.Marshal(targets)
	if err != nil {
		return err
	}
	name := ClientName(node)
	// A client from an earlier run (--keep) goes first: its log holds the old results.
	if err := c.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: TestNamespace, Name: name}}); err == nil {
		_ = poll(ctx, "deleting the old "+name, func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Namespace: TestNamespace, Name: name}, &corev1.Pod{})
			return apierrors.IsNotFound(err), nil
		})
	}
	return c.Client.Create(ctx, testPod(name, node, image, []string{"check", "--from", c.Name + "/" + name, "--targets", string(b)}))
}

// clientResults waits for the client to finish and reads its results from its log.
func clientResults(ctx context.Context, c TestCluster, name string) ([]probe.Result, error) {
	var phase corev1.PodPhase
	err := poll(ctx, "waiting for "+name, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: TestNamespace, Name: name}, &p); err != nil {
			return false, err
		}
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed, fmt.Errorf("pod %s is %s", name, phase)
	})
	if err != nil {
		return nil, err
	}
	raw, err := c.Kube.CoreV1().Pods(TestNamespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("log of %s: %w", name, err)
	}
	var out []probe.Result
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var r probe.Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s (%s): %q is not a result", name, phase, sc.Text())
		}
		out = append(out, r)
	}
	return out, nil
}
