// Package e2e runs kovn end to end on a real rig: real etcd, kube-apiserver, kubelets,
// containerd, OVN and OVS processes in network namespaces. Needs root; never skips: a missing
// dependency fails the test and names the install step.
package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kovn/kovn/test/rig"
)

// rigConfig returns a config for a throwaway rig in its own state dir.
func rigConfig(t *testing.T, clusters, nodes int) rig.Config {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("e2e tests need root (network namespaces, mounts, cgroups)")
	}
	bin := os.Getenv("KOVN_BIN_DIR")
	if bin == "" {
		t.Fatal("KOVN_BIN_DIR is not set: run the e2e tests with `make e2e` (it builds kovn-rig and the pod images)")
	}
	dir, err := os.MkdirTemp("", "kovn-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	// KOVN_E2E_INSTALL=chart runs a suite on kovn installed from the chart (kovn-rig up
	// --install chart) instead of the rig's supervised processes.
	cfg, err := rig.Config{Dir: dir, Clusters: clusters, Nodes: nodes, KovnBinDir: bin, Install: os.Getenv("KOVN_E2E_INSTALL")}.Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if err := rig.CheckDeps(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// concurrent marks a test that may run beside other labs (make e2e runs go test with
// -parallel 4, and go test starts parallel tests only once every serial one has ended; labGate
// decides how many labs run at once): it waits on conditions with generous timeouts, counts no
// lost packets, times no failover, measures no bandwidth or latency and has no HA gateway, so
// sharing the two cores only makes it slower. Tests that do any of those stay serial and so
// always run alone.
func concurrent(t *testing.T) { t.Parallel() }

// labCapacity is how much lab the host runs at once (labWeight units): three single-cluster
// 2-node labs, or one multi-cluster lab beside one single-cluster lab. Two multi-cluster labs
// together saturated CI's 2 cores (a 2x2 chart lab took 442 s to come up beside a 3-cluster
// one, pods missed their readiness, kubectl exec timed out), and three labs of 32 inotify
// instances each (a 2x2 chart lab: 5 per kubelet, 3 per apiserver, 1 per containerd) would
// come near the host's 128.
const labCapacity = 9

// labWeight is a lab's share of labCapacity: a control plane and each node count one.
func labWeight(cfg rig.Config) int { return cfg.Clusters * (cfg.Nodes + 1) }

// labGate admits labs while they fit in labCapacity (a lab larger than it runs alone), the
// heaviest waiting lab first: the multi-cluster labs are the longest, and starting them early
// keeps the small ones for the end, beside them.
type labGate struct {
	mu      sync.Mutex
	cond    *sync.Cond
	used    int
	waiting map[int]int // weight -> labs waiting
}

var gate = newLabGate()

func newLabGate() *labGate {
	g := &labGate{waiting: map[int]int{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// acquire waits until a lab of weight w may run.
func (g *labGate) acquire(w int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[w]++
	for !g.admits(w) {
		g.cond.Wait()
	}
	g.waiting[w]--
	g.used += w
}

func (g *labGate) fits(w int) bool { return g.used == 0 || g.used+w <= labCapacity }

// admits says whether w fits and no heavier waiting lab fits (that one goes first).
func (g *labGate) admits(w int) bool {
	if !g.fits(w) {
		return false
	}
	for v, n := range g.waiting {
		if n > 0 && v > w && g.fits(v) {
			return false
		}
	}
	return true
}

func (g *labGate) release(w int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.used -= w
	g.cond.Broadcast()
}

// preferInstall sets how kovn runs in cfg's rig unless KOVN_E2E_INSTALL says.
func preferInstall(cfg *rig.Config, install string) {
	if os.Getenv("KOVN_E2E_INSTALL") == "" {
		cfg.Install = install
	}
}

// bringUpMu lets one rig come up at a time. Bring-up is the heaviest part of a test (images
// unpacked on every node, databases created, every pod of a chart started at once): two
// multi-cluster chart labs coming up together on CI's 2 cores took 6 min, and one of them
// outlasted helm's 5 min --wait, while either alone comes up in under 2.5 min. Tests that run
// concurrently still overlap: one's bring-up runs beside the other's body.
var bringUpMu sync.Mutex

// bringUp is rig.Up within timeout once the lab fits (labGate, held until t's cleanups that
// bringUp's caller registers after it, which take the lab down, have run), one rig at a time
// (bringUpMu); the time it took does not count the wait for the gate or another rig's bring-up.
func bringUp(t *testing.T, cfg rig.Config, timeout time.Duration) (*rig.Rig, time.Duration, error) {
	w := labWeight(cfg)
	gate.acquire(w)
	t.Cleanup(func() { gate.release(w) })
	bringUpMu.Lock()
	defer bringUpMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	r, err := rig.Up(ctx, cfg)
	return r, time.Since(start), err
}

// upRig starts a rig and registers its teardown; on failure the logs are copied next to the
// test output (KOVN_E2E_LOGS, default _output/e2e-logs) before Down removes them.
func upRig(t *testing.T, cfg rig.Config) *rig.Rig {
	t.Helper()
	// Past the rig's own bound (rig.DefaultReadyTimeout), so the rig names the step that hung.
	r, took, err := bringUp(t, cfg, 10*time.Minute)
	t.Cleanup(func() {
		assertNoForbidden(t, cfg.Dir)
		crashed := reportVswitchdCrashes(t, cfg)
		if t.Failed() || crashed {
			saveLogs(t, cfg.Dir)
			for cl := 1; cl <= cfg.Clusters; cl++ {
				for n := 1; n <= cfg.Nodes; n++ {
					t.Logf("diagnostics of %s:\n%s", rig.NodeName(cl, n), cfg.NodeDiagnostics(cl, n))
				}
			}
		}
		var procs []rig.Proc
		if r != nil {
			procs = r.State.AllProcs() // read before Down removes the pid files
		}
		if err := rig.Down(cfg.Dir, false); err != nil {
			t.Errorf("rig down: %v", err)
		}
		assertNothingLeft(t, cfg, procs)
	})
	if err != nil {
		t.Fatalf("rig up: %v", err)
	}
	t.Logf("rig up: %d cluster(s) x %d node(s) in %.1fs (%s)", cfg.Clusters, cfg.Nodes, took.Seconds(), r.State.UpPhases)
	return r
}

func saveLogs(t *testing.T, dir string) {
	dst := os.Getenv("KOVN_E2E_LOGS")
	if dst == "" {
		dst = filepath.Join("..", "..", "_output", "e2e-logs")
	}
	dst = filepath.Join(dst, t.Name())
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(p) != ".log" && d.Name() != "error") {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		if err == nil && os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755) == nil {
			_ = os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		}
		return nil
	})
	t.Logf("rig logs saved in %s", dst)
}

// reportVswitchdCrashes names every ovs-vswitchd abort in the rig's node logs, and fails the
// test on an assertion: OVS's own consistency checks must never fire (Debian's OVS 3.1 userspace
// conntrack did on zero-SNAT connections until kovn-daemon turned zero SNAT off, see
// guard.ZeroSNATGuard). An abort without one (the SIGABRT a test sends) is only named.
func reportVswitchdCrashes(t *testing.T, cfg rig.Config) bool {
	lines := vswitchdCrashLines(cfg)
	for _, l := range lines {
		if strings.Contains(l, "assertion") {
			t.Errorf("ovs-vswitchd failed an assertion (the rig restarted it): %s", l)
		} else {
			t.Logf("ovs-vswitchd aborted (restarted by the rig): %s", l)
		}
	}
	return len(lines) > 0
}

// vswitchdCrashLines are the abort lines of every node's ovs-vswitchd log, each prefixed with
// its node's name.
func vswitchdCrashLines(cfg rig.Config) []string {
	var out []string
	for cl := 1; cl <= cfg.Clusters; cl++ {
		for n := 1; n <= cfg.Nodes; n++ {
			b, _ := os.ReadFile(filepath.Join(cfg.NodeDir(cl, n), "logs", "ovs-vswitchd.log"))
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, "assertion") || strings.Contains(l, "Aborted") {
					out = append(out, rig.NodeName(cl, n)+": "+l)
				}
			}
		}
	}
	return out
}
