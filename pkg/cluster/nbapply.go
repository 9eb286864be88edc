package cluster

import (
	"context"
	"errors"
	"time"

	libovsdb "github.com/ovn-org/libovsdb/client"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kovn/kovn/pkg/cluster/nbsync"
	"github.com/kovn/kovn/pkg/cluster/topology"
)

// parentRetry is how soon a shard whose parent row (a switch, router or port group another
// reconciler creates) is missing is applied again.
const parentRetry = time.Second

// applyShard applies one object's shard. A missing parent is an ordering matter between
// reconcilers, not a failure: it is retried soon instead of with error backoff.
func applyShard(ctx context.Context, nb libovsdb.Client, sh topology.Shard) (ctrl.Result, error) {
	n, err := nbsync.Apply(ctx, nb, sh)
	countTransaction(sh.OwnerType, n)
	if errors.Is(err, nbsync.ErrParentMissing) {
		log.FromContext(ctx).V(1).Info("waiting for a parent row", "owner", sh.OwnerType+"/"+sh.Owner, "err", err)
		return ctrl.Result{RequeueAfter: parentRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if n > 0 {
		log.FromContext(ctx).V(1).Info("northbound synced", "owner", sh.OwnerType+"/"+sh.Owner, "operations", n)
	}
	return ctrl.Result{}, nil
}

// countTransaction records one shard apply that sent n > 0 operations, so a benchmark can
// tell how many NB round trips a workload cost. Apply reports 0 when the transaction failed,
// so failed transactions are not counted.
func countTransaction(ownerType string, n int) {
	if n > 0 {
		nbTransactions.WithLabelValues(ownerType).Inc()
		nbOperations.WithLabelValues(ownerType).Add(float64(n))
	}
}

// emptyShard deletes everything an owner had.
func emptyShard(ownerType, owner string) topology.Shard {
	return topology.Shard{OwnerType: ownerType, Owner: owner}
}
