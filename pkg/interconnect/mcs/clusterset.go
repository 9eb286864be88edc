package mcs

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	libovsdb "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/interconnect/ictls"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
	"github.com/kovn/kovn/pkg/ovn"
	"github.com/kovn/kovn/pkg/ovn/model/clusterset"
)

// Clusterset is this cluster's membership of the clusterset as MCS sees it: the connection to
// the clusterset store (served by the IC-SB servers the InterConnect names) and the cluster's
// id there. Changes in the store re-queue the export and import reconcilers of the Service
// they concern.
type Clusterset struct {
	// Tamper, if set, records this cluster's rows put back after someone else changed them.
	Tamper *tamper.Log
	// writers orders this cluster's writes against membership changes: an export reconcile
	// holds it shared while it writes, leaving or renaming holds it alone, so no export is
	// written under an id after its rows were removed (they would stay behind for good).
	writers sync.RWMutex
	mu      sync.Mutex
	member  bool // an InterConnect exists and is not being deleted
	decided bool // the membership reconciler has run once: member means something
	eps     []string
	db      libovsdb.Client
	store   *Store
	queues  []workqueue.TypedRateLimitingInterface[reconcile.Request]
	connect func(ctx context.Context, eps []string) (libovsdb.Client, error)
	tls     *ictls.Loader
	// peers is the view of the other clusters' published pods (Peers), once asked for.
	peers *PeerView
	// live knows whether the store answers (libovsdb's Connected stays true while it
	// reconnects); stopLive ends its probing with the connection.
	live     *ovn.Liveness
	stopLive context.CancelFunc
	// publishQueues are fed the namespaces whose rows of this cluster changed in the store.
	publishQueues []workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// NewClusterset returns a Clusterset that connects with ovn.ConnectClusterSet, presenting
// the certificate tls loads (nil: tcp: endpoints only).
func NewClusterset(tls *ictls.Loader) *Clusterset {
	c := &Clusterset{tls: tls}
	c.connect = func(ctx context.Context, eps []string) (libovsdb.Client, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		cfg := ovn.Config{Endpoints: eps, LeaderOnly: true, Logger: ctrl.Log.WithName("clusterset"), MaxRetryInterval: 2 * time.Second}
		if tls != nil {
			cfg.Credentials = tls
		}
		return ovn.ConnectClusterSet(ctx, cfg)
	}
	return c
}

// loadCredentials reads the InterConnect's TLS Secret for the store's connection. The
// interconnect reconciler reports a bad Secret in the InterConnect's status; here it only
// matters whether any certificate is usable.
func (c *Clusterset) loadCredentials(ctx context.Context, spec *kovnv1.InterConnectSpec) error {
	if c.tls == nil {
		return nil
	}
	if usable, err := c.tls.Refresh(ctx, spec); !usable {
		return err
	}
	return nil
}

// Store is the store while connected, else nil; member says whether the cluster is in a
// clusterset at all (without an InterConnect its imports go; while merely disconnected they
// stay as they were). Until the membership reconciler has looked at the InterConnect, the
// cluster counts as a member not connected yet: a new leader's import reconciler must not read
// "no clusterset" and delete every import it then recreates (the membership reconciler
// re-queues them all once it has decided).
func (c *Clusterset) Store() (store *Store, member bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store, c.member || !c.decided
}

// Writer is Store for a reconciler that writes this cluster's rows: release must be called
// once it is done writing.
func (c *Clusterset) Writer() (store *Store, release func()) {
	c.writers.RLock()
	store, _ = c.Store()
	return store, c.writers.RUnlock
}

// set makes the connection match: endpoints eps as cluster id (none: not a member). It
// returns whether the store changed (a new connection or cluster id).
func (c *Clusterset) set(ctx context.Context, id string, eps []string) (bool, error) {
	// After the unlock (the view takes its own lock, then c.mu): the store may hold anything.
	defer c.publishAll()
	defer c.peersChanged("")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.member, c.decided = id != "", true
	if c.db != nil && id != "" && slices.Equal(eps, c.eps) {
		if c.store.Cluster == id {
			return false, nil
		}
		c.store = &Store{DB: c.db, Cluster: id}
		return true, nil
	}
	c.closeLocked()
	if id == "" {
		return true, nil
	}
	db, err := c.connect(ctx, eps)
	if err != nil {
		return true, err
	}
	c.watch(db)
	c.db, c.eps, c.store = db, slices.Clone(eps), &Store{DB: db, Cluster: id}
	liveCtx, stop := context.WithCancel(context.Background())
	c.live, c.stopLive = ovn.WatchLiveness(liveCtx, db, 0), stop
	c.live.OnChange(func(up bool) {
		c.peersChanged("")
		if up {
			c.publishAll() // what changed while the store was away
		}
	})
	return true, nil
}

// answers says whether the store answers now. Asked outside c.mu: libovsdb's Connected waits
// while a reconnection attempt holds its lock.
func (c *Clusterset) answers() bool {
	c.mu.Lock()
	live := c.live
	c.mu.Unlock()
	return live.Answers()
}

// watch has every change of db's cache re-queue what it concerns (changed).
func (c *Clusterset) watch(db libovsdb.Client) {
	db.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { c.changed(m) },
		UpdateFunc: func(_ string, old, m model.Model) { c.changed(old); c.changed(m) },
		DeleteFunc: func(_ string, m model.Model) { c.changed(m) },
	})
}

