package bgp

import (
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kovnv1 "github.com/kovn/kovn/api/v1alpha1"
)

// A node's status entry says what a reader needs (state, local address, prefixes, why it is
// down), keeps its condition's transition time while nothing changes, and counts as unchanged
// then (no write every second of uptime).
func TestNodeStatusEntry(t *testing.T) {
	since := time.Date(2026, 11, 26, 4, 0, 0, 300, time.UTC)
	up := PeerState{Name: "tor", Address: netip.MustParseAddr("172.30.0.254"), State: "Established",
		LocalAddress: netip.MustParseAddr("172.30.1.11"), EstablishedSince: since, Sent: 3, Received: 1, LastError: "old"}
	e := nodeStatus("n1", up, true, "", kovnv1.BgpPeerNodeStatus{})
	c := meta.FindStatusCondition(e.Conditions, ConditionEstablished)
	if e.State != kovnv1.BgpStateEstablished || e.LocalAddress != "172.30.1.11" || e.PrefixesSent != 3 || e.LastError != "" ||
		c == nil || c.Status != metav1.ConditionTrue || !e.EstablishedSince.Time.Equal(since.Truncate(time.Second)) {
		t.Fatalf("established entry %+v", e)
	}
	again := nodeStatus("n1", up, true, "", e)
	if !sameStatus(e, again) {
		t.Errorf("nothing changed but the entry differs: %+v vs %+v", e, again)
	}
	down := up
	down.State, down.EstablishedSince, down.LastError = "Active", time.Time{}, "cannot connect: i/o timeout"
	d := nodeStatus("n1", down, true, "", e)
	c = meta.FindStatusCondition(d.Conditions, ConditionEstablished)
	if sameStatus(e, d) || d.LastError != "cannot connect: i/o timeout" || c.Status != metav1.ConditionFalse || c.Reason != "Active" {
		t.Errorf("down entry %+v", d)
	}
	bad := nodeStatus("n1", PeerState{}, false, `password Secret "x" not found in kovn's namespace`, kovnv1.BgpPeerNodeStatus{})
	c = meta.FindStatusCondition(bad.Conditions, ConditionEstablished)
	if bad.State != kovnv1.BgpStateIdle || c.Reason != "InvalidPeer" || bad.LastError == "" {
		t.Errorf("invalid peer entry %+v", bad)
	}
}
