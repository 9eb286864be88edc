package cluster

import (
	"context"
	"strings"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mnpv1 "github.com/kovn/kovn/api/mnp/v1beta1"
	policyv1 "github.com/kovn/kovn/api/policy/v1beta1"
	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// OrphanCollector removes the northbound rows of objects deleted while no controller ran
// (no event will ever come for them). It scans the northbound tables once at start-up and
// then every Interval; events keep everything else current.
type OrphanCollector struct {
	Cache    client.Reader // the manager's cache: the cheap first check
	Live     client.Reader // the API itself: confirms before anything is deleted
	State    *State
	NB       libovsdb.Client
	Interval time.Duration
}

// NeedLeaderElection: only the leader writes to OVN.
func (g *OrphanCollector) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (g *OrphanCollector) Start(ctx context.Context) error {
	if err := g.State.WaitRestored(ctx); err != nil {
		return nil
	}
	for {
		if n, err := g.Collect(ctx); err != nil {
			ctrl.Log.Error(err, "collecting northbound rows of deleted objects")
		} else if n > 0 {
			ctrl.Log.Info("removed northbound rows of deleted objects", "owners", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(g.Interval):
		}
	}
}

// Collect deletes the shards of owners that no longer exist and returns how many it removed.
func (g *OrphanCollector) Collect(ctx context.Context) (int, error) {
	owners, err := nbsync.Owners(ctx, g.NB)
	if err != nil {
		return 0, err
	}
	n := 0
	for o := range owners {
		gone, err := g.gone(ctx, o)
		if err != nil {
			return n, err
		}
		if !gone {
			continue
		}
		if _, err := nbsync.Apply(ctx, g.NB, emptyShard(o.Type, o.Key)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (g *OrphanCollector) gone(ctx context.Context, o nbsync.Owner) (bool, error) {
	var obj client.Object
	key := types.NamespacedName{Name: o.Key}
	switch o.Type {
	case topology.OwnerVpc:
		obj = &kovnv1.Vpc{}
	case topology.OwnerSubnet:
		obj = &kovnv1.Subnet{}
	case topology.OwnerFloatingIP:
		obj = &kovnv1.FloatingIP{}
	case topology.OwnerEgressIP:
		obj = &kovnv1.EgressIP{}
	case topology.OwnerForeignAZ:
		obj = &kovnv1.ForeignAZ{}
	case topology.OwnerNode:
		obj = &corev1.Node{}
	case topology.OwnerClusterNetworkPolicy:
		obj = &policyv1.ClusterNetworkPolicy{}
	case topology.OwnerPod, topology.OwnerService, topology.OwnerNetworkPolicy, topology.OwnerMultiNetworkPolicy:
		ns, name, ok := strings.Cut(o.Key, "/")
		if !ok {
			return true, nil
		}
		key, obj = types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{}
		switch o.Type {
		case topology.OwnerService:
			obj = &corev1.Service{}
		case topology.OwnerNetworkPolicy:
			obj = &networkingv1.NetworkPolicy{}
		case topology.OwnerMultiNetworkPolicy:
			obj = &mnpv1.MultiNetworkPolicy{}
		}
	default:
		return false, nil
	}
	if err := g.Cache.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
		return false, err
	}
	err := g.Live.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}
