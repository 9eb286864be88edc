package interconnect

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

func TestExportMetrics(t *testing.T) {
	cs := clusterset{
		azName: map[string]string{"u1": "az1", "u2": "az2", "u3": "az3", "u4": "az4", "u5": "openstack"},
		// openstack is a foreign AZ (ForeignAZ): in IC-SB, but no member of the clusterset.
		members:  map[string]bool{"az1": true, "az2": true, "az3": true, "az4": true},
		gateways: map[string][]string{"az1": {"gw1"}, "az2": {"gw2a", "gw2b"}, "az4": {"gw4"}},
		routes: map[string][]netip.Prefix{"az1": {netip.MustParsePrefix("10.16.0.0/16")},
			"az2": {netip.MustParsePrefix("10.17.0.0/16"), netip.MustParsePrefix("10.97.0.0/16")}},
		portGateway: map[string]string{SwitchPortName("az2", DefaultTransitSwitch): "gw2a",
			SwitchPortName("az3", DefaultTransitSwitch): "gw3"},
	}
	r := &Reconciler{}
	r.lastView.readPeers("az1", cs, 1)
	ic := &kovnv1.InterConnect{Spec: kovnv1.InterConnectSpec{AZName: "az1"}}
	ic.Status.ActiveGateways = []string{"gw1"}
	ic.Status.Advertised = []string{"10.16.0.0/16"}
	ic.Status.Conditions = []metav1.Condition{{Type: kovnv1.ConditionReady, Status: metav1.ConditionTrue}}
	r.exportMetrics(ic)
	// az2 has gateways and a bound port; az3 a bound port but no gateway; az4 a gateway but
	// no bound port; az1 is this AZ.
	want := `
# HELP kovn_ic_peer_ready 1 while the remote AZ has a gateway and its transit port is bound to one in IC-SB.
# TYPE kovn_ic_peer_ready gauge
kovn_ic_peer_ready{az="az2"} 1
kovn_ic_peer_ready{az="az3"} 0
kovn_ic_peer_ready{az="az4"} 0
# HELP kovn_ic_peer_routes Prefixes the remote AZ advertises in IC-SB (what this AZ learns from it).
# TYPE kovn_ic_peer_routes gauge
kovn_ic_peer_routes{az="az2"} 2
kovn_ic_peer_routes{az="az3"} 0
kovn_ic_peer_routes{az="az4"} 0
# HELP kovn_ic_local This AZ: ready (1 while InterConnect Ready is True), active_gateways, advertised_routes, route_conflicts, unknown_azs (on kovn's transit switches without a join record).
# TYPE kovn_ic_local gauge
kovn_ic_local{az="az1",item="active_gateways"} 1
kovn_ic_local{az="az1",item="advertised_routes"} 1
kovn_ic_local{az="az1",item="ready"} 1
kovn_ic_local{az="az1",item="route_conflicts"} 1
kovn_ic_local{az="az1",item="unknown_azs"} 0
`
	if err := testutil.CollectAndCompare(metricPeerReady, strings.NewReader(want), "kovn_ic_peer_ready"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(metricPeerRoutes, strings.NewReader(want), "kovn_ic_peer_routes"); err != nil {
		t.Error(err)
	}
	if err := testutil.CollectAndCompare(metricLocal, strings.NewReader(want), "kovn_ic_local"); err != nil {
		t.Error(err)
	}

	// az3 leaves the clusterset and the IC databases go away: az3's series go, ready drops.
	delete(cs.azName, "u3")
	delete(cs.azName, "u4")
	r.lastView.readPeers("az1", cs, 0)
	ic.Status.Conditions[0].Status = metav1.ConditionFalse
	r.exportMetrics(ic)
	if n := testutil.CollectAndCount(metricPeerReady); n != 1 {
		t.Errorf("kovn_ic_peer_ready has %d series after az3 left, want 1", n)
	}
	if v := testutil.ToFloat64(metricLocal.WithLabelValues("az1", "ready")); v != 0 {
		t.Errorf("ready = %v with Ready False", v)
	}

	// Leaving the clusterset removes every series.
	r.lastView = azMetrics{}
	resetICMetrics()
	if n := testutil.CollectAndCount(metricLocal) + testutil.CollectAndCount(metricPeerRoutes); n != 0 {
		t.Errorf("%d series after leaving", n)
	}
}

func TestICConnectedSeries(t *testing.T) {
	c := &icConn{}
	if n := testutil.CollectAndCount(connCollector{c}); n != 0 {
		t.Errorf("%d series without interconnect, want none", n)
	}
	c.wanted = true // an InterConnect names databases that cannot be reached
	want := `
# HELP kovn_ovsdb_connected 1 while kovn-controller's connection to the database is up.
# TYPE kovn_ovsdb_connected gauge
kovn_ovsdb_connected{db="ic-nb"} 0
kovn_ovsdb_connected{db="ic-sb"} 0
`
	if err := testutil.CollectAndCompare(connCollector{c}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	c.close()
	if n := testutil.CollectAndCount(connCollector{c}); n != 0 {
		t.Errorf("%d series after close, want none", n)
	}
}