func (c *Clusterset) closeLocked() {
	if c.stopLive != nil {
		c.stopLive()
	}
	if c.db != nil {
		c.db.Close()
	}
	c.db, c.eps, c.store, c.live, c.stopLive = nil, nil, nil, nil, nil
}

// changed re-queues the Service a store row belongs to (child rows change with their parent),
// or, for a published pod or namespace, tells the peer view (another cluster's) or the
// publisher (this cluster's, to put back what someone else changed).
func (c *Clusterset) changed(m model.Model) {
	switch r := m.(type) {
	case *clusterset.ServiceExport:
		c.Enqueue(r.Namespace, r.Name)
	case *clusterset.EndpointSlice:
		c.Enqueue(r.Namespace, r.Service)
	case *clusterset.PolicyNamespace:
		c.policyRowChanged(r.Cluster, r.Name)
	case *clusterset.PolicyPod:
		c.policyRowChanged(r.Cluster, r.Namespace)
	case *clusterset.Cluster:
		c.peersChanged("") // a cluster came or went: its peers with it
	}
}

func (c *Clusterset) policyRowChanged(cluster, namespace string) {
	c.mu.Lock()
	own := c.store != nil && c.store.Cluster == cluster
	qs := slices.Clone(c.publishQueues)
	c.mu.Unlock()
	if !own {
		c.peersChanged(namespace)
		return
	}
	for _, q := range qs {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: namespace}})
	}
}

func (c *Clusterset) peersChanged(namespace string) {
	c.mu.Lock()
	v := c.peers
	c.mu.Unlock()
	if v != nil {
		v.changed(namespace)
	}
}

// publishAll asks the publisher to re-sync every namespace.
func (c *Clusterset) publishAll() {
	c.mu.Lock()
	qs := slices.Clone(c.publishQueues)
	c.mu.Unlock()
	for _, q := range qs {
		q.Add(reconcile.Request{})
	}
}

// PublishSource feeds the publisher the namespaces whose rows of this cluster changed.
func (c *Clusterset) PublishSource() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.publishQueues = append(c.publishQueues, q)
		return nil
	})
}

// Enqueue re-queues namespace/name in every reconciler fed by the clusterset.
func (c *Clusterset) Enqueue(namespace, name string) {
	c.mu.Lock()
	qs := slices.Clone(c.queues)
	c.mu.Unlock()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
	for _, q := range qs {
		q.Add(req)
	}
}

// Source feeds a controller the Services whose rows changed in the store.
func (c *Clusterset) Source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.queues = append(c.queues, q)
		return nil
	})
}
