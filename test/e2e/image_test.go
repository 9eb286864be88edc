package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kovn/kovn/test/rig"
)

// TestKovnImage: the image `make images` builds (here from the binaries under test) is imported
// into a node's containerd and runs as a pod through kubelet: OVS, OVN, iptables and kovn's
// binaries all start from it, so no shared library or platform field is missing.
func TestKovnImage(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 1, 1)
	cfg.Kovn = true
	r := upRig(t, cfg)
	c := newCluster(t, r, "c1")
	out := t.TempDir()
	start := time.Now()
	build := exec.Command("go", "run", "./hack/images", "-bin-dir", cfg.KovnBinDir, "-out", out, "-ref", "kovn.io/kovn:e2e")
	build.Dir = repoRoot(t)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the image: %v\n%s", err, b)
	} else {
		t.Logf("image built in %.1fs:\n%s", time.Since(start).Seconds(), b)
	}
	sock := filepath.Join(cfg.NodeDir(1, 1), "run-containerd", "containerd.sock")
	if b, err := exec.Command("ctr", "--address", sock, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs",
		filepath.Join(out, "kovn.tar")).CombinedOutput(); err != nil {
		t.Fatalf("ctr import: %v\n%s", err, b)
	}
	pod := testboxPod("default", "kovn-image", onNode(rig.NodeName(1, 1)))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].Image = "kovn.io/kovn:e2e"
	pod.Spec.Containers[0].Command = []string{"/bin/sh", "-c"}
	pod.Spec.Containers[0].Args = []string{"ovs-vsctl --version && ovsdb-server --version && ovs-vswitchd --version && ovn-controller --version && " +
		"ovn-northd --version && ovn-ic --version && ls /usr/share/ovn/ovn-ic-nb.ovsschema && iptables --version && ip -V && /kovn-daemon --help 2>&1 | head -1 && /kovn-controller --help 2>&1 | head -1"}
	c.createPod(pod)
	var logs string
	if err := eventually(90*time.Second, func() error {
		p, err := c.kubectl("get", "pod", "kovn-image", "-o", "jsonpath={.status.phase}")
		if err != nil || p != "Succeeded" {
			return fmt.Errorf("pod phase %q (%v), want Succeeded", p, err)
		}
		logs, err = c.kubectl("logs", "kovn-image")
		return err
	}); err != nil {
		desc, _ := c.kubectl("describe", "pod", "kovn-image")
		l, _ := c.kubectl("logs", "kovn-image")
		t.Fatalf("pod of the kovn image: %v\n%s\n%s", err, l, desc)
	}
	for _, want := range []string{"ovs-vsctl (Open vSwitch)", "ovsdb-server (Open vSwitch)", "ovn-controller 23", "ovn-northd 23",
		"iptables v", "iproute2", "Usage of /kovn-daemon", "Usage of /kovn-controller"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the pod's output lacks %q:\n%s", want, logs)
		}
	}
	t.Logf("the kovn image ran as a pod:\n%s", logs)
}

// repoRoot is the module root (the e2e package runs in test/e2e).
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}
