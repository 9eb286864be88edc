package interconnect

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
	"github.com/kovn/kovn/pkg/interconnect/tamper"
)

// What the leader's last interconnect reconcile saw, per remote AZ; a cluster that is not
// interconnected (or a replica that is not the leader) exports none of these.
var (
	metricPeerReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_ic_peer_ready",
		Help: "1 while the remote AZ has a gateway and its transit port is bound to one in IC-SB."}, []string{"az"})
	metricPeerRoutes = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_ic_peer_routes",
		Help: "Prefixes the remote AZ advertises in IC-SB (what this AZ learns from it)."}, []string{"az"})
	metricPeerGateways = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_ic_peer_gateways",
		Help: "Gateway chassis the remote AZ registered in IC-SB."}, []string{"az"})
	metricLocal = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kovn_ic_local",
		Help: "This AZ: ready (1 while InterConnect Ready is True), active_gateways, advertised_routes, route_conflicts, unknown_azs (on kovn's transit switches without a join record)."},
		[]string{"az", "item"})
)

func init() {
	metrics.Registry.MustRegister(metricPeerReady, metricPeerRoutes, metricPeerGateways, metricLocal, tamper.Restored)
}

// azMetrics is one reconcile's view, set whole so departed AZs disappear.
type azMetrics struct {
	local                                 string
	ready                                 bool
	activeGateways, advertised, conflicts int
	unknown                               int // AZs on kovn's transit switches without a join record (noteUnknown)
	peerReady                             map[string]bool
	peerRoutes, peerGateways              map[string]int
}

func (m azMetrics) set() {
	resetICMetrics()
	if m.local == "" {
		return
	}
	for az, ok := range m.peerReady {
		metricPeerReady.WithLabelValues(az).Set(b2f(ok))
		metricPeerRoutes.WithLabelValues(az).Set(float64(m.peerRoutes[az]))
		metricPeerGateways.WithLabelValues(az).Set(float64(m.peerGateways[az]))
	}
	for item, v := range map[string]float64{"ready": b2f(m.ready), "active_gateways": float64(m.activeGateways),
		"advertised_routes": float64(m.advertised), "route_conflicts": float64(m.conflicts), "unknown_azs": float64(m.unknown)} {
		metricLocal.WithLabelValues(m.local, item).Set(v)
	}
}

func resetICMetrics() {
	for _, v := range []*prometheus.GaugeVec{metricPeerReady, metricPeerRoutes, metricPeerGateways, metricLocal} {
		v.Reset()
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// readPeers fills the remote AZs' part from IC-SB as fillStatus reads it.
func (m *azMetrics) readPeers(local string, cs clusterset, conflicts int) {
	m.peerReady, m.peerRoutes, m.peerGateways = map[string]bool{}, map[string]int{}, map[string]int{}
	for _, az := range cs.peers(local) {
		m.peerReady[az] = len(cs.gateways[az]) > 0 && cs.portGateway[SwitchPortName(az, DefaultTransitSwitch)] != ""
		m.peerRoutes[az] = len(cs.routes[az])
		m.peerGateways[az] = len(cs.gateways[az])
	}
	m.conflicts = conflicts
}

// exportMetrics sets the gauges from the status a reconcile leaves and the peers it last read
// (kept while the IC databases cannot be read, with ready 0).
func (r *Reconciler) exportMetrics(ic *kovnv1.InterConnect) {
	m := r.lastView
	m.local = ic.Status.AZName
	if m.local == "" {
		m.local = ic.Spec.AZName
	}
	m.ready = meta.IsStatusConditionTrue(ic.Status.Conditions, kovnv1.ConditionReady)
	m.activeGateways, m.advertised = len(ic.Status.ActiveGateways), len(ic.Status.Advertised)
	m.set()
}

// connCollector exports kovn_ovsdb_connected{db="ic-nb"|"ic-sb"} while an InterConnect names
// the IC databases: 0 while they cannot be reached, absent without interconnect.
type connCollector struct{ c *icConn }

var connDesc = prometheus.NewDesc("kovn_ovsdb_connected", "1 while kovn-controller's connection to the database is up.",
	[]string{"db"}, nil)

// Describe sends nothing: the series shares its name with the NB/SB gauges (an unchecked collector).
func (connCollector) Describe(chan<- *prometheus.Desc) {}

func (cc connCollector) Collect(ch chan<- prometheus.Metric) {
	nb, sb, wanted := cc.c.state()
	if !wanted {
		return
	}
	ch <- prometheus.MustNewConstMetric(connDesc, prometheus.GaugeValue, b2f(nb), "ic-nb")
	ch <- prometheus.MustNewConstMetric(connDesc, prometheus.GaugeValue, b2f(sb), "ic-sb")
}

// RegisterMetrics adds the IC database connection gauges to reg.
func (r *Reconciler) RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(connCollector{&r.ic})
}
