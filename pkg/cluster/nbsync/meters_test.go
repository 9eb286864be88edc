package nbsync

import (
	"slices"
	"testing"

	"github.com/ovn-org/libovsdb/client"
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

func meterBand(t *testing.T, c client.Client, name string) (nb.Meter, nb.MeterBand) {
	t.Helper()
	m := named(t, c, name, func(r nb.Meter) string { return r.Name })
	if len(m.Bands) != 1 {
		t.Fatalf("meter %+v: want one band", m)
	}
	for _, b := range list[nb.MeterBand](t, c) {
		if b.UUID == m.Bands[0] {
			return m, b
		}
	}
	t.Fatalf("meter %s: band %s not found", name, m.Bands[0])
	return m, nb.MeterBand{}
}

// TestACLLogMeter: the meter is created with one drop band in packets per second, re-applying
// sends nothing, a new rate updates the band in place (one operation), and the empty shard
// deletes the meter.
func TestACLLogMeter(t *testing.T) {
	c := connect(t)
	if got := settled(t, c, topology.ForACLLogMeter(20)); !slices.Equal(got, []string{"insert Meter", "insert Meter_Band"}) {
		t.Errorf("create: %v", got)
	}
	m, b := meterBand(t, c, topology.ACLLogMeter)
	if m.Unit != nb.MeterUnitPktps || ptr.Deref(m.Fair, true) || b.Action != nb.MeterBandActionDrop || b.Rate != 20 || b.BurstSize != 20 {
		t.Errorf("meter %+v band %+v", m, b)
	}
	if got := settled(t, c, topology.ForACLLogMeter(5)); !slices.Equal(got, []string{"update Meter_Band"}) {
		t.Errorf("rate 20 -> 5: %v, want one band update", got)
	}
	if _, b := meterBand(t, c, topology.ACLLogMeter); b.Rate != 5 || b.BurstSize != 5 {
		t.Errorf("band after the change %+v", b)
	}
	settled(t, c, topology.Shard{OwnerType: topology.OwnerACLLogging, Owner: topology.ACLLogMeter})
	if n := len(list[nb.Meter](t, c)); n != 0 {
		t.Errorf("%d meters left after the empty shard", n)
	}
}

// TestPolicyACLLogging: logging turned on updates the policy's ACLs in place (log, severity,
// meter), and turned off clears them again.
func TestPolicyACLLogging(t *testing.T) {
	c := connect(t)
	policyBase(t, c)
	in := policyIn([]string{"a", "b"}, []string{"10.16.0.9"}, 80)
	settled(t, c, topology.ForNetworkPolicy(in))
	in.Logging = topology.ACLLogging{Deny: "alert", Allow: "notice"}
	sh := topology.ForNetworkPolicy(in)
	var logged int
	for _, a := range sh.ACLs {
		if a.LogSeverity != "" {
			logged++
		}
	}
	got := settled(t, c, sh)
	if len(got) != logged || slices.ContainsFunc(got, func(op string) bool { return op != "update ACL" }) {
		t.Errorf("logging on: %v, want %d ACL updates", got, logged)
	}
	rows := ownedACLs(t, c, "default/web")
	for _, w := range sh.ACLs {
		r := rows[w.Name]
		if r.Log != (w.LogSeverity != "") || ptr.Deref(r.Severity, "") != w.LogSeverity ||
			(w.LogSeverity != "" && ptr.Deref(r.Meter, "") != topology.NamespaceLogMeter("default")) {
			t.Errorf("ACL %s: log %v severity %v meter %v, want %q", w.Name, r.Log, ptr.Deref(r.Severity, ""), ptr.Deref(r.Meter, ""), w.LogSeverity)
		}
	}
	in.Logging = topology.ACLLogging{}
	settled(t, c, topology.ForNetworkPolicy(in))
	for name, r := range ownedACLs(t, c, "default/web") {
		if r.Log || r.Severity != nil || r.Meter != nil {
			t.Errorf("logging off: ACL %s still logs (%v %v)", name, r.Severity, r.Meter)
		}
	}
}
