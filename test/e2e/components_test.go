package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/test/rig"
)

// A suite stops, crashes and restarts kovn's and OVS's components the same way on either
// install: the rig's supervised processes (--install processes), or the chart's pods (--install
// chart), where kubelet restarts a dead container and the process is found through the
// container's ID in /proc/<pid>/cgroup (every process kubelet started for it, and nothing else).

// chartContainers: where the chart runs each node component, as (app label, container).
var chartContainers = map[string][2]string{
	"ovsdb-server":   {"kovn-ovs", "ovsdb"},
	"ovs-vswitchd":   {"kovn-ovs", "vswitchd"},
	"ovn-controller": {"kovn-ovs", "ovn-controller"},
	"kovn-daemon":    {"kovn-daemon", "daemon"},
	"kovn-speaker":   {"kovn-speaker", "speaker"},
}

// nodeIndex is (cluster, node) of a rig node name such as "c1-n2".
func nodeIndex(t *testing.T, node string) (int, int) {
	t.Helper()
	var cl, n int
	if _, err := fmt.Sscanf(node, "c%d-n%d", &cl, &n); err != nil {
		t.Fatalf("node name %q: %v", node, err)
	}
	return cl, n
}

// componentPid is the pid of component name on node, e.g. ("c1-n2", "ovs-vswitchd").
func componentPid(t *testing.T, c *cluster, node, name string) int {
	t.Helper()
	if !c.st.Config.Chart() {
		return procPid(t, c.st, node, name)
	}
	where, ok := chartContainers[name]
	if !ok {
		t.Fatalf("the chart runs no %s on nodes", name)
	}
	pod, err := chartPod(c, where[0], node)
	if err != nil {
		t.Fatal(err)
	}
	return containerPid(t, pod, where[1])
}

// chartPod is the chart's pod of app on node.
func chartPod(c *cluster, app, node string) (*corev1.Pod, error) {
	pods, err := c.kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{
		LabelSelector: "app=" + app, FieldSelector: "spec.nodeName=" + node})
	if err != nil || len(pods.Items) != 1 {
		return nil, fmt.Errorf("the chart's %s pod on %s: %d pods, %v", app, node, len(pods.Items), err)
	}
	return &pods.Items[0], nil
}

// containerPid is the first process of pod's running container: the one of the container's
// processes whose parent (containerd's shim) is not one of them.
func containerPid(t *testing.T, pod *corev1.Pod, container string) int {
	t.Helper()
	pid, err := runningContainerPid(pod, container)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func runningContainerPid(pod *corev1.Pod, container string) (int, error) {
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container && s.State.Running != nil {
			id = containerID(s)
		}
	}
	if id == "" {
		return 0, fmt.Errorf("container %s of pod %s is not running", container, pod.Name)
	}
	// The container's first process is the one whose parent is outside it. A short-lived child
	// (kovn-daemon runs iptables) that exits between the listing and the read of its parent
	// reads parent 0 and looks like one too: only live candidates count, the oldest wins.
	pids := cgroupPids(id)
	root, oldest := 0, uint64(0)
	for pid := range pids {
		ppid := parentPid(pid)
		start, ok := startTime(pid)
		if ppid == 0 || pids[ppid] || !ok {
			continue
		}
		if root == 0 || start < oldest {
			root, oldest = pid, start
		}
	}
	if root == 0 {
		return 0, fmt.Errorf("no process of container %s (%s) of pod %s", container, id, pod.Name)
	}
	return root, nil
}

// startTime is a live process's start time (clock ticks since boot, /proc/PID/stat field 22).
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // field 3 onwards
	if len(f) < 20 || f[0] == "Z" {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// cgroupPids are the processes whose cgroup path names the container ID.
func cgroupPids(id string) map[int]bool {
	out := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup")); err == nil && strings.Contains(string(b), id) {
			out[pid] = true
		}
	}
	return out
}

func parentPid(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
			p, _ := strconv.Atoi(strings.TrimSpace(v))
			return p
		}
	}
	return 0
}

// signalComponent sends sig to component name on node; whoever runs it (the rig's supervisor,
// or kubelet) starts it again.
func signalComponent(t *testing.T, c *cluster, node, name string, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(componentPid(t, c, node, name), sig); err != nil {
		t.Fatalf("%s on %s: %v", name, node, err)
	}
}

// stopComponent holds component name on node down (killed with SIGKILL when crash, else
// SIGTERM) until startComponent. With the chart: ovn-controller by the hold file its
// container waits on (what helm uninstall's cleanup uses), kovn-daemon and kovn-speaker by
// stopping the node's kubelet first, so nothing starts their containers again; the node's
// other pods keep running.
func stopComponent(t *testing.T, c *cluster, node, name string, crash bool) {
	t.Helper()
	if err := stopComponentErr(t, c, node, name, crash); err != nil {
		t.Fatal(err)
	}
}

