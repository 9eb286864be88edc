package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/pkg/annotation"
	"github.com/kovn/kovn/test/rig"
)

// TestFakeNodes is the scale rig in small: 3 fake nodes get join addresses and join ports,
// 20 pods bound to them get switch ports, a held kovn-controller stays down until started
// again, and the fake nodes are still Ready (not tainted unreachable) after the node monitor
// grace period — their leases are being renewed.
func TestFakeNodes(t *testing.T) {
	concurrent(t) // waits on conditions only: no loss counted, nothing timed
	const fakes, pods = 3, 20
	cfg := rigConfig(t, 1, 1)
	cfg.Kovn, cfg.FakeNodes = true, fakes
	r := upRig(t, cfg)
	up := time.Now()
	c := newCluster(t, r, "c1")
	ctx := context.Background()
	lsps := func() string { return c.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port") }
	for i := 1; i <= fakes; i++ {
		name := rig.FakeNodeName(1, i)
		if err := eventually(30*time.Second, func() error {
			n, err := c.kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil || n.Annotations[annotation.JoinIP] == "" || !strings.Contains(lsps(), "node-"+name) {
				return fmt.Errorf("fake node %s: no join address or join port yet (%v)", name, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var ports []string
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf("f%02d", i)
		c.createPod(fakeNodePod(name, rig.FakeNodeName(1, 1+i%fakes)))
		ports = append(ports, name+".default")
	}
	waitPorts(t, lsps, ports)

	// A held controller stays stopped (the supervisor would restart it within a second).
	if err := r.State.StopDaemon("c1", "kovn-controller"); err != nil {
		t.Fatal(err)
	}
	c.createPod(fakeNodePod("held", rig.FakeNodeName(1, 1)))
	time.Sleep(3 * time.Second)
	if _, err := r.State.DaemonPid("c1", "kovn-controller"); err == nil || strings.Contains(lsps(), "held.default") {
		t.Fatalf("held kovn-controller is running (err %v) or the pod got a port", err)
	}
	_ = c.kc.CoordinationV1().Leases("kube-system").Delete(ctx, "kovn-controller", metav1.DeleteOptions{})
	if _, err := r.State.StartDaemon(ctx, "c1", "kovn-controller"); err != nil {
		t.Fatal(err)
	}
	waitPorts(t, lsps, []string{"held.default"})

	// kube-controller-manager's node monitor grace is 20 s: past it, a fake node without a
	// renewed lease would be NotReady and tainted.
	time.Sleep(time.Until(up.Add(30 * time.Second)))
	for i := 1; i <= fakes; i++ {
		n, err := c.kc.CoreV1().Nodes().Get(ctx, rig.FakeNodeName(1, i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range n.Spec.Taints {
			if tn.Key != rig.FakeNodeTaint {
				t.Fatalf("fake node %s tainted %s: its heartbeat is not kept", n.Name, tn.Key)
			}
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				t.Fatalf("fake node %s Ready=%s: its heartbeat is not kept", n.Name, cond.Status)
			}
		}
	}
}

func fakeNodePod(name, node string) *corev1.Pod {
	p := testboxPod("default", name, onNode(node))
	p.Spec.Tolerations = []corev1.Toleration{{Key: rig.FakeNodeTaint, Operator: corev1.TolerationOpExists}}
	return p
}

// waitPorts waits until the named Logical_Switch_Ports are all in NB.
func waitPorts(t *testing.T, lsps func() string, names []string) {
	t.Helper()
	if err := eventually(60*time.Second, func() error {
		have := strings.Fields(lsps())
		for _, name := range names {
			if !slices.Contains(have, name) {
				return fmt.Errorf("no Logical_Switch_Port %s in NB", name)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
