package cluster

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ImportedSliceManager is the managed-by label of the EndpointSlices kovn's MCS imports write
// (another cluster's endpoints of an exported Service, labelled with their source cluster).
const ImportedSliceManager = "mcs.kovn.io"

// LabelSourceCluster is the mcs-api label naming an imported slice's cluster.
const LabelSourceCluster = "multicluster.kubernetes.io/source-cluster"

// ClusterHealth says which clusters of the clusterset this one cannot reach now (every BFD
// session toward their gateways down). The Services' load balancers leave those clusters'
// imported endpoints out meanwhile, without waiting for the clusterset store, and take them
// back when the sessions come up.
type ClusterHealth interface {
	Unreachable(cluster string) bool
	// OnChange has f called whenever the set of unreachable clusters changes.
	OnChange(f func())
}

// reachableSlices are slices without the imported ones of unreachable clusters.
func reachableSlices(list []discoveryv1.EndpointSlice, h ClusterHealth) []discoveryv1.EndpointSlice {
	if h == nil {
		return list
	}
	out := list[:0:0]
	for _, s := range list {
		if s.Labels[discoveryv1.LabelManagedBy] == ImportedSliceManager && h.Unreachable(s.Labels[LabelSourceCluster]) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// importedServices are the Services with imported slices: those a change of cluster health
// re-queues.
func importedServices(ctx context.Context, c client.Reader) []reconcile.Request {
	var list discoveryv1.EndpointSliceList
	if err := c.List(ctx, &list, client.MatchingLabels{discoveryv1.LabelManagedBy: ImportedSliceManager}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing imported EndpointSlices")
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for _, s := range list.Items {
		key := types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
		if key.Name != "" && !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// healthSource re-queues the Services with imported slices whenever h changes.
func healthSource(h ClusterHealth, c client.Reader) source.Source {
	events := make(chan event.TypedGenericEvent[reconcile.Request], 1)
	h.OnChange(func() {
		select {
		case events <- event.TypedGenericEvent[reconcile.Request]{}:
		default: // one pending event re-queues them all
		}
	})
	return source.Channel(events, handler.TypedFuncs[reconcile.Request, reconcile.Request]{
		GenericFunc: func(ctx context.Context, _ event.TypedGenericEvent[reconcile.Request], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			for _, req := range importedServices(ctx, c) {
				q.Add(req)
			}
		}})
}
