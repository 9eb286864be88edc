package nbsync

import (
	"k8s.io/utils/ptr"

	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Meters (the ACL log meter) are root rows named uniquely; each has one drop band, a
// Meter_Band row it references strongly (not a root table: the server deletes a band no meter
// lists). A changed rate updates the band in place, so ACLs naming the meter are not touched.

func (t *tx) syncMeters() {
	want := map[string]bool{}
	for _, w := range t.sh.Meters {
		want[w.Name] = true
		band := &nb.MeterBand{Action: nb.MeterBandActionDrop, Rate: w.RatePPS, BurstSize: w.BurstPackets}
		cur := byName(t, &nb.Meter{Name: w.Name})
		if cur == nil {
			bandID := t.create(band, func(id string) { band.UUID = id })
			m := &nb.Meter{Name: w.Name, Unit: nb.MeterUnitPktps, Bands: []string{bandID}, Fair: ptr.To(false),
				ExternalIDs: t.ids(nil, "")}
			t.create(m, func(id string) { m.UUID = id })
			continue
		}
		m := &nb.Meter{UUID: cur.UUID, Name: w.Name, Unit: nb.MeterUnitPktps, Fair: ptr.To(false), ExternalIDs: t.ids(nil, "")}
		if cur.Unit != m.Unit || cur.Fair == nil || *cur.Fair || !sameMap(cur.ExternalIDs, m.ExternalIDs) {
			t.update(m, &m.Unit, &m.Fair, &m.ExternalIDs)
		}
		t.syncMeterBand(m, cur.Bands, band)
	}
	for _, cur := range findOwned(t, &nb.Meter{ExternalIDs: ownerProbe(t.sh)}) {
		if !want[cur.Name] {
			t.delete(cur)
		}
	}
}

// syncMeterBand makes the meter's bands the one band want: the first band updated in place,
// any other dropped from the meter.
func (t *tx) syncMeterBand(m *nb.Meter, bands []string, want *nb.MeterBand) {
	var cur *nb.MeterBand
	if len(bands) > 0 {
		cur = &nb.MeterBand{UUID: bands[0]}
		if t.c.Get(t.ctx, cur) != nil {
			cur = nil
		}
	}
	if cur == nil {
		id := t.create(want, func(id string) { want.UUID = id })
		m.Bands = []string{id}
		t.update(m, &m.Bands)
		return
	}
	if cur.Action != want.Action || cur.Rate != want.Rate || cur.BurstSize != want.BurstSize {
		want.UUID = cur.UUID
		t.update(want, &want.Action, &want.Rate, &want.BurstSize)
	}
	if len(bands) > 1 {
		m.Bands = bands[:1]
		t.update(m, &m.Bands)
	}
}
