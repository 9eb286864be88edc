//go:build bench

package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
	"github.com/kovn/kovn/test/rig"
)

// TestPolicyPeersBench: two one-node clusters joined; c1 has a NetworkPolicy whose peer is
// namespace x of cluster "sim", a cluster simulated by rows written straight into the
// clusterset store (its Cluster row in az2, namespace x and KOVN_BENCH_REMOTE_PODS (1000) pods
// at addresses of c2's pod CIDR nothing uses, as a cluster's publisher writes them). Printed: time until c1's
// peer address set holds all of them; then KOVN_BENCH_REMOTE_CHANGES (100) changes one at a
// time, each deleting one remote pod (store commit -> its address gone from c1's NB set, a
// libovsdb monitor) and adding one (-> its address in the set).
func TestPolicyPeersBench(t *testing.T) {
	n, changes := envInt("KOVN_BENCH_REMOTE_PODS", 1000), envInt("KOVN_BENCH_REMOTE_CHANGES", 100)
	r := upRig(t, rig.Config{Clusters: 2, Nodes: 1})
	cs := make([]*benchCluster, 2)
	for i := range cs {
		cs[i] = &benchCluster{t: t, cfg: r.State.Config, kubeconfig: r.State.Clusters[i].Kubeconfig, name: rig.ClusterName(i + 1)}
		cs[i].interconnect(fmt.Sprintf("az%d", i+1), "ActiveStandby", rig.NodeName(i+1, 1))
	}
	for _, c := range cs {
		c.waitReady()
	}
	ctx := context.Background()
	store := connectStore(t, r.State.Config.ICSBLocal())
	// "sim" stands in c2's AZ: its pods' addresses are in the upper half of c2's pod CIDR,
	// which az2 advertises (no real pod of c2 has them), so c1 admits them.
	transact(t, store, mustOps(store.Create(&clusterset.Cluster{UUID: ovn.NewNamedUUID(), Name: "sim", AvailabilityZone: "az2"})))
	transact(t, store, mustOps(store.Create(&clusterset.PolicyNamespace{UUID: ovn.NewNamedUUID(), Cluster: "sim", Name: "x",
		Labels: map[string]string{"kubernetes.io/metadata.name": "x", "ns": "x"}})))
	w := watchPeerSets(t, r.State.Clusters[0].NBAddr)
	cs[0].kubectl("", "create", "namespace", "y")
	cs[0].kubectl(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-sim, namespace: "y"}
spec:
  podSelector: {}
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {ns: x, cluster.clusterset.k8s.io: sim}}
`, "apply", "-f", "-")

	addrs := newEndpointAddrs(t, r.State.Config.PodCIDRs(2)[0], n+changes+10)
	pod := func(i int) *clusterset.PolicyPod {
		return &clusterset.PolicyPod{UUID: ovn.NewNamedUUID(), Cluster: "sim", Namespace: "x", Name: fmt.Sprintf("p%05d", i),
			Labels: map[string]string{"app": "bench"}, Addresses: []string{addrs.at(i).String()}}
	}
	start := time.Now()
	for lo := 0; lo < n; lo += 100 {
		var ops []ovsdb.Operation
		for i := lo; i < min(lo+100, n); i++ {
			ops = append(ops, mustOps(store.Create(pod(i)))...)
		}
		transact(t, store, ops)
	}
	written := time.Since(start)
	all := make([]string, n)
	for i := range n {
		all[i] = addrs.at(i).String()
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	at, err := w.waitFor(wctx, func(have map[string]bool) bool { return hasAll(have, all, true) })
	cancel()
	if err != nil {
		t.Fatalf("%d remote pods not all in c1's peer address set: %v", n, err)
	}
	lines := []string{fmt.Sprintf("Clusterset policy peers, 2 clusters x 1 node; c1's NetworkPolicy selects namespace x of simulated cluster \"sim\" (rows written to the store directly)"),
		fmt.Sprintf("%d remote pods written in %d transactions of 100 in %s; all in c1's peer address set %s after the first write",
			n, (n+99)/100, written.Round(time.Millisecond), at.Sub(start).Round(time.Millisecond))}

	var gone, came []time.Duration
	for i := range changes {
		var rows []*clusterset.PolicyPod
		name := fmt.Sprintf("p%05d", i)
		if err := store.WhereCache(func(p *clusterset.PolicyPod) bool { return p.Name == name }).List(ctx, &rows); err != nil || len(rows) != 1 {
			t.Fatalf("row %s: %d, %v", name, len(rows), err)
		}
		old := rows[0]
		start := time.Now()
		transact(t, store, mustOps(store.Where(old).Delete()))
		gone = append(gone, w.waitDuration(t, start, []string{old.Addresses[0]}, false))
		fresh := pod(n + i)
		start = time.Now()
		transact(t, store, mustOps(store.Create(fresh)))
		came = append(came, w.waitDuration(t, start, fresh.Addresses, true))
	}
	lines = append(lines,
		fmt.Sprintf("with %d in place, a remote pod deleted -> its address gone from c1's set: %s", n, stats(gone)),
		fmt.Sprintf("a remote pod added -> its address in c1's set: %s", stats(came)))
	out := strings.Join(lines, "\n") + "\n"
	fmt.Print("\n== " + out)
	if err := os.WriteFile(filepath.Join(outDir(t), "policypeers.txt"), []byte(out), 0o644); err != nil {
		t.Error(err)
	}
}

func connectStore(t *testing.T, endpoints string) libovsdb.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := ovn.ConnectClusterSet(ctx, ovn.Config{Endpoints: ovn.SplitEndpoints(endpoints), LeaderOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mustOps(ops []ovsdb.Operation, err error) []ovsdb.Operation {
	if err != nil {
		panic(err)
	}
	return ops
}

func transact(t *testing.T, c libovsdb.Client, ops []ovsdb.Operation) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ovn.Transact(ctx, c, ops); err != nil {
		t.Fatal(err)
	}
}

// peerSetWatch is the union of the addresses of a cluster's NetworkPolicy peer address sets,
// kept by a libovsdb monitor of its NB.
type peerSetWatch struct {
	mu   sync.Mutex
	sets map[string][]string // address set name -> addresses
	wake chan struct{}
}

func watchPeerSets(t *testing.T, addr string) *peerSetWatch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbModel, err := nb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	w := &peerSetWatch{sets: map[string][]string{}, wake: make(chan struct{})}
	c, err := ovn.Connect(ctx, dbModel, ovn.Config{Endpoints: []string{addr}}, &nb.AddressSet{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { w.update(m, false) },
		UpdateFunc: func(_ string, _, m model.Model) { w.update(m, false) },
		DeleteFunc: func(_ string, m model.Model) { w.update(m, true) },
	})
	var rows []nb.AddressSet
	if err := c.List(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		w.update(&rows[i], false)
	}
	return w
}

func (w *peerSetWatch) update(m model.Model, deleted bool) {
	as, ok := m.(*nb.AddressSet)
	if !ok || as.ExternalIDs["kovn.io/owner-type"] != topology.OwnerPolicyPeer {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.sets, as.Name)
	} else {
		w.sets[as.Name] = as.Addresses
	}
	close(w.wake)
	w.wake = make(chan struct{})
}

// waitFor returns when cond first held over the union of the sets.
func (w *peerSetWatch) waitFor(ctx context.Context, cond func(have map[string]bool) bool) (time.Time, error) {
	for {
		w.mu.Lock()
		have := map[string]bool{}
		for _, addrs := range w.sets {
			for _, a := range addrs {
				have[a] = true
			}
		}
		ok, wake := cond(have), w.wake
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

func (w *peerSetWatch) waitDuration(t *testing.T, start time.Time, addrs []string, in bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at, err := w.waitFor(ctx, func(have map[string]bool) bool { return hasAll(have, addrs, in) })
	if err != nil {
		t.Fatalf("%v in c1's peer sets: want %t: %v", addrs, in, err)
	}
	return at.Sub(start)
}

// hasAll: every address is in have (in) or none is (!in).
func hasAll(have map[string]bool, addrs []string, in bool) bool {
	for _, a := range addrs {
		if have[a] != in {
			return false
		}
	}
	return true
}
