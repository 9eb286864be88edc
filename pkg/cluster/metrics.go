package cluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Northbound write metrics, per owner type (Pod, Service, NetworkPolicy, ...): how many shard
// applies sent a transaction and how many operations they carried. An unchanged object costs
// no transaction, so after a restart these stay flat.
var (
	nbTransactions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kovn_nb_transactions_total", Help: "Northbound transactions sent, by owner type of the shard.",
	}, []string{"owner_type"})
	nbOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kovn_nb_operations_total", Help: "Northbound operations sent, by owner type of the shard.",
	}, []string{"owner_type"})
)

func init() { metrics.Registry.MustRegister(nbTransactions, nbOperations) }
