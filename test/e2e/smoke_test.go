package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kovn/kovn/test/rig"
)

// hostNetSnapshot is what the rig must never change on the host: its links and routes.
func hostNetSnapshot(t *testing.T) string {
	t.Helper()
	var parts []string
	for _, args := range [][]string{{"-o", "link", "show"}, {"route", "show", "table", "all"}, {"-6", "route", "show", "table", "all"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
		lines := strings.Split(string(out), "\n")
		for i, l := range lines { // counters and link state flags change on their own; names and routes must not
			if f := strings.Fields(l); len(f) > 1 && args[1] == "link" {
				lines[i] = f[1]
			}
		}
		sort.Strings(lines)
		parts = append(parts, strings.Join(lines, "\n"))
	}
	return strings.Join(parts, "\n--\n")
}

// TestRigSmoke: 1 cluster x 2 nodes comes up, both kubelets register, both chassis appear in the
// SB database, a second `up` on the same dir is refused without harming the running rig, and
// teardown leaves no process, namespace, cgroup or file behind and the host network unchanged.
func TestRigSmoke(t *testing.T) {
	concurrent(t)
	cfg := rigConfig(t, 1, 2)
	before := hostNetSnapshot(t)
	r, took, err := bringUp(t, cfg, 5*time.Minute)
	if err != nil {
		saveLogs(t, cfg.Dir)
		_ = rig.Down(cfg.Dir, false)
		t.Fatalf("rig up: %v", err)
	}
	t.Logf("rig up in %.1fs", took.Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	downed := false
	defer func() {
		if !downed {
			saveLogs(t, cfg.Dir)
			_ = rig.Down(cfg.Dir, false)
		}
	}()
	st := r.State

	kc, err := st.Kube("c1")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "c1-n1,c1-n2" {
		t.Fatalf("registered nodes = %v, want c1-n1,c1-n2", names)
	}

	var chassis []string
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if chassis, err = rig.Chassis(st.Clusters[0]); err == nil && len(chassis) == 2 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if strings.Join(chassis, ",") != "c1-n1,c1-n2" {
		t.Fatalf("SB chassis = %v (err %v), want c1-n1,c1-n2", chassis, err)
	}

	for _, h := range st.Status(ctx) {
		if !h.OK {
			t.Errorf("status: %s unhealthy: %s", h.What, h.Detail)
		}
	}

	// A second rig on the same state dir must be refused and must not disturb the first.
	if _, err := rig.Up(ctx, cfg); !errors.Is(err, rig.ErrAlreadyUp) {
		t.Fatalf("second up on %s: err = %v, want ErrAlreadyUp", cfg.Dir, err)
	} else {
		t.Logf("second up refused: %v", err)
	}
	if _, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("apiserver unreachable after refused second up: %v", err)
	}

	all := st.AllProcs()
	if len(all) < 2+2*8 {
		t.Fatalf("only %d processes recorded: %v", len(all), all)
	}
	downStart := time.Now()
	downed = true
	if err := rig.Down(cfg.Dir, false); err != nil {
		t.Fatalf("rig down: %v", err)
	}
	t.Logf("rig down in %.1fs", time.Since(downStart).Seconds())
	assertNothingLeft(t, cfg, all)
	if after := hostNetSnapshot(t); after != before {
		t.Errorf("host links/routes changed by the rig:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func assertNothingLeft(t *testing.T, cfg rig.Config, procs []rig.Proc) {
	t.Helper()
	for _, p := range procs {
		if rig.Alive(p.Pid) {
			t.Errorf("process %s (pid %d) still running after down", p.Name, p.Pid)
		}
	}
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), cfg.Prefix+"-") {
			t.Errorf("netns %s left behind", e.Name())
		}
	}
	cgs, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range cgs {
		sub, _ := os.ReadDir("/sys/fs/cgroup/" + h.Name())
		for _, s := range sub {
			if strings.Contains(s.Name(), cfg.Prefix) {
				t.Errorf("cgroup /sys/fs/cgroup/%s/%s left behind", h.Name(), s.Name())
			}
		}
	}
	if _, err := os.Stat(cfg.Dir); err == nil {
		t.Errorf("state dir %s left behind", cfg.Dir)
	}
	if _, err := os.Stat("/run/kovn-rig-" + cfg.Prefix); err == nil {
		t.Errorf("run dir /run/kovn-rig-%s left behind", cfg.Prefix)
	}
}
