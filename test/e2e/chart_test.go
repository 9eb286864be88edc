package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/test/rig"
)

// TestChartInstall: kovn installed by `helm install` of deploy/ (kovn-rig up --install chart):
// OVN central, OVS, ovn-controller, kovn-controller and kovn-daemon run as the chart's pods on
// the rig's kubelets, from the image `make images` built; pods get networking across nodes in
// both families, and Services work.
func TestChartInstall(t *testing.T) {
	cfg := rigConfig(t, 1, 2)
	cfg.Kovn, cfg.IPFamily, cfg.Install = true, rig.Dual, rig.InstallChart
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")

	t.Run("every component is a Ready pod of the chart, none a rig process", func(t *testing.T) {
		c.t = t
		checkChartPods(t, c, map[string]int{"kovn-ovn-central": 1, "kovn-ovs": 2, "kovn-daemon": 2, "kovn-controller": 2})
		for _, p := range r.State.AllProcs() {
			for _, name := range []string{"ovs-vswitchd", "ovsdb-server", "ovn-controller", "ovn-northd", "kovn-daemon", "kovn-controller"} {
				if p.Name == name {
					t.Errorf("the rig runs %s itself (pid %d): with --install chart it must be a pod", name, p.Pid)
				}
			}
		}
	})

	c.createPod(testboxPod("default", "a", onNode("c1-n1")))
	c.createPod(testboxPod("default", "b", onNode("c1-n2")))
	a := c.waitRunning("default", "a", 90*time.Second)
	b := c.waitRunning("default", "b", 90*time.Second)
	familyChecks(t, c, r.State, false, a, b)
	familyChecks(t, c, r.State, true, a, b)

	t.Run("ClusterIP: TCP reaches both backends, both families", func(t *testing.T) {
		c.t = t
		c.createNamespace("svc")
		c.createPod(backendPod("be1", "c1-n1", map[string]string{"app": "echo"}))
		c.createPod(backendPod("be2", "c1-n2", map[string]string{"app": "echo"}))
		c.createPod(testboxPod("svc", "client", onNode("c1-n1")))
		for _, p := range []string{"be1", "be2", "client"} {
			c.waitReady("svc", p, 90*time.Second)
		}
		for _, vip := range c.createService(serviceSpec("echo", map[string]string{"app": "echo"})) {
			c.waitBackends("svc", "client", vip, []string{"be1", "be2"}, 30*time.Second)
		}
	})
}

// checkChartPods waits until the chart's workloads have want pods each, all Running and Ready.
func checkChartPods(t *testing.T, c *cluster, want map[string]int) {
	t.Helper()
	var last string
	err := eventually(2*time.Minute, func() error {
		pods, err := c.kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string]int{}
		var notReady []string
		for i := range pods.Items {
			p := &pods.Items[i]
			app := p.Labels["app"]
			if _, ok := want[app]; !ok {
				continue
			}
			got[app]++
			if p.Status.Phase != corev1.PodRunning || !podReady(p) {
				notReady = append(notReady, p.Name+"("+string(p.Status.Phase)+")")
			}
		}
		last = fmt.Sprintf("pods per workload %v, not ready %v", got, notReady)
		for app, n := range want {
			if got[app] != n {
				return fmt.Errorf("%s", last)
			}
		}
		if len(notReady) > 0 {
			return fmt.Errorf("%s", last)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("chart pods: %v", err)
	}
	t.Logf("chart pods: %s", last)
}

func podReady(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// nodeCmd runs a command in node (cl, n)'s network namespace.
func nodeCmd(cfg rig.Config, cl, n int, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", cfg.NodeNS(cl, n)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
