//go:build bench

package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/test/rig"
)

// envInt reads a benchmark knob (e.g. KOVN_BENCH_PODS) with a default.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// outDir is where figures and plots go (KOVN_BENCH_OUT, default <repo>/_output/bench).
func outDir(t *testing.T) string {
	d := os.Getenv("KOVN_BENCH_OUT")
	if d == "" {
		d = filepath.Join("..", "..", "_output", "bench")
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		t.Fatal(err)
	}
	return abs
}

// upRig brings up a throwaway rig for one scenario and tears it down when the test ends. State
// dirs live under _output (not /tmp) next to the figures, so a failed run's logs can be read.
func upRig(t *testing.T, cfg rig.Config) *rig.Rig {
	t.Helper()
	base := filepath.Join(outDir(t), "rigs")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(base, "rig-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dir, cfg.Kovn, cfg.KovnBinDir = dir, true, os.Getenv("KOVN_BIN_DIR")
	cfg.Clusters = max(cfg.Clusters, 1)
	cfg.ReadyTimeout = 5 * time.Minute
	// IPv4 unless KOVN_BENCH_IP_FAMILY says otherwise: the bridge CNI it is compared with is
	// IPv4 only, and the recorded figures in README.md are IPv4.
	cfg.IPFamily = os.Getenv("KOVN_BENCH_IP_FAMILY")
	if cfg.IPFamily == "" {
		cfg.IPFamily = rig.IPv4
	}
	start := time.Now()
	r, err := rig.Up(context.Background(), cfg)
	t.Cleanup(func() {
		if err := rig.Down(dir, t.Failed()); err != nil {
			t.Errorf("rig down: %v", err)
		}
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	if err != nil {
		t.Fatalf("rig up: %v", err)
	}
	t.Logf("rig up in %.1fs: %d node(s) (%d bridge), %d fake node(s)", time.Since(start).Seconds(), cfg.Nodes, cfg.BridgeNodes, cfg.FakeNodes)
	return r
}

// restConfig is cluster c1's client config with client-side rate limiting set like
// kovn-controller's: controller-runtime's GetConfig sets QPS -1 (no client-side limit,
// the apiserver's priority and fairness decides) when the kubeconfig sets none.
func restConfig(t *testing.T, r *rig.Rig) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", r.State.Clusters[0].Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = -1, -1
	rc.Timeout = 30 * time.Second
	return rc
}

// lspWatch records when each Logical_Switch_Port first appears in a monitor of NB.
type lspWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// watchLSPs connects to c1's NB (through the rig's host forwarder) with a libovsdb monitor on
// Logical_Switch_Port only; the timestamp is taken when the update reaches the client cache.
func watchLSPs(t *testing.T, r *rig.Rig) *lspWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbModel, err := nb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	w := &lspWatch{seen: map[string]time.Time{}}
	c, err := ovn.Connect(ctx, dbModel, ovn.Config{Endpoints: []string{r.State.Clusters[0].NBAddr}}, &nb.LogicalSwitchPort{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{AddFunc: func(table string, m model.Model) {
		if p, ok := m.(*nb.LogicalSwitchPort); ok {
			w.add(p.Name, time.Now())
		}
	}})
	var ports []nb.LogicalSwitchPort
	if err := c.List(ctx, &ports); err != nil {
		t.Fatal(err)
	}
	for _, p := range ports { // rows from before the handler was added
		w.add(p.Name, time.Time{})
	}
	return w
}

func (w *lspWatch) add(name string, at time.Time) {
	w.mu.Lock()
	if _, ok := w.seen[name]; !ok {
		w.seen[name] = at
	}
	w.mu.Unlock()
}

// at returns when name appeared (ok false if not yet).
func (w *lspWatch) at(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.seen[name]
	return t, ok
}

// waitAll waits until every name has appeared or ctx ends; it returns how many are missing.
// It polls a shrinking list every 100 ms: cheap next to the 10,000 adds it waits for.
func (w *lspWatch) waitAll(ctx context.Context, names []string) int {
	rest := append([]string(nil), names...)
	for {
		w.mu.Lock()
		left := rest[:0]
		for _, n := range rest {
			if _, ok := w.seen[n]; !ok {
				left = append(left, n)
			}
		}
		w.mu.Unlock()
		rest = left
		if len(rest) == 0 {
			return 0
		}
		select {
		case <-ctx.Done():
			return len(rest)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
