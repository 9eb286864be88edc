package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kovn/kovn/test/rig"
)

// cluster bundles what a test needs to drive one cluster of a rig.
type cluster struct {
	t    *testing.T
	st   *rig.State
	info rig.ClusterInfo
	kc   kubernetes.Interface
	plan netPlan // addresses the suites use, in the rig's primary family
	// metricsToken is a file with a kovn-metrics-reader token (metricsTokenFile).
	metricsToken string
}

func newCluster(t *testing.T, r *rig.Rig, name string) *cluster {
	t.Helper()
	kc, err := r.State.Kube(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, ci := range r.State.Clusters {
		if ci.Name == name {
			return &cluster{t: t, st: r.State, info: ci, kc: kc, plan: planFor(r.State.Config.IPFamily)}
		}
	}
	t.Fatalf("no cluster %s", name)
	return nil
}

// kubectl runs the real kubectl against the cluster.
func (c *cluster) kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.st.Config.K8sBinDir, "kubectl"), append([]string{"--kubeconfig", c.info.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return kubectlLogLine.ReplaceAllString(string(out), ""), err
}

// kubectlLogLine is a line of kubectl's own client-side log (klog: "E1123 16:48:18.598218
// 23262 websocket.go:296] Unknown stream id 1, discarding message"). It says nothing about
// the command's result, and, mixed into an exec's output, it broke checks that read the
// command's first line.
var kubectlLogLine = regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w.-]+\.go:\d+\] .*\n?`)

// exec runs the testbox in a pod and returns its output.
func (c *cluster) exec(ns, pod string, args ...string) (string, error) {
	return c.kubectl(append([]string{"exec", "-n", ns, pod, "--", "/testbox"}, args...)...)
}

// mustExec fails the test if the command fails.
func (c *cluster) mustExec(ns, pod string, args ...string) string {
	c.t.Helper()
	out, err := c.exec(ns, pod, args...)
	if err != nil {
		c.t.Fatalf("%s/%s: testbox %v: %v\n%s", ns, pod, args, err, out)
	}
	return out
}

// pingCount is how many echo requests the ping helpers send; every one must be answered.
const pingCount = 5

// ping sends pingCount echo requests and fails unless every one is answered: a path that
// loses packets is broken, whatever ping's exit status says.
func (c *cluster) ping(ns, pod, ip string) {
	c.t.Helper()
	c.pingVerdict(ns, pod, ip, false)
}

// pingNewPeer is ping for the first packets between two nodes' tunnel endpoints: RIG-NOTES
// ("The first packet to a new tunnel peer can be dropped until the userspace datapath has
// resolved the neighbour") allows exactly that first request to go unanswered, no other.
func (c *cluster) pingNewPeer(ns, pod, ip string) {
	c.t.Helper()
	if first := c.pingVerdict(ns, pod, ip, true); first {
		c.t.Logf("ping %s from %s/%s: first request to a new tunnel peer lost (allowed), %d/%d after it", ip, ns, pod, pingCount-1, pingCount-1)
	}
}

// pingVerdict runs the ping once more, logged, only when it lost a reply while some node's
// userspace datapath added or deleted a port (another pod started or stopped): a tunnelled
// packet crossing that node in the same instant can be dropped (a rig artifact, see
// rig.Config.DatapathPortChanges). A loss with no such change fails at once.
func (c *cluster) pingVerdict(ns, pod, ip string, allowFirstLost bool) (firstLost bool) {
	c.t.Helper()
	before := c.st.Config.DatapathPortChangesByNode()
	out, _ := c.exec(ns, pod, "ping", "-c", strconv.Itoa(pingCount), "-W", "1s", ip)
	firstLost, err := pingResult(out, pingCount, allowFirstLost)
	if err != nil {
		if changed := portsChangedOn(before, c.st.Config.DatapathPortChangesByNode()); len(changed) > 0 {
			c.t.Logf("ping %s from %s/%s: %v while the userspace datapath of %s added or deleted ports (rig artifact); once more\n%s",
				ip, ns, pod, err, strings.Join(changed, ", "), out)
			out, _ = c.exec(ns, pod, "ping", "-c", strconv.Itoa(pingCount), "-W", "1s", ip)
			firstLost, err = pingResult(out, pingCount, allowFirstLost)
		}
	}
	if err != nil {
		c.t.Fatalf("ping %s from %s/%s: %v\n%s", ip, ns, pod, err, out)
	}
	return firstLost
}

// portsChangedOn names the nodes whose datapath port count moved between two readings of
// rig.Config.DatapathPortChangesByNode.
func portsChangedOn(before, after map[string]int) []string {
	var out []string
	for node, v := range after {
		if old, ok := before[node]; ok && v != old {
			out = append(out, node)
		}
	}
	slices.Sort(out)
	return out
}

// pingResult checks testbox ping output: n sent, n answered — or, if allowed, all but seq=1.
func pingResult(out string, n int, allowFirstLost bool) (firstLost bool, err error) {
	if strings.Contains(out, fmt.Sprintf("%d packets transmitted, %d received", n, n)) {
		return false, nil
	}
	if !strings.Contains(out, fmt.Sprintf("%d packets transmitted, %d received", n, n-1)) {
		return false, fmt.Errorf("want %d of %d replies", n, n)
	}
	if !allowFirstLost || strings.Contains(out, " seq=1 ") {
		return false, fmt.Errorf("one of %d replies lost, and not the first to a new tunnel peer", n)
	}
	return true, nil
}

// pingLoss parses "N packets transmitted, M received" and returns N and N-M.
func pingLoss(out string) (sent, lost int, err error) {
	var got int
	for _, l := range strings.Split(out, "\n") {
		if _, err := fmt.Sscanf(strings.TrimSpace(l), "%d packets transmitted, %d received", &sent, &got); err == nil {
			return sent, sent - got, nil
		}
	}
	return 0, 0, fmt.Errorf("no ping summary in %q", out)
}

type podOpt func(*corev1.Pod)

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func withAnnotations(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func testboxPod(ns, name string, opts ...podOpt) *corev1.Pod {
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
			Name: "testbox", Image: rig.TestboxImage, ImagePullPolicy: corev1.PullNever, Args: []string{"serve"},
		}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (c *cluster) createPod(p *corev1.Pod) {
	c.t.Helper()
	if _, err := c.kc.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		c.t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

// waitRunning waits for a pod to run and returns it.
func (c *cluster) waitRunning(ns, name string, timeout time.Duration) *corev1.Pod {
	c.t.Helper()
	var p *corev1.Pod
	err := eventually(timeout, func() error {
		var err error
		p, err = c.kc.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s, ip %q", p.Status.Phase, p.Status.PodIP)
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("pod %s/%s not running: %v\nevents:\n%s", ns, name, err, c.events(ns, name))
	}
	return p
}

func (c *cluster) events(ns, name string) string {
	evs, err := c.kc.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, e := range evs.Items {
		lines = append(lines, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return strings.Join(lines, "\n")
}

// waitEvent waits for an event with reason on the named object and returns its message.
func (c *cluster) waitEvent(ns, name, reason string, timeout time.Duration) string {
	c.t.Helper()
	return c.waitEventWith(ns, name, reason, "", timeout)
}

func (c *cluster) deletePod(ns, name string) {
	c.t.Helper()
	zero := int64(0)
	if err := c.kc.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		c.t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
}

func (c *cluster) createNamespace(name string) {
	c.t.Helper()
	_, err := c.kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
}

// apply feeds YAML to kubectl apply.
func (c *cluster) apply(yaml string) (string, error) {
	cmd := exec.Command(filepath.Join(c.st.Config.K8sBinDir, "kubectl"), "--kubeconfig", c.info.Kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(yaml)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// nbctl runs ovn-nbctl against the cluster's northbound database (a diagnostic CLI in tests).
func (c *cluster) nbctl(args ...string) string {
	c.t.Helper()
	out, err := exec.Command("ovn-nbctl", append([]string{"--db=" + c.info.NBAddr, "--no-leader-only", "--timeout=10"}, args...)...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ovn-nbctl %v: %v %s", args, err, out)
	}
	return string(out)
}

func eventually(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// procPid returns the current pid of a supervised process, e.g. ("c1", "kovn-controller").
func procPid(t *testing.T, st *rig.State, supervisor, name string) int {
	t.Helper()
	for _, p := range st.AllProcs() {
		if p.Name == supervisor+"/"+name {
			return p.Pid
		}
	}
	t.Fatalf("no process %s/%s in the rig", supervisor, name)
	return 0
}

func TestKubectlLogLineFiltered(t *testing.T) {
	in := "E1123 16:48:18.598218   23262 websocket.go:296] Unknown stream id 1, discarding message\nreply web.dns.svc.cluster.local. AAAA Success answers=1\nI0102 03:04:05.000001 1 round_trippers.go:1] x\n"
	if got := kubectlLogLine.ReplaceAllString(in, ""); got != "reply web.dns.svc.cluster.local. AAAA Success answers=1\n" {
		t.Errorf("filtered: %q", got)
	}
}