// stopComponentErr is stopComponent for a goroutine: it returns what went wrong.
func stopComponentErr(t *testing.T, c *cluster, node, name string, crash bool) error {
	st := c.st
	if !st.Config.Chart() {
		stop := st.StopDaemon
		if crash {
			stop = st.CrashDaemon
		}
		return stop(node, name)
	}
	where, ok := chartContainers[name]
	if !ok {
		return fmt.Errorf("the chart runs no %s on nodes", name)
	}
	pod, err := chartPod(c, where[0], node)
	if err != nil {
		return err
	}
	pid, err := runningContainerPid(pod, where[1])
	if err != nil {
		return err
	}
	switch name {
	case "ovn-controller":
		cl, n := nodeIndex(t, node)
		if err := os.WriteFile(ovnControllerHold(st.Config, cl, n), nil, 0o644); err != nil {
			return err
		}
	case "kovn-daemon", "kovn-speaker":
		if err := st.StopDaemon(node, "kubelet"); err != nil {
			return err
		}
	default:
		return fmt.Errorf("stopping %s of a chart install is not supported", name)
	}
	sig := syscall.SIGTERM
	if crash {
		sig = syscall.SIGKILL
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("%s on %s: %v", name, node, err)
	}
	return eventually(15*time.Second, func() error {
		if rig.Alive(pid) {
			return fmt.Errorf("%s (pid %d) on %s still runs", name, pid, node)
		}
		return nil
	})
}

// startComponent lets a component stopped by stopComponent run again and waits until it does.
func startComponent(t *testing.T, c *cluster, node, name string) {
	t.Helper()
	st := c.st
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !st.Config.Chart() {
		if _, err := st.StartDaemon(ctx, node, name); err != nil {
			t.Fatal(err)
		}
		return
	}
	switch name {
	case "ovn-controller":
		cl, n := nodeIndex(t, node)
		if err := os.Remove(ovnControllerHold(st.Config, cl, n)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	case "kovn-daemon", "kovn-speaker":
		if _, err := st.StartDaemon(ctx, node, "kubelet"); err != nil {
			t.Fatal(err)
		}
	}
	app := chartContainers[name][0]
	if err := eventually(time.Minute, func() error {
		pod, err := chartPod(c, app, node)
		if err != nil {
			return err
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == chartContainers[name][1] && s.State.Running != nil && s.Ready && len(cgroupPids(containerID(s))) > 0 {
				return nil
			}
		}
		return fmt.Errorf("%s on %s not running and ready yet", name, node)
	}); err != nil {
		t.Fatal(err)
	}
	if name == "ovn-controller" { // the container runs its script until the hold is gone
		waitProcess(t, c, node, name)
	}
}

func containerID(s corev1.ContainerStatus) string {
	_, id, _ := strings.Cut(s.ContainerID, "://")
	return id
}

// waitProcess waits until component name's pidfile on node names a live process.
func waitProcess(t *testing.T, c *cluster, node, name string) {
	t.Helper()
	cl, n := nodeIndex(t, node)
	file := filepath.Join(c.st.Config.NodeDir(cl, n), "host", "ovn-run", name+".pid")
	if err := eventually(30*time.Second, func() error {
		b, err := os.ReadFile(file)
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == 0 || !rig.Alive(pid) {
			return fmt.Errorf("%s on %s: no live process in %s", name, node, file)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// ovnControllerHold is the chart's hold file for node (cl, n)'s ovn-controller, as the host sees it.
func ovnControllerHold(cfg rig.Config, cl, n int) string {
	return filepath.Join(cfg.NodeDir(cl, n), "host", "ovn-run", "ovn-controller.hold")
}

// leaderPid is the pid of cluster c's leading kovn-controller.
func leaderPid(t *testing.T, c *cluster) int {
	t.Helper()
	if !c.st.Config.Chart() {
		return procPid(t, c.st, c.info.Name, "kovn-controller")
	}
	return containerPid(t, leadingControllerPod(t, c), "controller")
}

// leadingControllerPod is the chart's kovn-controller pod whose metrics say it leads (every
// replica has the host's hostname in the lease: the rig's nodes share its UTS namespace).
func leadingControllerPod(t *testing.T, c *cluster) *corev1.Pod {
	t.Helper()
	var leader *corev1.Pod
	if err := eventually(30*time.Second, func() error {
		pods, err := c.kc.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "app=kovn-controller"})
		if err != nil {
			return err
		}
		var seen []string
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
				continue
			}
			cl, n := nodeIndex(t, p.Spec.NodeName)
			out, err := c.componentMetrics(t, c.st.Config.NodeNS(cl, n), chartControllerMetricsPort)
			if value(out, `leader_election_master_status{name="kovn-controller"}`) == 1 {
				leader = p
				return nil
			}
			if err != nil {
				seen = append(seen, fmt.Sprintf("%s: %v %s", p.Name, err, firstLines(out, 1)))
			}
		}
		return fmt.Errorf("no kovn-controller replica of %d reports leading %v", len(pods.Items), seen)
	}); err != nil {
		t.Fatal(err)
	}
	return leader
}

// chartControllerMetricsPort is the chart's controller.metricsPort (deploy/values.yaml).
const chartControllerMetricsPort = 9470

// stopICSB stops the interconnect's SB database (the clusterset store beside it goes with it)
// and returns what starts it again: call it once the test has seen the outage, and defer it too,
// so that a failed step does not leave the clusterset without IC-SB (a second call does nothing).
func stopICSB(t *testing.T, st *rig.State) (start func() error) {
	t.Helper()
	if err := st.StopDaemon("ic", "ovsdb-server-icsb"); err != nil {
		t.Fatal(err)
	}
	started := false
	return func() error {
		if started {
			return nil
		}
		started = true
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := st.StartDaemon(ctx, "ic", "ovsdb-server-icsb"); err != nil {
			return fmt.Errorf("start IC-SB again: %w", err)
		}
		return nil
	}
}
