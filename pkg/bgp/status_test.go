package bgp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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

// A session held down for its prefix limit says so in a PrefixLimitReached condition naming
// the node and the limit (with one Warning event), keeps it while nothing changes, and loses
// it once the session is back.
func TestNodeStatusPrefixLimit(t *testing.T) {
	up := PeerState{Name: "tor", Address: netip.MustParseAddr("172.30.0.254"), State: "Established",
		LocalAddress: netip.MustParseAddr("172.30.1.13"), EstablishedSince: time.Now(), Received: 3}
	established := nodeStatus("c1-n3", up, true, "", kovnv1.BgpPeerNodeStatus{})
	if meta.FindStatusCondition(established.Conditions, ConditionPrefixLimitReached) != nil {
		t.Fatalf("a session within its limit has a PrefixLimitReached condition: %+v", established.Conditions)
	}
	held := PeerState{Name: "tor", Address: up.Address, State: "Idle", Flaps: 1, PrefixLimitHit: 3,
		LastError: "session down: reason notification-sent code 6(cease) subcode 1(maximum number of prefixes reached)"}
	e := nodeStatus("c1-n3", held, true, "", established)
	c := meta.FindStatusCondition(e.Conditions, ConditionPrefixLimitReached)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonPrefixLimitReached ||
		!strings.Contains(c.Message, "c1-n3") || !strings.Contains(c.Message, "maxPrefixes (3)") {
		t.Fatalf("held-down entry's PrefixLimitReached condition: %+v", c)
	}
	if est := meta.FindStatusCondition(e.Conditions, ConditionEstablished); est.Status != metav1.ConditionFalse ||
		est.Reason != ReasonPrefixLimitReached || e.LastError != c.Message || sameStatus(established, e) {
		t.Errorf("held-down entry %+v", e)
	}
	if again := nodeStatus("c1-n3", held, true, "", e); !sameStatus(e, again) {
		t.Errorf("still held down but the entry differs: %+v vs %+v", e, again)
	}
	back := nodeStatus("c1-n3", up, true, "", e)
	if meta.FindStatusCondition(back.Conditions, ConditionPrefixLimitReached) != nil || sameStatus(e, back) {
		t.Errorf("session back, entry %+v", back)
	}

	scheme := runtime.NewScheme()
	if err := kovnv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(10)
	w := &StatusWriter{Node: "c1-n3", Recorder: rec,
		Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(&kovnv1.BgpPeer{ObjectMeta: metav1.ObjectMeta{Name: "tor"}}).Build()}
	w.event("tor", established, true, e)
	w.event("tor", e, true, e) // still held down: no second event
	if len(rec.Events) != 1 {
		t.Fatalf("%d events, want 1", len(rec.Events))
	}
	if ev := <-rec.Events; !strings.HasPrefix(ev, "Warning PrefixLimitReached c1-n3: ") || !strings.Contains(ev, "(3)") {
		t.Errorf("event %q", ev)
	}
}
