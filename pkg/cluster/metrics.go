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
	// subnetAddresses follows each valid subnet's IPAM counts (as its status shows them).
	subnetAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kovn_subnet_addresses", Help: "Addresses of each subnet kovn accepted, by family (ipv4, ipv6) and state (used, available).",
	}, []string{"subnet", "family", "state"})
)

func init() { metrics.Registry.MustRegister(nbTransactions, nbOperations, subnetAddresses) }

// RegisterOVSDBConnected exports whether one of kovn-controller's database connections is up
// (read at each scrape), as kovn_ovsdb_connected{db}.
func RegisterOVSDBConnected(reg prometheus.Registerer, db string, connected func() bool) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kovn_ovsdb_connected",
		Help: "1 while kovn-controller's connection to the database is up.", ConstLabels: prometheus.Labels{"db": db}},
		func() float64 {
			if connected() {
				return 1
			}
			return 0
		}))
}

// setSubnetAddresses records a subnet's usage; a family the subnet does not have stays absent.
func setSubnetAddresses(subnet string, v4Used, v4Avail, v6Used, v6Avail float64, hasV4, hasV6 bool) {
	for _, f := range []struct {
		family      string
		has         bool
		used, avail float64
	}{{"ipv4", hasV4, v4Used, v4Avail}, {"ipv6", hasV6, v6Used, v6Avail}} {
		if f.has {
			subnetAddresses.WithLabelValues(subnet, f.family, "used").Set(f.used)
			subnetAddresses.WithLabelValues(subnet, f.family, "available").Set(f.avail)
		}
	}
}
