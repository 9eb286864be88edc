package mcs

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/kovn/kovn/pkg/cluster"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
)

// PeerView is cluster.ClustersetPeers over the clusterset store: the pods and namespaces the
// other clusters publish, read from the store's cache. It keeps the last complete view it
// read: while the store is unreachable (or its cache refills after a reconnection) policies
// keep the remote pods they had, and Current says since when the view is old.
type PeerView struct {
	set *Clusterset

	mu    sync.Mutex
	subs  []func(namespace string)
	wakes []func()
	last  peerSnapshot
	// gen counts changes; readGen is the change last reads from (gen > readGen: read again).
	gen, readGen uint64
	// retryAt is when to read again after a failed read.
	retryAt time.Time
	// ready: the view was read from the store once, or the cluster is in no clusterset.
	ready bool
	// staleSince is when the view stopped following the store (zero: it follows it).
	staleSince time.Time
}

type peerSnapshot struct {
	local      string
	clusters   []string
	namespaces []cluster.RemoteNamespace
	pods       map[string][]cluster.RemotePod // cluster/namespace -> pods
}

var _ cluster.ClustersetPeers = (*PeerView)(nil)

// Peers returns the clusterset's view of published peers, one per Clusterset.
func (c *Clusterset) Peers() *PeerView {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peers == nil {
		c.peers = &PeerView{set: c, gen: 1}
	}
	return c.peers
}

// Ready implements cluster.ClustersetPeers.
func (v *PeerView) Ready() bool {
	v.view()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.ready
}

// Local implements cluster.ClustersetPeers.
func (v *PeerView) Local() string { return v.view().local }

// Clusters implements cluster.ClustersetPeers.
func (v *PeerView) Clusters() []string { return slices.Clone(v.view().clusters) }

// Namespaces implements cluster.ClustersetPeers.
func (v *PeerView) Namespaces() []cluster.RemoteNamespace { return slices.Clone(v.view().namespaces) }

// Pods implements cluster.ClustersetPeers.
func (v *PeerView) Pods(clusterID, namespace string) []cluster.RemotePod {
	return slices.Clone(v.view().pods[clusterID+"/"+namespace])
}

// Subscribe implements cluster.ClustersetPeers.
func (v *PeerView) Subscribe(f func(namespace string)) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.subs = append(v.subs, f)
}

// Current says whether the view follows the store; if not, since when it holds the last rows
// it read.
func (v *PeerView) Current() (current bool, since time.Time) {
	v.view()
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.staleSince.IsZero(), v.staleSince
}

// OnCurrentChange has f called whenever Current may have changed (the store stopped or
// started answering).
func (v *PeerView) OnCurrentChange(f func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.wakes = append(v.wakes, f)
}

// changed marks the view to be read again and tells the subscribers which namespace's rows
// changed ("" for all of them: a new connection, the store answering again or not).
func (v *PeerView) changed(namespace string) {
	v.mu.Lock()
	v.gen++
	v.retryAt = time.Time{} // news from the store: worth reading at once
	subs := slices.Clone(v.subs)
	wakes := slices.Clone(v.wakes)
	v.mu.Unlock()
	for _, f := range subs {
		f(namespace)
	}
	if namespace == "" {
		for _, f := range wakes {
			f()
		}
	}
}

// view is the current view: read again from the store's cache when something changed and the
// cache is a whole view of the store (the store answers and this cluster's own row is in the
// cache), else the last one. The read happens outside the lock and is bounded: libovsdb's
// cache reads wait while the client reconnects.
func (v *PeerView) view() peerSnapshot {
	store, member := v.set.Store()
	v.mu.Lock()
	if !member {
		// No clusterset (decided: Store says member until the membership reconciler ran).
		v.last, v.staleSince, v.ready = peerSnapshot{}, time.Time{}, true
		v.mu.Unlock()
		return v.last
	}
	gen, fresh := v.gen, store != nil && v.readGen == v.gen && v.last.local == store.Cluster
	// After a read that timed out, the next one waits a moment: every policy reconcile asks
	// several times, and each would wait out the timeout.
	retry := time.Now().After(v.retryAt)
	v.mu.Unlock()
	ok := store != nil && retry && v.set.answers()
	var snap peerSnapshot
	if ok {
		ctx, cancel := context.WithTimeout(context.Background(), peerReadTimeout)
		ok = store.Registered(ctx)
		if ok && !fresh {
			var err error
			snap, err = readPeers(ctx, store)
			ok = err == nil
		}
		// libovsdb reads an inconsistent cache anyway once its wait times out: no view then.
		ok = ok && ctx.Err() == nil
		cancel()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !ok {
		if v.staleSince.IsZero() {
			v.staleSince = time.Now()
		}
		if retry {
			v.retryAt = time.Now().Add(peerReadTimeout)
		}
		return v.last
	}
	v.staleSince = time.Time{}
	if !fresh && gen >= v.readGen {
		v.last, v.readGen, v.ready = snap, gen, true
	}
	return v.last
}

// peerReadTimeout bounds one read of the store's cache.
const peerReadTimeout = time.Second

// readPeers reads every other cluster's published rows from the store's cache.
func readPeers(ctx context.Context, s *Store) (peerSnapshot, error) {
	snap := peerSnapshot{local: s.Cluster, pods: map[string][]cluster.RemotePod{}}
	clusters, err := s.Clusters(ctx)
	if err != nil {
		return snap, err
	}
	snap.clusters = slices.Sorted(maps.Keys(clusters))
	var nss []*clusterset.PolicyNamespace
	if err := s.DB.WhereCache(func(r *clusterset.PolicyNamespace) bool { return r.Cluster != s.Cluster }).List(ctx, &nss); err != nil {
		return snap, err
	}
	for _, r := range nss {
		if az, ok := clusters[r.Cluster]; ok { // a cluster that left keeps no peers
			snap.namespaces = append(snap.namespaces, cluster.RemoteNamespace{Cluster: r.Cluster, AZ: az, Name: r.Name, Labels: maps.Clone(r.Labels)})
		}
	}
	sort.Slice(snap.namespaces, func(i, j int) bool {
		a, b := snap.namespaces[i], snap.namespaces[j]
		return a.Cluster < b.Cluster || a.Cluster == b.Cluster && a.Name < b.Name
	})
	var pods []*clusterset.PolicyPod
	if err := s.DB.WhereCache(func(r *clusterset.PolicyPod) bool { return r.Cluster != s.Cluster }).List(ctx, &pods); err != nil {
		return snap, err
	}
	for _, r := range pods {
		p := cluster.RemotePod{Name: r.Name, Labels: maps.Clone(r.Labels)}
		for _, a := range r.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				p.IPs = append(p.IPs, ip.Unmap())
			}
		}
		key := r.Cluster + "/" + r.Namespace
		snap.pods[key] = append(snap.pods[key], p)
	}
	for _, ps := range snap.pods {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	}
	return snap, nil
}
