package nbsync

import (
	"maps"
	"slices"
	"strings"

	"github.com/kovn/kovn/pkg/cluster/topology"
	"github.com/kovn/kovn/pkg/ovn/model/nb"
)

// Chassis template variables (Chassis_Template_Var): one row per chassis, shared by every
// shard. A shard owns the variables whose names start with its TemplateVarPrefix, and changes
// only those, by mutation of the keys, so Services reconciled side by side never overwrite each
// other's. A chassis row is created by the first shard that needs it and never deleted: an
// empty row costs nothing, and deleting it could race another shard's insert of a variable.
func (t *tx) syncTemplateVars() {
	prefix := topology.TemplateVarPrefix(t.sh.OwnerType, t.sh.Owner)
	if prefix == "" {
		return
	}
	var rows []*nb.ChassisTemplateVar
	if err := t.c.List(t.ctx, &rows); err != nil {
		t.add(nil, err)
		return
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Chassis] = true
		var drop []string
		for k := range r.Variables {
			if strings.HasPrefix(k, prefix) {
				drop = append(drop, k)
			}
		}
		want := t.sh.TemplateVars[r.Chassis]
		if len(want) == 0 && len(drop) == 0 {
			continue
		}
		t.setKeys(r, &r.Variables, want, drop)
	}
	for _, ch := range slices.Sorted(maps.Keys(t.sh.TemplateVars)) {
		if vars := t.sh.TemplateVars[ch]; !seen[ch] && len(vars) > 0 {
			row := &nb.ChassisTemplateVar{Chassis: ch, Variables: maps.Clone(vars)}
			t.create(row, func(id string) { row.UUID = id })
		}
	}
}
