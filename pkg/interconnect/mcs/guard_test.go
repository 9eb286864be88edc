package mcs

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	mcsv1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/kovn/kovn/pkg/interconnect/tamper"
)

// TestGuardFlagsOnlyRowsSomeoneElseChanged: a write is tampering only when what this cluster
// publishes did not change since its last write, settleTime or more ago.
func TestGuardFlagsOnlyRowsSomeoneElseChanged(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	log := &tamper.Log{}
	r := &ExportReconciler{Recorder: rec, Tamper: log}
	key := types.NamespacedName{Namespace: "demo", Name: "web"}
	se := &mcsv1.ServiceExport{}
	age := func() { // the last write happened long enough ago
		w := r.written[key]
		w.at = w.at.Add(-settleTime)
		r.written[key] = w
	}
	flagged := func() bool { _, _, ok := log.Latest(time.Now()); return ok }

	r.guard(se, key, "v1", true) // first publish
	r.guard(se, key, "v1", false)
	r.guard(se, key, "v1", true) // within settleTime: perhaps its own write not yet cached
	if flagged() {
		t.Fatal("flagged its own writes")
	}
	age()
	r.guard(se, key, "v2", true) // the Service changed: an ordinary write
	if flagged() {
		t.Fatal("flagged a change of what it publishes")
	}
	age()
	r.guard(se, key, "v2", true) // unchanged wish, rows rewritten: someone else changed them
	if !flagged() {
		t.Fatal("rows rewritten with nothing changed here were not flagged")
	}
	if ev := <-rec.Events; !strings.Contains(ev, "RecordTampered") || !strings.Contains(ev, "demo/web") {
		t.Errorf("event %q", ev)
	}
	r.forget(key)
	age2 := r.written[key]
	if !age2.at.IsZero() {
		t.Error("forget kept the guard")
	}
}

func TestFingerprintIgnoresSliceOrder(t *testing.T) {
	a, b := Slice{Name: "a", AddressType: "IPv4"}, Slice{Name: "b", AddressType: "IPv6"}
	if fingerprint(Export{Name: "web"}, []Slice{a, b}) != fingerprint(Export{Name: "web"}, []Slice{b, a}) {
		t.Error("the same slices listed in another order look like another export")
	}
	if fingerprint(Export{Name: "web"}, []Slice{a}) == fingerprint(Export{Name: "web"}, []Slice{a, b}) {
		t.Error("different slices, same fingerprint")
	}
}
