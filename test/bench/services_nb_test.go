//go:build bench

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/test/rig"
)

// nbWatch mirrors c1's Load_Balancer backends and NB_Global's hv_cfg from a libovsdb monitor.
// The cache event handlers keep a small copy of their own, so a waiter re-checks its condition
// on every update without listing (and cloning) a thousand cached rows each time.
type nbWatch struct {
	c        client.Client
	mu       sync.Mutex
	backends map[string]map[string]bool // load balancer name -> "ip:port" of every VIP
	hvCfg    int
	wake     chan struct{} // closed and replaced on every update
}

func watchNB(t *testing.T, r *rig.Rig) *nbWatch { return watchNBOf(t, r.State.Clusters[0].NBAddr) }

// watchNBOf is watchNB for the NB database at addr.
func watchNBOf(t *testing.T, addr string) *nbWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbModel, err := nb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	w := &nbWatch{backends: map[string]map[string]bool{}, wake: make(chan struct{})}
	w.c, err = ovn.Connect(ctx, dbModel, ovn.Config{Endpoints: []string{addr}}, &nb.LoadBalancer{}, &nb.NBGlobal{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.c.Close)
	w.c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { w.update(m, false) },
		UpdateFunc: func(_ string, _, m model.Model) { w.update(m, false) },
		DeleteFunc: func(_ string, m model.Model) { w.update(m, true) },
	})
	var g []nb.NBGlobal // rows from before the handler was added
	var lbs []nb.LoadBalancer
	if err := w.c.List(ctx, &g); err != nil || len(g) != 1 {
		t.Fatalf("NB_Global: %d rows, %v", len(g), err)
	}
	if err := w.c.List(ctx, &lbs); err != nil {
		t.Fatal(err)
	}
	w.update(&g[0], false)
	for i := range lbs {
		w.update(&lbs[i], false)
	}
	return w
}

func (w *nbWatch) update(m model.Model, deleted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch row := m.(type) {
	case *nb.LoadBalancer:
		if deleted {
			delete(w.backends, row.Name)
			break
		}
		set := map[string]bool{}
		for _, list := range row.Vips {
			for _, b := range strings.Split(list, ",") {
				if b != "" {
					set[b] = true
				}
			}
		}
		w.backends[row.Name] = set
	case *nb.NBGlobal:
		w.hvCfg = max(w.hvCfg, row.HvCfg)
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// waitFor returns the time cond first held, checked under the lock after every update (and
// every 100 ms, in case an update raced the check).
func (w *nbWatch) waitFor(ctx context.Context, cond func(w *nbWatch) bool) (time.Time, error) {
	for {
		w.mu.Lock()
		ok, wake := cond(w), w.wake
		w.mu.Unlock()
		if ok {
			return time.Now(), nil
		}
		select {
		case <-wake:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// programmed counts the load balancers named with prefix that have exactly eps backends.
func (w *nbWatch) programmed(prefix string, eps int) int {
	n := 0
	for name, set := range w.backends {
		if strings.HasPrefix(name, prefix) && len(set) == eps {
			n++
		}
	}
	return n
}

// syncChassis bumps NB_Global nb_cfg (as `ovn-nbctl --wait=hv sync` does) and waits until
// ovn-northd reports it back as hv_cfg: every chassis (SB Chassis_Private nb_cfg) has
// installed the flows of everything in NB up to the bump.
func (w *nbWatch) syncChassis(ctx context.Context) (time.Time, error) {
	var g []nb.NBGlobal
	if err := w.c.List(ctx, &g); err != nil || len(g) != 1 {
		return time.Time{}, fmt.Errorf("NB_Global: %d rows, %v", len(g), err)
	}
	target := g[0].NbCfg + 1
	ops, err := w.c.Where(&g[0]).Mutate(&g[0], model.Mutation{Field: &g[0].NbCfg, Mutator: ovsdb.MutateOperationAdd, Value: 1})
	if err == nil {
		_, err = ovn.Transact(ctx, w.c, ops)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("bump nb_cfg: %w", err)
	}
	return w.waitFor(ctx, func(w *nbWatch) bool { return w.hvCfg >= target })
}

// endpointAddrs hands out fake endpoint addresses from the upper half of the pod CIDR: inside
// it, as real endpoints would be, but clear of the low addresses kovn's IPAM gives the rig's
// real pods (CoreDNS). Nothing answers on them; only the load balancers are measured.
type endpointAddrs struct {
	base  netip.Addr
	limit uint64 // addresses available above base
}

func newEndpointAddrs(t *testing.T, pod netip.Prefix, need int) endpointAddrs {
	t.Helper()
	hostBits := pod.Addr().BitLen() - pod.Bits()
	if hostBits < 2 {
		t.Fatalf("pod CIDR %s too small", pod)
	}
	half := uint64(1) << min(hostBits-1, 62)
	a := endpointAddrs{base: addOffset(pod.Masked().Addr(), half), limit: half - 1}
	if uint64(need) >= a.limit {
		t.Fatalf("%d endpoint addresses do not fit in the upper half of %s", need, pod)
	}
	return a
}

// at is the address off places above the base (off >= 1).
func (a endpointAddrs) at(off int) netip.Addr { return addOffset(a.base, uint64(off)) }

// addOffset adds off to an address, big-endian, in either family.
func addOffset(a netip.Addr, off uint64) netip.Addr {
	b := a.As16()
	for i := 15; i >= 0 && off > 0; i-- {
		s := uint64(b[i]) + off&0xff
		b[i], off = byte(s), off>>8+s>>8
	}
	r := netip.AddrFrom16(b)
	if a.Is4() {
		return r.Unmap()
	}
	return r
}

// controllerMetric reads one sample of kovn-controller's metrics endpoint, served on the
// control plane namespace's loopback (rig.PortControllerMetrics), through kovn-testbox.
func controllerMetric(t *testing.T, r *rig.Rig, sample string) float64 {
	t.Helper()
	cfg := r.State.Config
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", rig.PortControllerMetrics)
	out, err := exec.Command("ip", "netns", "exec", cfg.ControlPlaneNS(1), filepath.Join(cfg.KovnBinDir, "kovn-testbox"), "get", url).CombinedOutput()
	if err != nil {
		t.Fatalf("controller metrics: %v %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == sample {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("metric %s: %v", l, err)
			}
			return v
		}
	}
	return 0 // a counter not yet incremented is not exported
}
